"""The published study's run folder names: which prompt, and so which instruction level, a run
was given ("30-basic_prompt", "4-mlzero_add1_killed"). Shared by the be-fair and MLZero importers."""
from __future__ import annotations

import re

PROMPT_LEVELS = {
    "basic_prompt": "base", "mlzero_bp": "base",
    "addition_1": "fairness-hint", "mlzero_add1": "fairness-hint",
    "addition_2": "fairness-metric", "mlzero_add2": "fairness-metric",
    "addition_3": "fairness-methods", "mlzero_add3": "fairness-methods",
}
_RUN_NAME = re.compile(r"^(?:(\d+)[-_])?(" + "|".join(sorted(PROMPT_LEVELS, key=len, reverse=True)) + r")(.*)$")


def parse_run_name(name: str) -> tuple[int | None, str, str] | None:
    """(run id, prompt, variant) of a run folder name ("30-basic_prompt" -> (30, "basic_prompt",
    ""); "4-basic_prompt_killed" -> (4, "basic_prompt", "_killed")); None if it names no prompt."""
    m = _RUN_NAME.match(name)
    if m is None:
        return None
    return (int(m.group(1)) if m.group(1) else None), m.group(2), m.group(3)


def level_of(name: str) -> str | None:
    """The study level a prompt name stands for (basic_prompt/mlzero_bp -> base, addition_1 or
    mlzero_add1 -> fairness-hint, ...); None when the name holds none."""
    parsed = parse_run_name(name)
    return PROMPT_LEVELS.get(parsed[1]) if parsed else None
