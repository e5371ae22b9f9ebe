"""Expert baselines trained from the console, in the background: a detached
`befair baselines train` on the session's own data (so its rows count as "same data"), whose log
the console reads for progress. Like a session's runner, it goes on if the console closes; its
runs land in the database as each seed finishes (the baselines table)."""
from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from pathlib import Path

from baselines.variants import VARIANTS


@dataclass(frozen=True)
class TrainingPlan:
    """What the key trains: every MEDFAIR variant, a few seeds, short and small enough for a CPU
    (README: "a few minutes per seed at a small size")."""

    variants: tuple[str, ...] = tuple(VARIANTS)
    seeds: tuple[int, ...] = (11, 22, 33)
    epochs: int = 6
    size: int = 48

    @property
    def runs(self) -> int:
        return len(self.variants) * len(self.seeds)

    def words(self) -> str:
        return (f"{len(self.variants)} MEDFAIR baseline(s) (ResNet-18) × {len(self.seeds)} seed(s), "
                f"{self.epochs} epochs at {self.size} px")


def train_argv(plan: TrainingPlan, db: Path, workspace: str) -> list[str]:
    variant = "all" if set(plan.variants) == set(VARIANTS) else plan.variants[0]
    return [sys.executable, "-m", "befair_tui.cli", "baselines", "train", "--variant", variant,
            "--workspace", str(workspace), "--seeds", ",".join(map(str, plan.seeds)),
            "--epochs", str(plan.epochs), "--size", str(plan.size), "--threads", "1", "--db", str(db)]


_PROGRESS = re.compile(r"^training \(images\): (?P<variant>[\w-]+) seed (?P<seed>\d+) (?P<done>\d+)/(?P<total>\d+)")
_KEPT = re.compile(r"^\s*seed (?P<seed>\d+): epoch \d+ kept")


@dataclass
class TrainingProgress:
    """Read from the training's log, line by line."""

    runs: int
    finished: int = 0
    current: str = ""
    fraction: float = 0.0  # of the current run

    def read(self, line: str) -> None:
        m = _PROGRESS.match(line)
        if m:
            self.current = f"{m['variant']} seed {m['seed']}"
            self.fraction = int(m["done"]) / max(1, int(m["total"]))
        elif _KEPT.match(line):
            self.finished += 1
            self.fraction = 0.0

    def words(self) -> str:
        overall = (self.finished + self.fraction) / max(1, self.runs)
        now = f" · now {self.current} {self.fraction:.0%}" if self.current and self.fraction < 1 else ""
        return f"training baselines: {self.finished}/{self.runs} runs done ({overall:.0%}){now}"
