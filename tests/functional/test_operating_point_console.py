"""The operating point on screen (issue 34): the Groups tab shows each skin-tone group's sensitivity,
specificity and melanomas missed per 100 at the session's cut-off, with intervals and counts, and
calibration; a node measured before operating points keeps its figures at 0.5; the setup's
Cut-off reaches `befair run`; a bad --operating-point is refused with a message."""
from __future__ import annotations

import io
import subprocess
import sys

import numpy as np
from rich.console import Console
from scipy.stats import binomtest
from textual.widgets import Select

from engine.agent.session_config import SessionConfig
from engine.measures import operating_point as op
from engine.evaluation.metrics import compute_metrics
from engine.session import events as ev
from engine.session.event_types import parse

from befair_tui.app import create_app
from befair_tui.screens.console import ConsoleScreen
from befair_tui.screens.setup import SetupScreen
from befair_tui.settings import load_choices
from befair_tui.widgets.node_detail import NodeDetail
from befair_tui.widgets.text_pane import TextPane

from .conftest import wait_for

CODER = {"name": "offline", "label": "offline coder (simulated)", "simulated": True}
SIZES = {"group_0": (160, 40), "group_1": (150, 36), "group_2": (120, 30)}
SEPARATION = {"group_0": 2.2, "group_1": 1.8, "group_2": 0.8}   # dark skin: the weakest ranking


def _split(seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Binormal scores per group, squashed too steeply (an overconfident, uncalibrated model)."""
    rng = np.random.default_rng(seed)
    y, s, g = [], [], []
    for group, (n, k) in SIZES.items():
        y += [1] * k + [0] * (n - k)
        s += list(rng.normal(SEPARATION[group], 1, k)) + list(rng.normal(0, 1, n - k))
        g += [group] * n
    return np.array(y), 1 / (1 + np.exp(-2 * (np.array(s) - 1.5))), np.array(g)


def _measured(seed: int, *, point: bool = True) -> tuple[dict, dict, float]:
    """(validation summary, test summary, the cut-off) as the evaluator records them."""
    validation, test = _split(seed), _split(seed + 1000)
    threshold = op.sensitivity_threshold(validation[0], validation[1], 0.9)
    summaries = []
    for y, s, g in (validation, test):
        summary = compute_metrics(y, s, g, intervals=True).summary()
        if point:
            summary[op.KEY] = op.block(op.Setting.parse(op.DEFAULT), threshold, y, s, g, list(SIZES))
        summaries.append(summary)
    return summaries[0], summaries[1], threshold


def _node(w, nid: int, validation: dict, test: dict) -> None:
    w.emit(parse(ev.NODE_CREATED, {"node_id": nid, "parent_id": None, "step": nid, "stage": "draft",
                                   "plan": f"plan {nid}", "guidance_ids": [], "origin": "agent"}))
    w.emit(parse(ev.EXEC_FINISHED, {"node_id": nid, "status": "ok", "exit_code": 0, "exec_time": 1.0,
                                    "exc_type": None, "output_head": "", "output_tail": "", "truncated": False}))
    w.emit(parse(ev.REVIEW, {"node_id": nid, "is_bug": False, "summary": "ok", "claimed_metric": None}))
    for split, summary in (("validation", validation), ("test", test)):
        w.emit(parse(ev.EVALUATED, {"node_id": nid, "split": split, "ok": True, "verdict": "ok", "reason": None,
                                    "summary": summary, "medfair": {}, "blinded": False}))


def _session(store, sid: str):
    config = SessionConfig(level="fairness-metric", steps=10, num_drafts=2).to_dict()
    return store.create_session(config, instruction="x", coder=CODER, data={"kind": "synth", "path": "p"},
                                session_id=sid)


def _wilson(k: int, n: int) -> str:
    ci = binomtest(k, n).proportion_ci(method="wilson")
    return f"{f'{ci.low:.2f}'.lstrip('0')}–{f'{ci.high:.2f}'.lstrip('0')}"


def _expected_dark(test_seed: int, threshold: float) -> tuple[list[str], list[str]]:
    """The dark-skin group's test figures and their counts, computed here from the scores (not from
    the block)."""
    y, s, g = _split(test_seed)
    dark = g == "group_2"
    caught = int(((s >= threshold) & dark & (y == 1)).sum())
    cleared = int(((s < threshold) & dark & (y == 0)).sum())
    malignant, benign = int((dark & (y == 1)).sum()), int((dark & (y == 0)).sum())
    missed = malignant - caught
    low, high = (100 * v for v in binomtest(missed, malignant).proportion_ci(method="wilson"))
    return ([f"{f'{caught / malignant:.2f}'.lstrip('0')} ({_wilson(caught, malignant)})",
             f"{f'{cleared / benign:.2f}'.lstrip('0')} ({_wilson(cleared, benign)})",
             f"{100 * missed / malignant:.0f} ({low:.0f}–{high:.0f})"],
            [f"{caught}/{malignant} caught", f"{cleared}/{benign} cleared", f"{missed}/{malignant} missed"])


def _plain(renderable, width: int = 200) -> str:
    console = Console(width=width, file=io.StringIO(), color_system=None)
    console.print(renderable)
    return console.file.getvalue()


async def test_the_groups_tab_shows_each_skin_tone_at_the_operating_point(db, store):
    w = _session(store, "s-point")
    validation, test, threshold = _measured(7)
    _node(w, 1, validation, test)
    old_validation, old_test, _ = _measured(8, point=False)   # measured before operating points
    _node(w, 2, old_validation, old_test)
    app = create_app(db, start="console", session_id="s-point", poll_interval=0.05)
    async with app.run_test(size=(200, 50)) as pilot:
        screen = app.screen
        assert isinstance(screen, ConsoleScreen)
        await wait_for(pilot, lambda: 2 in screen.state.nodes and screen.state.nodes[2].test is not None)
        screen._select(1, move_cursor=True)
        await pilot.press("4")   # the Groups tab
        pane = screen.query_one("#groups", TextPane)
        await wait_for(pilot, lambda: "operating point" in pane.plain, what="the Groups tab")
        shown = pane.plain
        assert f"cut-off {f'{threshold:.3f}'.lstrip('0')}, set to catch 90 % of malignant" in shown
        for words in ("95 % intervals", "sensitivity", "specificity", "missed per 100", "caught", "cleared",
                      "Brier score", "calibration slope", "FST V–VI (dark)", "all groups"):
            assert words in shown, words
        assert "missed malignant (at 0.5)" not in shown
        text = _plain(screen.query_one(NodeDetail)._groups(screen.state, screen.state.nodes[1]))
        figures_, counts = _expected_dark(7 + 1000, threshold)
        lines = text.splitlines()
        at = [i for i, line in enumerate(lines) if line.startswith("FST V–VI (dark)")]
        test_row = at[-2]   # test's figures at the cut-off (then its calibration)
        assert all(f in lines[test_row] for f in figures_), lines[test_row]
        assert all(c in lines[test_row + 1] for c in counts), lines[test_row + 1]
        assert "n 120" in lines[at[-1] + 1]   # the calibration rests on the group's 120 images

        screen._select(2, move_cursor=True)   # an older node: its figures stay at 0.5
        await wait_for(pilot, lambda: "missed malignant (at 0.5)" in pane.plain, what="the old node's Groups tab")
        assert "operating point" not in pane.plain


async def test_the_setup_cut_off_reaches_the_run_and_is_remembered(db, tmp_path):
    settings = tmp_path / "s.json"
    app = create_app(db, settings_file=settings)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = app.screen
        assert isinstance(screen, SetupScreen)
        select = screen.query_one("#operating-point", Select)
        assert select.value == "sensitivity:0.90"
        select.value = "sensitivity:0.95"
        await pilot.pause()
        choices = screen.read_choices()
    assert choices.operating_point == "sensitivity:0.95"
    assert choices.session_config().operating_point == "sensitivity:0.95"
    from befair_tui.settings import save_choices

    save_choices(choices, settings)
    assert load_choices(settings).operating_point == "sensitivity:0.95"


def test_a_bad_operating_point_is_refused_before_anything_starts(tmp_path):
    out = subprocess.run([sys.executable, "-m", "befair_tui.cli", "run", "--headless", "--db",
                          str(tmp_path / "b.db"), "--operating-point", "90"], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 2
    assert "--operating-point: the operating point must be a sensitivity or a probability" in out.stderr
    assert not (tmp_path / "b.db").exists() or "session" not in out.stdout


def test_the_run_option_becomes_the_session_setting_in_one_spelling(tmp_path):
    from befair_tui.cli import build_parser
    from befair_tui.cli.run import validate_run_args

    base = ["run", "--headless", "--db", str(tmp_path / "b.db")]
    args = build_parser().parse_args([*base, "--operating-point", "sensitivity:95%"])
    assert validate_run_args(args).operating_point == "sensitivity:0.95"
    assert validate_run_args(build_parser().parse_args(base)).operating_point == "sensitivity:0.90"
