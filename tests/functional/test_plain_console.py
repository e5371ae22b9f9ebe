"""A console a dermatologist reads without a guide, at any terminal size (issue 23): one Pilot test
per finding of the walkthrough, driven through the real app on real session databases.

Internal language, finished sessions, a long step, the plot, 80×24, the setup screen and the last
bad inputs. (The scoreboard's numbered published rows and the baselines trained from the screen
are here too; the "best" criterion's words, intervals and the end-of-session summary are not.)"""
from __future__ import annotations

import os
import time
from pathlib import Path

from engine.agent.session_config import SessionConfig
from engine.coders import offline as g
from engine.session import events as ev
from tests.demo_session import write_demo_session

from befair_tui.app import create_app, frozen_clock
from befair_tui.screens.console import ConsoleScreen
from befair_tui.screens.replay import ReplayScreen
from befair_tui.screens.sessions import SessionsScreen
from befair_tui.screens.setup import SetupScreen
from befair_tui.screens.study import StudyScreen
from befair_tui.widgets.comparison_plot import ComparisonPlot
from befair_tui.widgets.node_detail import NodeDetail
from befair_tui.widgets.scatter import Scatter
from befair_tui.widgets.scoreboard import Scoreboard
from befair_tui.widgets.search_tree import SearchTree
from befair_tui.widgets.status_bar import StatusBar

from .conftest import region_text, screen_text, tree_text, wait_for
from engine.session.event_types import parse
from tests.settle import reads_done

CODER = {"name": "offline", "label": "offline coder (simulated agent)", "simulated": True}
T0 = 1_700_000_000.0


def _session(store, sid, *, data=None, step_timeout=600.0, alive=False):
    config = SessionConfig(level="fairness-metric", steps=6, step_timeout=step_timeout, best="validation").to_dict()
    w = store.create_session(config, instruction="x", coder=CODER,
                             data=data or {"kind": "synth", "path": "/nowhere/ws"}, session_id=sid, ts=T0)
    if alive:  # a live runner: this test process stands in for it
        store.db.conn.execute("update sessions set pid = ? where id = ?", [os.getpid(), sid])
    return w


def _summary(auc, gap):
    return {"auc": auc, "auc_gap": gap, "worst_auc": auc - gap, "best_auc": auc,
            "group_auc": {"group_0": auc, "group_1": auc - gap / 2, "group_2": auc - gap}, "n": 90}


def _node(w, nid, *, plan="p", code="print('x')\n", components=None, status="ok", auc=0.7, gap=0.1,
          audit=None, ts=None, reason=None):
    t = ts or T0 + nid * 10
    w.emit(parse(ev.NODE_CREATED, {"node_id": nid, "parent_id": None, "step": nid, "stage": "draft", "plan": plan,
                             "guidance_ids": [], "origin": "agent", "components": components}), ts=t)
    w.emit(parse(ev.CODE, {"node_id": nid, "code": code}), ts=t + 1)
    w.emit(parse(ev.EXEC_STARTED, {"node_id": nid, "workdir": "w"}), ts=t + 1)
    if status == "interrupted":
        w.emit(parse(ev.NODE_INTERRUPTED, {"node_id": nid, "reason": reason or "interrupted"}), ts=t + 2)
        return
    w.emit(parse(ev.EXEC_FINISHED, {"node_id": nid, "status": status, "exit_code": 0, "exec_time": 2.0,
                                    "exc_type": None,
                              "output_head": "Validation AUROC: 0.7\n", "output_tail": "", "truncated": False}),
           ts=t + 3)
    if status == "ok":
        for split in ("validation", "test"):
            w.emit(parse(ev.EVALUATED, {"node_id": nid, "split": split, "ok": True, "verdict": "ok", "reason": None,
                                  "summary": _summary(auc, gap), "medfair": {}, "blinded": False}), ts=t + 4)
    w.emit(parse(ev.AUDITED, audit or {"node_id": nid, "flags": {}, "evidence": {}, "claim": None}), ts=t + 5)


def _offline(bug=None, selection="overall", fairness="none"):
    """A pipeline as the offline coder writes it (grammar.render), with its plan and its choices."""
    c = g.normalise({**g.default_components("logreg"), "selection": selection, "fairness": fairness, "bug": bug})
    plan = "Draft a pipeline.\n" + "\n".join(f"- {line}" for line in g.describe(c))
    return plan, g.render(c, plan), c


async def _console(app, pilot, sid_nodes: int):
    screen = app.screen
    assert isinstance(screen, ConsoleScreen)
    await wait_for(pilot, lambda: len(screen.state.nodes) >= sid_nodes, what="the nodes")
    await pilot.pause(0.3)
    return screen


def _plan_text(screen) -> str:
    from befair_tui.widgets.text_pane import TextPane

    detail = screen.query_one(NodeDetail)
    detail.show_tab("plan")
    pane = detail.query_one("#plan", TextPane)
    return "\n".join(strip.text for strip in pane._lines)


# -- internal language on screen ------------------------------------------------------------------
async def test_the_plan_says_in_words_what_the_pipeline_does(db, store):
    plan, code, c = _offline(fairness="reweight")
    w = _session(store, "s-plan")
    _node(w, 1, plan=plan, code=code, components=c)
    app = create_app(db, start="console", session_id="s-plan", poll_interval=0.05)
    async with app.run_test(size=(140, 42)) as pilot:
        screen = await _console(app, pilot, 1)
        text = _plan_text(screen)
        assert "model: colour/texture features" in text and "skin tone: group reweighting" in text
        for internal in ("components:", "bug=", "hp=", "{'", "=None", "=True", "drop_unknown_tone"):
            assert internal not in text, internal


async def test_a_simulated_failure_is_labelled_and_never_exported_as_a_property_of_the_code(db, store, tmp_path):
    plan, code, c = _offline(bug="slow")
    w = _session(store, "s-slow")
    _node(w, 1, plan=plan, code=code, components=c)  # a slow run that still finished in time: the best
    w.emit(parse(ev.SESSION_FINISHED, {"status": "finished", "reason": "step budget used"}))
    app = create_app(db, start="sessions")
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("enter")
        screen = await _console(app, pilot, 1)
        assert "simulated agent: this node was made to run slowly" in _plan_text(screen)
        assert "bug" not in _plan_text(screen)
        await pilot.press("l")
        await wait_for(pilot, lambda: isinstance(app.screen, SessionsScreen), what="sessions")
        await pilot.press("x")
        await pilot.pause(0.2)
        box = app.screen.query_one("#export-path")
        box.value = str(tmp_path / "out")
        await pilot.press("enter")
        await wait_for(pilot, lambda: (tmp_path / "out" / "solution.py").is_file(), what="the export")
    exported = (tmp_path / "out" / "solution.py").read_text()
    assert '"bug"' not in exported and "bug=" not in exported
    assert "# simulated agent: this node was made to run slowly" in exported.splitlines()[3]


async def test_a_plan_never_contradicts_itself(db, store):
    plan, code, c = _offline(selection="minimax", fairness="none")
    w = _session(store, "s-minimax")
    _node(w, 1, plan=plan, code=code, components=c)
    app = create_app(db, start="console", session_id="s-minimax", poll_interval=0.05)
    async with app.run_test(size=(140, 42)) as pilot:
        text = " ".join(_plan_text(await _console(app, pilot, 1)).split())
        assert "no fairness intervention" not in text
        assert "training treats every skin tone alike; the model kept is the one whose worst skin-tone group" in text


async def test_the_setup_screen_speaks_no_internal_words(db, tmp_path):
    app = create_app(db, settings_file=tmp_path / "s.json")
    async with app.run_test(size=(120, 60)) as pilot:
        await pilot.pause(0.2)
        text = " ".join(screen_text(app).split())
        assert "component grammar" not in text and "building blocks" in text


async def test_the_palette_shows_keys_not_internal_ids(db, store):
    write_demo_session(store, n_nodes=3)
    app = create_app(db, start="console", session_id="demo-0-3", poll_interval=0.05)
    async with app.run_test(size=(120, 40)) as pilot:
        await _console(app, pilot, 3)
        commands = {c.title: c.help for c in app.get_system_commands(app.screen)}
        assert commands["Audit tab"] == "key 5" and commands["Sessions"] == "key l"
        ids = {b.id for b in ConsoleScreen.BINDINGS}
        assert not [h for h in commands.values() if any(i in h for i in ids if i and len(i) > 3)]


async def test_a_node_that_could_not_be_audited_says_so_everywhere(db, store):
    w = _session(store, "s-unaudited")
    _node(w, 1, audit={"node_id": 1, "flags": {"reads_skin_tone": False}, "evidence": {}, "claim": None,
                       "note": "not audited: syntax error at line 3: invalid syntax"})
    _node(w, 2)  # audited, nothing found: a clean node
    app = create_app(db, start="console", session_id="s-unaudited", poll_interval=0.05)
    async with app.run_test(size=(140, 42)) as pilot:
        screen = await _console(app, pilot, 2)
        tree = screen.query_one(SearchTree)
        assert "[?]" in tree.item_for(1).label.plain and "[?]" not in tree.item_for(2).label.plain
        tree.hover_line = tree.item_for(1).line
        await pilot.pause()
        assert "not audited: syntax error at line 3" in str(tree.tooltip)
        screen.ctl.auto_follow = False
        screen._select(1)
        await pilot.press("5")
        await pilot.pause(0.2)
        audit = region_text(app, screen.query_one(NodeDetail))
        assert "Not audited: syntax error at line 3" in audit and "✓" not in audit


# -- finished sessions, replays -------------------------------------------------------------------
async def test_after_the_end_only_keys_that_act_are_offered_and_the_others_say_why(db, store):
    write_demo_session(store, n_nodes=4)
    app = create_app(db, start="console", session_id="demo-0-4", poll_interval=0.05)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await _console(app, pilot, 4)
        await wait_for(pilot, lambda: screen.state.status == "finished", what="the end")
        await pilot.pause(0.3)
        footer = screen_text(app).splitlines()[-1]
        for word in ("Pause", "Stop", "Expand", "Prune", "Steps", "Guide"):
            assert word not in footer, footer
        assert "Sessions" in footer and "Help" in footer
        titles = {c.title for c in app.get_system_commands(screen)}
        assert not titles & {"Pause", "Stop", "Expand", "Prune", "Steps", "Guide"}
        before = len(store.pending_commands("demo-0-4"))
        await pilot.press("p")
        await pilot.pause(0.2)
        said = [n.message for n in app._notifications]
        assert any("The session has finished" in m and "pause it" in m for m in said), said
        assert len(store.pending_commands("demo-0-4")) == before  # nothing was sent


async def test_the_replay_header_tells_paused_from_playing(db, store):
    sid = write_demo_session(store, n_nodes=4)
    app = create_app(db, start="replay", session_id=sid, replay_speed="max")
    async with app.run_test(size=(120, 40)) as pilot:
        await reads_done(app, pilot)
        screen = app.screen
        assert isinstance(screen, ReplayScreen)
        await pilot.press("ctrl+a")  # event 0
        await pilot.pause(0.1)
        status = str(screen.query_one(StatusBar).render())
        assert "⏸ REPLAY PAUSED" in status and "RUNNING" not in status and "before the start" in status
        screen.speed = "1x"
        await pilot.press("space")
        await pilot.pause(0.1)
        assert "▶ REPLAY 1x" in str(screen.query_one(StatusBar).render())


# -- a long step ----------------------------------------------------------------------------------
async def test_the_running_node_shows_its_time_against_the_step_limit_and_its_latest_output(db, store):
    w = _session(store, "s-long", step_timeout=600, alive=True)
    w.emit(parse(ev.NODE_CREATED, {"node_id": 1, "parent_id": None, "step": 1, "stage": "draft", "plan": "p",
                             "guidance_ids": [], "origin": "agent"}), ts=T0 + 1)
    w.emit(parse(ev.EXEC_STARTED, {"node_id": 1, "workdir": "w"}), ts=T0 + 2)
    w.emit(parse(ev.OUTPUT, {"node_id": 1, "text": "Loaded 242 rows\nepoch 1/30 loss 0.61\n", "stream": "stdout"}),
           ts=T0 + 3)
    app = create_app(db, start="console", session_id="s-long", poll_interval=0.05, clock=frozen_clock(T0 + 94))
    async with app.run_test(size=(120, 40)) as pilot:
        await _console(app, pilot, 1)
        await wait_for(pilot, lambda: "running 01:32/10:00" in tree_text(app), what="the node's clock")
        await wait_for(pilot, lambda: "latest output: epoch 1/30 loss 0.61" in screen_text(app), what="its output")
        assert "◐ running 01:32 of the 10:00 step limit" in screen_text(app)


# -- the plot -------------------------------------------------------------------------------------
async def test_every_published_point_is_named(db, store):
    w = _session(store, "s-named")
    _node(w, 1)
    app = create_app(db, start="console", session_id="s-named", poll_interval=0.05)
    async with app.run_test(size=(140, 60)) as pilot:
        screen = await _console(app, pilot, 1)
        marks = [m for m in screen.query_one(Scatter).marks if m.kind == "published"]
        assert len(marks) >= 6 and [m.marker for m in marks] == [str(i) for i in range(1, len(marks) + 1)]
        names = " ".join(region_text(app, screen.query_one("#plot-names")).split())
        board = " ".join(line.plain for line in screen.query_one(Scoreboard).lines)
        for m in marks:  # on the plot as its number, named in the plot's legend and in the scoreboard
            assert f"{m.tag} {m.name}" in names and f"{m.tag} {m.name} (published)" in board


async def test_the_axis_titles_are_where_a_reader_looks(db, store):
    w = _session(store, "s-axes")
    _node(w, 1)
    app = create_app(db, start="console", session_id="s-axes", poll_interval=0.05)
    async with app.run_test(size=(140, 60)) as pilot:
        screen = await _console(app, pilot, 1)
        plot, y, x = (screen.query_one(s) for s in (Scatter, "#plot-y-title", "#plot-x-title"))
        assert "skin-tone AUC gap" in region_text(app, y) and y.region.bottom <= plot.region.y  # above the y axis
        assert "test AUC" in region_text(app, x) and x.region.y >= plot.region.bottom  # under the x axis, at its end
        assert region_text(app, x).rstrip().endswith("→")


async def test_the_console_and_the_study_screen_use_the_same_axes(db, store):
    from engine.study import grid
    from engine.study.spec import parse_spec

    w = _session(store, "s-same")
    _node(w, 1, auc=0.71, gap=0.05)
    spec = parse_spec({"name": "axes", "levels": ["base"], "repeats": 1, "steps": 2})
    grid.ensure_study(store, spec)
    app = create_app(db, start="console", session_id="s-same", poll_interval=0.05)
    async with app.run_test(size=(140, 60)) as pilot:
        screen = await _console(app, pilot, 1)
        console_plot = screen.query_one(ComparisonPlot)
        assert str(console_plot.border_title).startswith("test AUC →")
        (mark,) = [m for m in screen.query_one(Scatter).marks if m.kind in ("node", "best")]
        assert (mark.auc, mark.gap) == (0.71, 0.05)  # x = AUC, y = gap
        await pilot.press("l")
        await wait_for(pilot, lambda: isinstance(app.screen, SessionsScreen), what="sessions")
        await pilot.press("s")
        await wait_for(pilot, lambda: isinstance(app.screen, StudyScreen), what="the study screen")
        await pilot.pause(0.2)
        study = app.screen
        assert "skin-tone AUC gap" in region_text(app, study.query_one("#study-y-title"))
        assert "test AUC" in region_text(app, study.query_one("#study-x-title"))
        assert study.query_one("#study-y-title").region.bottom <= study.query_one("#study-plot").region.y


async def test_no_baseline_for_this_data_says_so_and_b_trains_them_in_the_background(db, store):
    from engine.data.agent_workspace import synth_workspace

    from befair_tui.baseline_training import TrainingPlan

    ws = synth_workspace(n_train=60, n_test=40, size=16)
    w = _session(store, "s-base", data={"kind": "synth", "path": str(ws.root)})
    _node(w, 1)
    w.emit(parse(ev.SESSION_FINISHED, {"status": "finished", "reason": "step budget used"}))
    app = create_app(db, start="console", session_id="s-base", poll_interval=0.05)
    async with app.run_test(size=(140, 50)) as pilot:
        screen = await _console(app, pilot, 1)
        board = screen.query_one(Scoreboard)
        await wait_for(pilot, lambda: "no expert baseline trained on this session's data · b: train them"
                       in " ".join(line.plain for line in board.lines), what="the scoreboard says so")
        assert "Train baselines" in screen_text(app).splitlines()[-1]
        screen.baseline_plan = TrainingPlan(variants=("medfair",), seeds=(11,), epochs=1, size=16)
        await pilot.press("b")
        await pilot.pause(0.2)
        await pilot.press("y")
        await wait_for(pilot, lambda: "training baselines" in " ".join(line.plain for line in board.lines),
                       what="progress in the scoreboard")
        assert "Train baselines" not in screen_text(app).splitlines()[-1]  # not twice
        await wait_for(pilot, lambda: screen._training is None, timeout=120, what="the training's end")
        assert [r["variant"] for r in store.baselines()] == ["medfair"]  # in the database
        await pilot.pause(0.3)
        text = " ".join(line.plain for line in board.lines)
        assert "A medfair (n=1)" in text and "no expert baseline" not in text
        assert [m.tag for m in screen.query_one(Scatter).marks if m.kind == "baseline"] == ["A"]


# -- 80×24 ----------------------------------------------------------------------------------------
async def _demo_at_80(app, pilot):
    screen = await _console(app, pilot, 12)
    await wait_for(pilot, lambda: screen.state.status == "finished", what="the end")
    await pilot.pause(0.3)
    return screen


async def test_at_80x24_a_compact_plot_instead_of_none(db, store):
    write_demo_session(store, n_nodes=12)
    app = create_app(db, start="console", session_id="demo-0-12", poll_interval=0.05)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await _demo_at_80(app, pilot)
        plot = screen.query_one(ComparisonPlot)
        assert plot.display and plot.compact and plot.region.width >= 30
        shown = region_text(app, plot)
        assert "test AUC →" in shown and any(m.marker in shown for m in screen.query_one(Scatter).marks)


async def test_at_80x24_a_tree_line_keeps_its_auc_and_gap_and_no_badge_is_cut(db, store):
    write_demo_session(store, n_nodes=12)
    app = create_app(db, start="console", session_id="demo-0-12", poll_interval=0.05)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await _demo_at_80(app, pilot)
        tree = screen.query_one(SearchTree)
        shown = region_text(app, tree)
        for nid, node in screen.state.nodes.items():
            line = tree.item_for(nid).label.plain
            if node.val_auc is not None and node.status == "ok":
                figures = f"{node.val_auc:.3f}"[1:]
                assert figures in line and f"{node.val_gap:.3f}"[1:] in line, line
            assert line.count("[") == line.count("]"), line  # never "[ST][PG][PA"
        assert "[FI" not in shown.replace("[FI]", "")


async def test_at_80x24_a_stopped_node_reads_whole(db, store):
    w = _session(store, "s-stopped")
    _node(w, 1)
    _node(w, 5, status="interrupted")
    app = create_app(db, start="console", session_id="s-stopped", poll_interval=0.05)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await _console(app, pilot, 2)
        line = screen.query_one(SearchTree).item_for(5).label.plain
        assert line.endswith("draft interrupted") and "interrupte…" not in line and ": interrupted" not in line


async def test_at_80x24_the_conversation_tab_and_the_agents_rows_are_reachable(db, store):
    write_demo_session(store, n_nodes=12)
    app = create_app(db, start="console", session_id="demo-0-12", poll_interval=0.05)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await _demo_at_80(app, pilot)
        detail = screen.query_one(NodeDetail)
        tabs = region_text(app, detail).splitlines()[1]
        assert "Chat" in tabs and "Plan" in tabs and "Diff" in tabs  # all seven labels on the line
        await pilot.press("7")
        await pilot.pause(0.1)
        assert detail.active_tab == "conversation"
        board = screen.query_one(Scoreboard)
        assert "↓" in str(board.border_subtitle) and "more" in str(board.border_subtitle)
        board.focus()
        for _ in range(30):
            await pilot.press("down")
        await pilot.pause(0.2)
        shown = region_text(app, board)
        assert "MLZero" in shown and ("AIDE" in shown or board.scroll_y > 0)
        joined = " ".join(line.plain for line in board.lines)
        assert "AIDE ·" in joined and "MLZero ·" in joined


async def test_at_80x24_the_sessions_list_shows_status_and_auc_first(db, store):
    write_demo_session(store, n_nodes=5)
    app = create_app(db, start="sessions")
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause(0.3)
        header, row = screen_text(app).splitlines()[2:4]
        assert header.split()[:5] == ["status", "val", "AUC", "val", "gap"] and "steps" in header
        assert row.split()[0] == "finished" and row.split()[1].startswith(".")


async def settled_footer(pilot, app, start: str) -> str:
    last = None
    for _ in range(40):
        footer = screen_text(app).splitlines()[-1].rstrip()
        if footer == last and footer.endswith("? Help"):
            return footer
        last = footer
        await pilot.pause(0.3)
    raise AssertionError(f"{start}'s footer never settled: {last!r}")


async def test_at_80x24_the_footer_has_only_whole_keys(db, store, tmp_path):
    write_demo_session(store, n_nodes=5, seed=2, finished=False, ts0=time.time())
    for start in ("sessions", "setup", "console"):
        app = create_app(db, start=start, session_id="demo-2-5-live", settings_file=tmp_path / "s.json",
                         poll_interval=0.05)
        async with app.run_test(size=(80, 24)) as pilot:
            # the footer is recomposed when bindings change (a live session's state may turn stale
            # while the test runs): read it until two reads 0.3 s apart agree and it is whole
            footer = await settled_footer(pilot, app, start)
            assert "▏" not in footer and "palette" not in footer, (start, footer)
            assert footer.endswith("? Help"), (start, footer)
            keys = app.screen.query("FooterKey")
            assert sum(k.region.width + 1 for k in keys) <= 80, start


# -- setup that explains itself -------------------------------------------------------------------
async def test_setup_fields_are_wide_enough_for_their_values(db, tmp_path):
    app = create_app(db, settings_file=tmp_path / "s.json")
    async with app.run_test(size=(80, 24)) as pilot:
        screen = app.screen
        assert isinstance(screen, SetupScreen)
        for wid, value in (("#synth-n-train", "16577"), ("#steps", "500"), ("#step-timeout", "86400")):
            box = screen.query_one(wid)
            box.value = value
            box.focus()
            box.scroll_visible()
            # scrolling and repainting take a few frames (longer on a loaded machine)
            await wait_for(pilot, lambda box=box, value=value: value in region_text(app, box),
                           what=f"{wid} showing {value}")


async def test_setup_states_are_visible_without_colour(db, tmp_path):
    app = create_app(db, settings_file=tmp_path / "s.json")
    async with app.run_test(size=(120, 60)) as pilot:
        await pilot.pause(0.2)
        text = screen_text(app)
        assert "▐●▌ base" in text and "▐ ▌ fairness-hint" in text  # selected / not, in characters
        assert "▐ ▌ Blind test metrics until the end" in text
        await pilot.click("#blind")
        await pilot.pause(0.1)
        assert "▐✓▌ Blind test metrics until the end" in screen_text(app)


async def test_setup_says_what_each_choice_does(db, tmp_path):
    app = create_app(db, settings_file=tmp_path / "s.json")
    async with app.run_test(size=(120, 70)) as pilot:
        await pilot.pause(0.2)
        text = " ".join(screen_text(app).split())
        assert "The seed fixes the random choices" in text                  # seed
        assert "Which node is marked ★, which one the search builds on next" in text   # what ★ follows
        assert "two levels differ in their instruction alone" in text                # what the agent is shown
        assert "A simulated agent, no language model" in text               # the coder
        await pilot.click("#data-workspace")
        await pilot.pause(0.2)
        hint = " ".join(region_text(app, app.screen.query_one("#workspace-box .hint")).split())
        assert "`befair data prepare`" in hint and "held-out images it never sees" in hint  # prepared workspace


# -- the last bad inputs --------------------------------------------------------------------------
async def test_the_console_refuses_a_file_that_is_not_a_befair_database_and_writes_nothing(tmp_path):
    notes = tmp_path / "notes.txt"
    notes.write_text("my notes\n")
    app = create_app(notes)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause(0.3)
        await pilot.press("ctrl+s")
        await pilot.press("ctrl+o")
        await pilot.pause(0.1)
    assert app.return_code == 3
    assert app.refused == (f"befair: {notes} is not a befair session database (not an SQLite file, or its header "
                           "is damaged); give another --db")  # the command line's line, word for word
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"] and notes.read_text() == "my notes\n"


def test_befair_with_a_text_file_as_db_gives_the_commands_one_line_error(tmp_path, capsys):
    from befair_tui.cli import main

    notes = tmp_path / "notes.txt"
    notes.write_text("my notes\n")
    assert main(["--db", str(notes)]) == 3
    err = capsys.readouterr().err
    assert err == f"befair: {notes} is not a befair session database (not an SQLite file, or its header is " \
                  "damaged); give another --db\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]
    assert main(["sessions", "--db", str(notes)]) == 3 and capsys.readouterr().err == err  # the same line


def test_no_console_key_is_named_outside_the_console(db, store, tmp_path, capsys):
    from befair_tui.cli import main

    sid = write_demo_session(store, n_nodes=4)
    assert main(["show", sid, "--db", str(db)]) == 0
    shown = capsys.readouterr().out
    assert main(["export", sid, "--out", str(tmp_path / "x"), "--db", str(db)]) == 0
    comparison = (tmp_path / "x" / "comparison.txt").read_text()
    for text in (shown, comparison):
        assert "(v)" not in text and "test view" not in text and "press " not in text
        assert "listed with the test figures" in text
    assert Path(tmp_path / "x" / "solution.py").is_file()
