"""The session summary (key r once a session has ended): the final choice by each criterion with
its intervals, whether it can be told apart from the runners-up, what each guidance changed, the
labels that apply. `w` writes it as a page to hand to a colleague (engine.study.session_report)."""
from __future__ import annotations

from pathlib import Path

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from engine.study.session_report import summarise, write_report
from engine.session.state import SessionState
from engine.session.store import SessionStore

from befair_tui.messages import ReportWritten


def report_path(store: SessionStore, session_id: str) -> Path:
    """Where `w` writes the report: a `reports` folder beside the session database."""
    return store.path.parent / "reports" / f"{session_id}.html"


class SummaryModal(ModalScreen[None]):
    DEFAULT_CSS = """
    SummaryModal { align: center middle; }
    SummaryModal > Vertical { width: 110; max-width: 98%; height: 90%; border: round $accent; background: $surface; }
    SummaryModal VerticalScroll { height: 1fr; padding: 0 1; }
    SummaryModal #summary-keys { height: 1; color: $text-muted; padding: 0 1; }
    """
    BINDINGS = [
        Binding("escape,q,r", "dismiss(None)", "Close", id="summary-close"),
        Binding("w", "write", "Write report", id="summary-write"),
    ]

    def __init__(self, store: SessionStore, state: SessionState) -> None:
        super().__init__()
        self.store, self.state = store, state
        self.report = summarise(state)

    def compose(self) -> ComposeResult:
        with Vertical():
            with VerticalScroll():
                yield Static(Text("\n".join(self.report.lines())), id="summary-text")
            yield Static("w: write it as a page (HTML, with the plot) · Esc: close", id="summary-keys")

    def on_mount(self) -> None:
        self.query_one(Vertical).border_title = f"Session summary · {self.state.session_id}"

    def action_write(self) -> None:
        self.notify("Writing the report…", title="Report", timeout=3)
        self.write_in_background()

    @work(thread=True, exclusive=True, group="report", name="write-report")
    def write_in_background(self) -> None:
        """The report reads the baselines and draws its plot (matplotlib): off the UI thread."""
        target = report_path(self.store, self.state.session_id)
        try:
            written = write_report(self.store, self.state, self.report, target)
        except Exception as exc:  # noqa: BLE001 - the user reads why, nothing is lost
            self.post_message(ReportWritten(None, str(exc)))
            return
        finally:
            self.store.close()   # this thread's connection
        self.post_message(ReportWritten(str(written[0]), None))

    @on(ReportWritten)
    def _on_written(self, message: ReportWritten) -> None:
        if message.error:
            self.notify(f"could not write the report: {message.error}", severity="error", title="Report")
            return
        self.notify(f"Report written: {message.path} (befair report {self.state.session_id} writes it too)",
                    title="Report", timeout=10)
