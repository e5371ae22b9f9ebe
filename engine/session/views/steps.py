"""A session's step count, the same on every surface: the status bar, the participant's bar, the
study grids and the sessions list.

One meaning: the steps *taken*, the nodes the agent created (the running one included, failed and
interrupted ones too: each used a step of the budget); a human-written node is no step. The
sessions table's `steps` column stores the same number (engine.session.store.rows), so a grid
that reads only the session's row says what the console says. While the agent writes its next
step no node exists yet: that step is not taken yet (the status line says what the agent is doing
beside the count).
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from engine.session.state import SessionState

STEPS_HELP = ("steps taken: the nodes the agent created so far (the running one included), of the session's "
              "step budget")


@dataclass(frozen=True)
class StepCount:
    taken: int
    budget: int | None   # None: not known (a session row without its budget)

    def words(self, *, compact: bool = False) -> str:
        """"2/4 steps taken"; compact: "2/4 steps"."""
        return f"{self.cell()} steps" + ("" if compact else " taken")

    def cell(self) -> str:
        """A grid's cell under a "steps taken" header: "2/4"."""
        return f"{self.taken}/{'?' if self.budget is None else self.budget}"


def step_count(state: SessionState) -> StepCount:
    return StepCount(state.agent_steps, state.budget)


def row_step_count(row: Mapping[str, Any]) -> StepCount:
    """The count from a sessions (or study grid) row: its `steps` and `budget` columns."""
    budget = row.get("budget")
    return StepCount(int(row.get("steps") or 0), None if budget is None else int(budget))
