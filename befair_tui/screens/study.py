"""A user study, live: its grid of sessions with each one's state, the aggregate so far, and
Figure 2 (AUC against skin-tone AUC gap per agent × level) in the terminal.

Opened from the sessions screen (`s`: the selected session's study, else the newest study). A
thread worker re-reads the grid every REFRESH seconds; the aggregate (a fold of every finished
session) is recomputed only when a session finishes."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from textual import events, on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.screen import Screen
from textual.widgets import Static

from engine.session.store import SessionStore
from engine.study import grid
from engine.study.tradeoff_plot import Point, reference_points, study_points
from engine.study.report import StudyReport, build_report

from befair_tui.bindings import back_and_quit, open_and_replay
from befair_tui.polling import refresh_every
from befair_tui.screens.session_picker import SessionPicker
from befair_tui.widgets.keys_footer import KeysFooter
from befair_tui.widgets.study_grid import StudyGrid
from befair_tui.widgets.study_plot import StudyPlot
from befair_tui.widgets.study_summary import StudySummary

REFRESH = 2.0
Y_TITLE = "↑ skin-tone AUC gap (test) · lower is fairer"
X_TITLE = "test AUC · higher is better →"
Y_SHORT, X_SHORT = "↑ gap (test), lower is fairer", "test AUC →"


def empty_text(db: Path) -> str:
    """What the Study screen says when the database holds no study: what one is, how to start one."""
    return (
        "[b]No study in this database yet.[/b]\n\n"
        "A study runs the same task many times and compares the results, as the Be Fair! study did: under "
        "several instruction levels (base, fairness-hint, fairness-metric, fairness-methods), each repeated "
        "with other seeds, and optionally with several participants. This screen then shows every session "
        "of the grid as it runs, the average test AUC and skin-tone AUC gap per agent and level, and the "
        "study's figure (test AUC across, skin-tone gap up).\n\n"
        "To start one, describe it in a small text file, say [b]levels.toml[/b]:\n\n"
        '    name = "levels-demo"\n'
        '    levels = ["base", "fairness-methods"]\n'
        "    repeats = 2\n"
        "    steps = 3\n"
        "    \\[coder]\n"
        '    name = "offline"\n\n'
        f"and run it from a terminal:  [b]befair study run levels.toml --db {db}[/b]\n"
        "Its sessions appear here as they run (Esc: back to the sessions). The published study can be "
        "brought in too: befair import be-fair CHECKOUT --metadata ddi_metadata.csv (see docs/study.md)."
    )


class StudyRead(Message):
    """The refresher read the grid (and, when a session finished since, the report)."""

    def __init__(self, rows: list[dict[str, Any]], report: StudyReport | None, references: list[Point],
                 error: str | None = None) -> None:
        super().__init__()
        self.rows, self.report, self.references, self.error = rows, report, references, error


def published_references(report: StudyReport | None) -> list[Point]:
    """The experts' and dermatologists' published rows (baselines/reference.csv), as the figure draws them."""
    from baselines.reference import load_reference_rows

    rows = [{"name": r["name"], "auc": r["auc_mean"], "auc_std": r["auc_std"], "gap": r["gap_mean"],
             "gap_std": r["gap_std"], "source": r["source"],
             "kind": {"dermatologists": "human", "expert": "expert"}.get(str(r.get("agent")), "published")}
            for r in load_reference_rows() if r.get("agent") in ("expert", "dermatologists")]
    return reference_points(rows)


class StudyScreen(SessionPicker):
    DEFAULT_CSS = """
    StudyScreen #study-title { height: 1; padding: 0 1; background: $boost; }
    StudyScreen #study-body { height: 1fr; }
    StudyScreen #study-grid { width: 3fr; height: 1fr; }
    StudyScreen #study-side { width: 2fr; height: 1fr; }
    StudyScreen #study-summary { height: auto; max-height: 14; padding: 0 1; }
    StudyScreen #study-figure { height: 1fr; }
    StudyScreen .axis-title { height: 1; padding: 0 1; color: $text-muted; }
    /* 80 columns: the grid above, the aggregate and the figure side by side below */
    StudyScreen.-narrow #study-body { layout: vertical; }
    StudyScreen.-narrow #study-grid { width: 1fr; height: auto; max-height: 8; }
    StudyScreen.-narrow #study-side { width: 1fr; layout: horizontal; }
    StudyScreen.-narrow #study-summary { width: 1fr; max-height: 100%; }
    StudyScreen.-narrow #study-figure { width: 1fr; }
    StudyScreen #study-x-title { text-align: right; }
    StudyScreen #study-empty { padding: 1 2; height: 1fr; overflow-y: auto; }
    StudyScreen.-empty #study-body { display: none; }
    StudyScreen #study-empty { display: none; }
    StudyScreen.-empty #study-empty { display: block; }
    """
    FOOTER_DROP = ("app.quit", "next_study")
    BINDINGS = [*open_and_replay("study"), Binding("n", "next_study", "Next study", id="study-next"),
                *back_and_quit("study")]

    def __init__(self, store: SessionStore, name: str | None = None) -> None:
        super().__init__()
        self.store = store
        names = grid.study_names(store)
        self.study = name if name in names else (names[-1] if names else None)
        self.rows: list[dict[str, Any]] = []
        self.report: StudyReport | None = None

    def compose(self) -> ComposeResult:
        yield Static(id="study-title")
        with Horizontal(id="study-body"):
            yield StudyGrid(id="study-grid")
            with Vertical(id="study-side"):
                yield StudySummary(id="study-summary")
                # the console's axes: test AUC across, the skin-tone gap up (titles where one looks)
                with Vertical(id="study-figure"):
                    yield Static(Y_TITLE, id="study-y-title", classes="axis-title")
                    yield StudyPlot(id="study-plot")
                    yield Static(X_TITLE, id="study-x-title", classes="axis-title")
        yield Static(empty_text(self.store.path), id="study-empty")
        yield KeysFooter()

    def on_resize(self, event: events.Resize) -> None:
        narrow = event.size.width < 100
        self.set_class(narrow, "-narrow")
        self.query_one("#study-y-title", Static).update(Y_SHORT if narrow else Y_TITLE)
        self.query_one("#study-x-title", Static).update(X_SHORT if narrow else X_TITLE)

    def on_mount(self) -> None:
        self.set_class(self.study is None, "-empty")  # no study: what one is and how to start one
        self.query_one(StudyGrid).focus()
        self._read_now()
        self.refresher()

    def _title(self) -> str:
        if self.study is None:
            return f"Studies in {self.store.path.name} · none yet"
        return f"Study {self.study} in {self.store.path.name} · {len(self.rows)} sessions"

    def _read(self, store: SessionStore, seen: tuple[object, ...] | None, report: StudyReport | None
              ) -> tuple[list[dict[str, Any]], StudyReport | None, tuple[object, ...] | None]:
        """The grid, and the report when a session finished (or failed) since `seen`."""
        if self.study is None:
            return [], None, None
        rows = grid.grid_rows(store, self.study)
        finished = tuple(sorted((r["cell"], r["session_status"], r["updated_at"]) for r in rows
                                if r["state"] in (grid.FINISHED, grid.FAILED)))
        if finished != seen or report is None:
            report = build_report(store, self.study)
        return rows, report, finished

    def _read_now(self) -> None:
        try:
            rows, report, _ = self._read(self.store, None, None)
        except Exception as exc:  # noqa: BLE001 - the screen says it and keeps trying
            self.notify(f"cannot read study {self.study}: {exc}", severity="error")
            rows, report = [], None
        self._show(rows, report, published_references(report))

    @work(thread=True, exclusive=True, group="study-refresh", name="study-refresh")
    def refresher(self) -> None:
        """Read the grid every REFRESH seconds on the worker's own connection; never touches widgets."""
        from textual.worker import get_current_worker

        references = published_references(None)
        study, seen, report = self.study, None, None

        def read(store: SessionStore) -> StudyRead:
            nonlocal study, seen, report
            if study != self.study:  # another study was chosen meanwhile
                study, seen, report = self.study, None, None
            rows, report, seen = self._read(store, seen, report)
            return StudyRead(rows, report, references)

        refresh_every(get_current_worker(), REFRESH, SessionStore(self.store.path), read,
                      lambda error: StudyRead([], None, [], error=error), self.post_message)

    @on(StudyRead)
    def _on_read(self, message: StudyRead) -> None:
        if message.error:
            self.notify(f"cannot read study {self.study}: {message.error}", severity="error")
            return
        self._show(message.rows, message.report, message.references)

    def _show(self, rows: list[dict[str, Any]], report: StudyReport | None, references: list[Point]) -> None:
        self.rows, self.report = rows, report
        self.query_one("#study-title", Static).update(self._title())
        self.query_one(StudyGrid).sync(rows)
        self.query_one(StudySummary).sync(report, grid.counts(rows))
        self.query_one(StudyPlot).sync(study_points(report.table) if report else [], references)

    def on_unmount(self) -> None:
        self.workers.cancel_group(self, "study-refresh")

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in ("open", "replay", "next_study") and self.study is None:
            return False  # no study: nothing to open (the footer offers only what can act)
        return True

    # -- actions -----------------------------------------------------------------------------
    def highlighted_session(self) -> str | None:
        return cell_session(self, self.query_one(StudyGrid).selected())

    def action_next_study(self) -> None:
        names = grid.study_names(self.store)
        if len(names) < 2 or self.study not in names:
            self.notify("No other study in this database.")
            return
        self.study = names[(names.index(self.study) + 1) % len(names)]
        self.report = None
        self._read_now()

    def action_back(self) -> None:
        self.app.pop_screen()


def cell_session(screen: Screen[None], row: dict[str, Any] | None) -> str | None:
    """The session of a study grid's cell (None, said on screen, when the cell has none yet)."""
    if row is None or not row.get("session_id") or not row.get("session_status"):
        screen.notify("This cell has no session yet.", severity="warning")
        return None
    return str(row["session_id"])


def study_of(store: SessionStore, session_id: str | None) -> str | None:
    """The study a session belongs to (its grid cell), else None."""
    if not session_id:
        return None
    return store.study_of_session(session_id)
