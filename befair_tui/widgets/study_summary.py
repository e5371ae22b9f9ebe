"""The Study screen's aggregate so far: per agent × level, n, and the test AUC and skin-tone AUC
gap of the sessions' final choices as mean ± std [95 % interval] (engine.study.report)."""
from __future__ import annotations

from typing import Any

from textual.widgets import Static

from engine.study.aggregate import AUC_GAP, OVERALL_AUC
from engine.study.tradeoff_plot import SYNTH_CAVEAT
from engine.study.report import headline


def _stat(h: dict[str, Any], column: str) -> str:
    mean, std = h.get(f"{column}|mean"), h.get(f"{column}|std")
    lo, hi = h.get(f"{column}|ci95_lo"), h.get(f"{column}|ci95_hi")
    if mean is None:
        return "-"
    if std is None:
        return f"{mean:.3f} (one session)"
    return f"{mean:.3f} ± {std:.3f} [{lo:.3f}, {hi:.3f}]"


def summary_text(report: Any, counts: dict[str, int]) -> str:
    total = sum(counts.values())
    lines = [f"{counts['finished']}/{total} finished · {counts['running']} running · {counts['queued']} queued · "
             f"{counts['interrupted']} interrupted · {counts['failed']} failed"]
    rows = headline(report) if report is not None else []
    if not rows:
        lines.append("aggregate: no finished session yet")
    else:
        lines.append(f"test set, final choice by {report.criterion}: mean ± std [95 % interval]")
        for h in rows:
            lines.append(f"{h['model']} · {h['prompt']}  n={h['n']}  AUC {_stat(h, OVERALL_AUC)}  "
                         f"gap {_stat(h, AUC_GAP)}")
    if report is not None and report.synthetic:
        lines.append(SYNTH_CAVEAT)
    return "\n".join(lines)


class StudySummary(Static):
    def sync(self, report: Any, counts: dict[str, int]) -> None:
        self.update(summary_text(report, counts))
