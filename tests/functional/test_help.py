"""`?` and F1 open the help: keys, every marker and badge in one spelling, the words on screen in
plain language. Tooltips explain the scoreboard's rows and the tree's lines and badges."""
from __future__ import annotations

from engine.session import events as ev
from engine.session import views as compare
from tests.demo_session import write_demo_session
from engine.session.views import BADGE_HELP as BADGE_LEGEND
from engine.session.views import audit_badges as badge_codes

from befair_tui.app import create_app
from befair_tui.screens.console import ConsoleScreen
from befair_tui.screens.help import KEYS, HelpScreen
from befair_tui.screens.replay import ReplayScreen
from befair_tui.screens.setup import SetupScreen
from befair_tui.widgets.scoreboard import Scoreboard
from befair_tui.widgets.search_tree import SearchTree

from .conftest import screen_text, wait_for
from engine.session.event_types import parse


def _help_text() -> str:
    import io

    from rich.console import Console

    from befair_tui.screens.help import help_content

    console = Console(width=200, record=True, file=io.StringIO())
    console.print(help_content())
    return console.export_text()


async def test_question_mark_and_f1_open_the_help_everywhere(db, store):
    sid = write_demo_session(store, n_nodes=6)
    app = create_app(db, start="console", session_id=sid, poll_interval=0.05)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: len(app.screen.state.nodes) == 6)
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        text = screen_text(app)
        assert "Keys" in text and "pause the search" in text
        await pilot.press("escape")
        await pilot.pause()
        assert isinstance(app.screen, ConsoleScreen)
        await pilot.press("f1")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        await pilot.press("pagedown", "pagedown", "q")
        await pilot.pause()
        assert isinstance(app.screen, ConsoleScreen)
        commands = {c.title: c.help for c in app.get_system_commands(app.screen)}
        assert commands.get("Help") == "key ?"  # in the command palette too


async def test_f1_works_while_typing_and_question_mark_is_typed(db, tmp_path):
    app = create_app(db, settings_file=tmp_path / "s.json")
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        assert isinstance(app.screen, SetupScreen)
        field = app.screen.query_one("#participant")
        field.focus()
        await pilot.press("question_mark")
        await pilot.pause()
        assert field.value == "?" and isinstance(app.screen, SetupScreen)
        await pilot.press("f1")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, SetupScreen)


async def test_help_lists_every_key_badge_marker_and_term(db, tmp_path):
    app = create_app(db, settings_file=tmp_path / "s.json")
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("f1")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
    text = _help_text()
    listed = " ".join(key for _title, rows in KEYS for key, _ in rows)
    for screen in (ConsoleScreen, ReplayScreen):
        for binding in screen.BINDINGS:
            if binding.action.startswith("detail_tab"):
                continue  # listed as 1–6
            shown = binding.key_display or binding.key.split(",")[0]
            names = {"space": "space", "right": "→", "left": "←", "ctrl+e": "Ctrl+E", "ctrl+a": "Ctrl+A",
                     "plus": "+"}
            assert names.get(shown, shown) in listed, (screen.__name__, binding.id)
    for code, meaning in BADGE_LEGEND.items():
        assert f"[{code}]" in text and meaning.split()[0] in text
    assert set(BADGE_LEGEND) == {"ST", "PG", "RW", "UP", "FI", "PA", "!", "≠", "G", "?"}
    for marker in ("●", "★", "A B", "1 2", "✎", "✂"):  # baselines lettered, published rows numbered
        assert marker in text
    for term in ("AUC", "skin-tone AUC gap", "validation", "test", "blinded", "best: agent's own score",
                 "best: validation AUC", "best: worst group AUC", "best: worst group AUC, low end", "worst group",
                 "± and 95 % interval", "too few to judge", "cannot be told apart", "missed malignant",
                 "(published)",
                 compare.SYNTH_NOTE, compare.BLINDED_NOTE, "measured here", "trained here"):
        assert term in text, term


async def test_tooltips_explain_scoreboard_rows_and_tree_badges(db, store):
    w = store.create_session({"level": "fairness-metric", "steps": 3, "best": "validation"}, instruction="x",
                             coder={"name": "offline", "simulated": True}, data={"kind": "synth", "path": "p"},
                             session_id="s-tip")
    w.emit(parse(ev.NODE_CREATED, {"node_id": 1, "parent_id": None, "step": 1, "stage": "draft", "plan": "p",
                             "guidance_ids": [], "origin": "agent"}))
    w.emit(parse(ev.EXEC_FINISHED, {"node_id": 1, "status": "ok", "exit_code": 0, "exec_time": 1.0, "exc_type": None,
                              "output_head": "", "output_tail": "", "truncated": False}))
    w.emit(parse(ev.EVALUATED, {"node_id": 1, "split": "validation", "ok": True, "verdict": "ok", "reason": None,
                          "summary": {"auc": 0.7, "auc_gap": 0.1, "worst_auc": 0.65, "group_auc": {}, "n": 9},
                          "medfair": {}, "blinded": False}))
    w.emit(parse(ev.AUDITED, {"node_id": 1, "flags": {"reads_skin_tone": True, "reweighting": True},
                        "evidence": {}, "claim": {"unsupported": True, "reason": "no run printed it"}}))
    app = create_app(db, start="console", session_id="s-tip", poll_interval=0.05)
    async with app.run_test(size=(120, 36)) as pilot:
        screen = app.screen
        await wait_for(pilot, lambda: 1 in screen.state.nodes and screen.state.nodes[1].claim is not None)
        await pilot.pause(0.1)
        node = screen.state.nodes[1]
        assert badge_codes(node) == ["ST", "RW", "!"]
        tree = screen.query_one(SearchTree)
        tree.hover_line = tree.item_for(1).line
        await pilot.pause()
        tip = str(tree.tooltip)
        assert "validation AUC / skin-tone AUC gap" in tip
        assert "[ST] reads the skin-tone column" in tip and "[!] reports a metric that no run supports" in tip
        board = screen.query_one(Scoreboard)
        lines = [board.help_for_line(i) or "" for i in range(20)]
        assert any("generated in the DDI format" in t or "SynthDerm" in t for t in lines)
        assert any(t.startswith("Node 1: the best node by") for t in lines)
        assert any("Be Fair! study" in t and "not measured by this product" in t for t in lines)
        # the mouse over a row sets the widget's tooltip to that row's explanation
        node_line = next(i for i, t in enumerate(lines) if t.startswith("Node 1"))
        await pilot.hover(board, offset=(3, 1 + node_line))
        await pilot.pause()
        assert str(board.tooltip).startswith("Node 1: the best node by")
