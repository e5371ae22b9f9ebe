"""The console's expert baselines: the reference rows it compares the session with (baselines trained
on this database's data, and the published rows), and a training of them on the session's data,
started on request and followed in the background.

A mixin of ConsoleScreen. The training's log is read by a thread worker that only posts
BaselinesTraining messages; the screen updates the scoreboard and the plot when they arrive.
"""
from __future__ import annotations

import subprocess
from pathlib import Path
from typing import TYPE_CHECKING, Any

from textual import on, work
from textual.screen import Screen
from textual.worker import get_current_worker

from baselines.reference import reference_rows
from engine.session import views
from engine.session.state import SessionState
from engine.session.store import SessionStore

from befair_tui.messages import BaselinesTraining, ReferencesRead
from befair_tui.polling import pause
from befair_tui.widgets.comparison_plot import ComparisonPlot
from befair_tui.widgets.scoreboard import Scoreboard

if TYPE_CHECKING:
    from befair_tui.baseline_training import TrainingPlan


class ExpertBaselines(Screen[None]):
    # set by ConsoleScreen
    store: SessionStore
    session_id: str
    state: SessionState
    best: int | None
    read_only: bool

    baseline_plan: TrainingPlan | None = None  # a baseline_training.TrainingPlan (None: its defaults); tests train less
    _training: subprocess.Popen[bytes] | None = None  # the training's process while it runs
    _trained_runs = 0     # its runs recorded so far (each one reloads the rows)

    @work(thread=True, exclusive=True, group="references", name="read-references")
    def _load_references(self) -> None:
        """Read the reference rows (and the session's level, for a session just spawned, whose
        events have not come yet) in a thread; only posts ReferencesRead."""
        try:
            trained, rows = reference_rows(self.store)
            try:
                level = self.store.session(self.session_id).get("level") or ""
            except Exception:  # noqa: BLE001 - the session may not exist yet (just spawned)
                level = ""
            self.post_message(ReferencesRead(trained, rows, level))
        except Exception as exc:  # noqa: BLE001 - said on screen
            self.post_message(ReferencesRead([], [], "", error=str(exc)))
        finally:
            self.store.close()   # this thread's connection

    def shown_published(self, published: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The published rows this reader is shown (all, here)."""
        return published

    @on(ReferencesRead)
    def _on_references(self, message: ReferencesRead) -> None:
        baselines: list[dict[str, Any]] = []
        published: list[dict[str, Any]] = []
        if message.error:
            self.notify(f"could not read baselines: {message.error}", severity="warning")
        else:
            baselines = views.baseline_points(message.trained, self.state)
            published = self.shown_published(views.published_points(message.rows, self.state.level or message.level))
        board = self.query_one(Scoreboard)
        board.set_references(baselines, published)
        board.can_baselines = not self.read_only and self.baseline_workspace() is not None
        self.query_one(ComparisonPlot).set_references(baselines, published)
        board.sync(self.state)
        self.query_one(ComparisonPlot).sync(self.state, self.best)

    def baseline_workspace(self) -> str | None:
        """The session's prepared workspace, when it is here to train baselines on."""
        path = str((self.state.data or {}).get("path") or "")
        if views.data_kind(self.state) not in ("synth", "real") or not path:
            return None
        return path if Path(path).is_dir() else None

    def why_not_train(self) -> str | None:
        """Why the baselines cannot be trained now (None: they can)."""
        if self._training is not None:
            return "The baselines are training already: their progress is in the scoreboard."
        if self.read_only or self.baseline_workspace() is None:
            return "This session's data is not here, so no baseline can be trained for it."
        boards = self.query(Scoreboard)
        if boards and not boards.first().no_baselines():
            return "Baselines trained on this session's data are in the scoreboard already."
        return None

    def action_train_baselines(self) -> None:
        from befair_tui.baseline_training import TrainingPlan
        from befair_tui.screens.confirm import ConfirmModal

        reason = self.why_not_train()
        if reason:
            self.notify(reason, title="Not now", severity="warning")
            return
        plan = self.baseline_plan or TrainingPlan()

        def done(ok: bool | None) -> None:
            if ok:
                self._start_training(plan)

        self.app.push_screen(ConfirmModal(
            f"Train {plan.words()} on this session's data, in the background? On a CPU that takes a few "
            "minutes per run; the console stays usable, the results land in this database and appear in "
            "the scoreboard and the plot.", yes="Train baselines", no="Not now"), done)

    def _start_training(self, plan: TrainingPlan) -> None:
        from befair_tui import launch
        from befair_tui.baseline_training import train_argv

        workspace = self.baseline_workspace()
        name = f"baselines-{self.session_id}"
        log = launch.log_path(self.store.path, name)
        start = log.stat().st_size if log.exists() else 0  # an earlier training's lines are not this one's
        try:
            self._training = launch.spawn(train_argv(plan, self.store.path, workspace or ""), self.store.path, name)
        except OSError as exc:
            self.notify(f"could not start the training: {exc}", severity="error", title="Baselines")
            return
        self.query_one(Scoreboard).set_training(f"training baselines: starting ({plan.words()})")
        self.refresh_bindings()
        self.follow_training(plan, log, start)

    @work(thread=True, exclusive=True, group="baselines", name="baseline-training")
    def follow_training(self, plan: TrainingPlan, log: Path, offset: int = 0) -> None:
        """Read the training's log (from `offset`) for progress until its process ends; never
        touches widgets."""
        from befair_tui.baseline_training import TrainingProgress

        worker = get_current_worker()
        progress = TrainingProgress(plan.runs)
        proc, said = self._training, ""
        while not worker.is_cancelled and proc is not None:
            try:
                with open(log, encoding="utf-8", errors="replace") as fh:
                    fh.seek(offset)
                    for line in fh.read().splitlines():
                        progress.read(line)
                        said = line.strip() or said
                    offset = fh.tell()
            except OSError:
                pass
            code = proc.poll()
            if code is not None:
                error = None if code == 0 else (said or f"exit code {code}")
                self.post_message(BaselinesTraining(progress.words(), done=True, error=error))
                return
            self.post_message(BaselinesTraining(progress.words(), finished=progress.finished))
            pause(worker, 1.0, step=0.25)

    @on(BaselinesTraining)
    def _on_training(self, message: BaselinesTraining) -> None:
        board = self.query_one(Scoreboard)
        if not message.done:
            board.set_training(message.text)
            if message.finished != self._trained_runs:  # a run landed in the database: show it now
                self._trained_runs = message.finished
                self._load_references()
                self.query_one(ComparisonPlot).sync(self.state, self.best)
            board.sync(self.state)
            return
        self._training = None
        board.set_training(None)
        self._load_references()  # the new rows, from the database
        board.sync(self.state)
        self.query_one(ComparisonPlot).sync(self.state, self.best)
        self.refresh_bindings()
        if message.error:
            self.notify(f"The baseline training failed: {message.error}", title="Baselines", severity="error",
                        timeout=15)
        else:
            self.notify("Expert baselines trained: their rows are in the scoreboard and the plot.",
                        title="Baselines", timeout=8)
