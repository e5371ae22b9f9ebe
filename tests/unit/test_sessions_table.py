"""`befair sessions`: every column lines up, whatever the length of an id or an agent's name."""
from __future__ import annotations

from befair_tui.cli.sessions import _sessions_table


def _row(sid: str, coder: str, level: str = "base") -> dict:
    return {"id": sid, "status": "finished", "level": level, "coder_label": coder, "simulated": False,
            "participant_id": None, "steps": 4, "budget": 4, "best_auc": 0.812, "best_gap": 0.05,
            "counts": {"ok": 3, "buggy": 1}, "n_nodes": 4, "unsandboxed": False, "runner": "done"}


def test_columns_line_up_with_a_long_id_and_a_long_agent_name():
    rows = [_row("20261127-050000-a1b2", "offline coder (simulated agent)"),
            _row("pilot-2x2-p01-fairness-methods-r0-c3", "gpt-4o", level="fairness-methods")]
    header, *body = _sessions_table(rows)
    assert "offline coder (simulated agent)" in body[0]            # not cut to 26 characters
    assert body[1].startswith("pilot-2x2-p01-fairness-methods-r0-c3 ")
    assert {line.index("finished") for line in body} == {header.index("status")}
    assert {line.index("4/4") + 3 for line in body} == {header.index("steps") + 5}   # right-aligned
    assert {line.index("4 (3 ok") for line in body} == {header.index("nodes")}
