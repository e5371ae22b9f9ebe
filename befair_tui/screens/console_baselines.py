"""The researcher's console's part for training expert baselines on the session's data: started on
request, followed in the background; the rows it records appear in the scoreboard and the plot
(the reference rows themselves are read by every console: console_view).

The training's log is read by a thread worker that only posts BaselinesTraining messages; the
screen updates the scoreboard and the plot when they arrive. Whether it can be trained is the
controller's (befair_tui.console.controller.ConsoleController.training_refusal).
"""
from __future__ import annotations

import subprocess
from pathlib import Path
from typing import TYPE_CHECKING

from textual import on, work
from textual.worker import get_current_worker

from befair_tui.messages import BaselinesTraining
from befair_tui.polling import pause
from befair_tui.screens.console_view import ConsoleView
from befair_tui.widgets.comparison_plot import ComparisonPlot
from befair_tui.widgets.scoreboard import Scoreboard

if TYPE_CHECKING:
    from befair_tui.baseline_training import TrainingPlan


class ExpertBaselines(ConsoleView):
    baseline_plan: TrainingPlan | None = None  # a baseline_training.TrainingPlan (None: its defaults); tests train less
    _training: subprocess.Popen[bytes] | None = None  # the training's process while it runs
    _trained_runs = 0     # its runs recorded so far (each one reloads the rows)

    def why_not(self, action: str) -> str | None:
        """The training key's refusal (why_not_train), else the steering keys' (ConsoleView)."""
        if action == "train_baselines":
            return self.why_not_train()
        return super().why_not(action)

    def why_not_train(self) -> str | None:
        """Why the baselines cannot be trained now (None: they can)."""
        boards = self.query(Scoreboard)
        return self.ctl.training_refusal(training=self._training is not None,
                                         trained_shown=bool(boards) and not boards.first().no_baselines())

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

        workspace = self.ctl.baseline_workspace()
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
                self.query_one(ComparisonPlot).sync(self.ctl.state, self.ctl.best)
            board.sync(self.ctl.state)
            return
        self._training = None
        board.set_training(None)
        self._load_references()  # the new rows, from the database
        board.sync(self.ctl.state)
        self.query_one(ComparisonPlot).sync(self.ctl.state, self.ctl.best)
        self.refresh_bindings()
        if message.error:
            self.notify(f"The baseline training failed: {message.error}", title="Baselines", severity="error",
                        timeout=15)
        else:
            self.notify("Expert baselines trained: their rows are in the scoreboard and the plot.",
                        title="Baselines", timeout=8)

    def on_unmount(self) -> None:
        self.workers.cancel_group(self, "baselines")  # the training itself goes on, detached
