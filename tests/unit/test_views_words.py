"""The presentation model words what the console only styles: one spelling per concept, decided in
engine.session.views (the running clock, guidance entries, tree-line markers, plot tags, trust)."""
from __future__ import annotations

import re
from pathlib import Path

from rich.text import Text

from engine.session import views

from engine.session import heartbeat
from engine.session.state import ENDED, GuidanceState, NodeState, SessionState

from befair_tui import format as tui_format

ROOT = Path(__file__).resolve().parents[2]


def _running(now_offset: float = 92.0) -> tuple[SessionState, NodeState, float]:
    node = NodeState(node_id=3, parent_id=None, step=1, stage="draft", status="running", created_ts=100.0)
    node.exec_started_ts = 100.0
    node.live_tail = "epoch 1\nepoch 2 loss 0.41\n\n"
    state = SessionState(config={"step_timeout": 600}, nodes={3: node})
    return state, node, 100.0 + now_offset


def test_the_running_clock_and_panel_words_come_from_views_and_format_only_styles_them():
    state, node, now = _running()
    assert views.running_clock(state, node, now) == "01:32/10:00"
    assert views.tree_figures(state, node, views.node_summary(state, node, best=None), now) == [
        "running 01:32/10:00", "running 01:32", "01:32"]
    words = views.running_words(state, node, now)
    assert "".join(w for w, _ in words) == "◐ running 01:32 of the 10:00 step limit\nlatest output: epoch 2 loss 0.41"
    line = tui_format.running_line(state, node, now)
    assert isinstance(line, Text) and line.plain == "".join(w for w, _ in words)
    assert {role for _, role in words} <= set(tui_format.RUNNING_STYLE)


def test_a_node_that_printed_nothing_says_so():
    state, node, now = _running()
    node.live_tail = ""
    assert views.running_words(state, node, now)[-1] == ("\nno output yet", "note")


def test_guidance_entries_say_where_they_apply_then_shorter():
    g = GuidanceState(guidance_id=1, text="drop the lesion-size column", scope="node", node_id=4, by="person",
                      seq=9, used_by=[5, 6, 7, 8, 9])
    assert views.guidance_where(g) == [(" · node 4", " → node 5, 6, 7, 8…"), (" · node 4", " →5,6,7,8…")]
    pending = GuidanceState(guidance_id=2, text="x", scope="global", node_id=None, by="person", seq=10)
    assert views.guidance_where(pending) == [(" · global", " · pending"), (" · global", " ⏳")]
    assert tui_format.guidance_label(g).plain == "✎ “drop the lesion-size column” · node 4 → node 5, 6, 7, 8…"
    assert tui_format.guidance_label(g, width=30).plain.endswith(" · node 4 →5,6,7,8…")


def test_tree_line_markers_are_spelled_once_for_text_and_console():
    state, node, _ = _running()
    node.status = "ok"
    summary = views.node_summary(state, node, best=3)
    assert views.LINE_MARKS["best"][0] in summary.tail()
    assert " ★ best" in tui_format.node_label(state, node, best=True).plain
    assert " ★ best" not in tui_format.node_label(state, node, best=True, width=20).plain


def test_a_sessions_row_reads_as_unsandboxed_without_folding_its_events():
    assert views.row_state({"config": '{"sandbox": "none"}', "coder": "offline"}).unsandboxed
    assert not views.row_state({"config": '{"sandbox": "bwrap"}', "coder": "offline"}).unsandboxed
    assert not views.row_state({"config": "not json", "coder": "offline"}).unsandboxed
    assert views.sandbox_mode(views.row_state({"config": "{}", "coder": "aide-import"})) == "imported"


def test_plotted_references_are_tagged_letters_then_numbers():
    baselines = [{"name": "erm", "auc": 0.7, "gap": 0.1, "val_auc": 0.7, "val_gap": 0.1},
                 {"name": "other data", "auc": 0.7, "gap": 0.1, "same_data": False}]
    published = [{"name": "MEDFAIR", "auc": 0.64, "gap": 0.05}]
    assert views.reference_tags(baselines, published, "test") == {("baseline", "erm"): "A",
                                                                   ("published", "MEDFAIR"): "1"}
    assert views.reference_tags(baselines, published, "validation") == {("baseline", "erm"): "A"}


def test_the_ended_statuses_are_spelled_once():
    """engine.session.state.ENDED; a shipped migration (schema.py) keeps its SQL as it ran."""
    assert views.ENDED is ENDED and heartbeat.ENDED is ENDED
    spelled = re.compile(r"""\(\s*["']finished["'],\s*["']stopped["'],\s*["']failed["']\s*\)""")
    places = [str(p.relative_to(ROOT)) for folder in ("engine", "befair_tui", "baselines")
              for p in sorted((ROOT / folder).rglob("*.py")) if spelled.search(p.read_text(encoding="utf-8"))]
    assert places == ["engine/session/schema.py", "engine/session/state.py"]
