"""The operating point in the session report (text, Markdown, HTML) and the exports (nodes.csv,
tree.json): each group's sensitivity, specificity, missed per 100 and calibration with intervals
and counts; a node measured before operating points leaves those columns empty."""
from __future__ import annotations

import csv
import json

import numpy as np
import pytest

from engine.agent.session_config import SessionConfig
from engine.measures import operating_point as op
from engine.evaluation.metrics import compute_metrics
from engine.session import events as ev
from engine.session.event_types import parse
from engine.session.export import NODE_CSV_COLUMNS, export_session
from engine.study.session_report import summarise
from engine.session.store import SessionStore

CODER = {"name": "offline", "label": "offline coder (simulated)", "simulated": True}
GROUPS = ("group_0", "group_1", "group_2")


@pytest.fixture()
def store(tmp_path):
    s = SessionStore(tmp_path / "db" / "befair.db")
    yield s
    s.close()


def _split(seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    g = np.repeat(GROUPS, 100)
    y = (rng.random(300) < 0.3).astype(int)
    s = 1 / (1 + np.exp(-(rng.normal(0, 1, 300) + y * np.where(g == "group_2", 0.7, 1.8) - 1)))
    return y, s, g


def _summaries(seed: int, point: bool) -> list[dict]:
    validation, test = _split(seed), _split(seed + 1)
    threshold = op.sensitivity_threshold(validation[0], validation[1], 0.9)
    out = []
    for y, s, g in (validation, test):
        summary = compute_metrics(y, s, g, intervals=True).summary()
        if point:
            summary[op.KEY] = op.block(op.Setting.parse(op.DEFAULT), threshold, y, s, g, GROUPS)
        out.append(summary)
    return out


def _session(store, sid: str, point: bool = True) -> None:
    w = store.create_session(SessionConfig(steps=3).to_dict(), instruction="x", coder=CODER,
                             data={"kind": "synth", "path": "p"}, session_id=sid)
    w.emit(parse(ev.NODE_CREATED, {"node_id": 1, "parent_id": None, "step": 1, "stage": "draft", "plan": "p",
                                   "guidance_ids": [], "origin": "agent"}))
    w.emit(parse(ev.EXEC_FINISHED, {"node_id": 1, "status": "ok", "exit_code": 0, "exec_time": 1.0, "exc_type": None,
                                    "output_head": "", "output_tail": "", "truncated": False}))
    for split, summary in zip(("validation", "test"), _summaries(5, point), strict=True):
        w.emit(parse(ev.EVALUATED, {"node_id": 1, "split": split, "ok": True, "verdict": "ok", "reason": None,
                                    "summary": summary, "medfair": {}, "blinded": False}))


def test_the_report_gives_each_skin_tone_at_the_operating_point_in_every_format(store):
    _session(store, "s-rep")
    state = store.state("s-rep")
    point = state.nodes[1].test.operating_point
    dark = point.group("group_2")
    caught_text = f"{dark.caught}/{dark.malignant} caught"
    report = summarise(state)
    lines = "\n".join(report.lines())
    assert "test: cut-off" in lines and "set to catch 90 % of malignant lesions" in lines
    dark_line = next(line for line in report.lines() if "FST V–VI (dark): sensitivity" in line and caught_text in line)
    assert "specificity" in dark_line and "missed per 100 malignant" in dark_line and "slope" in dark_line
    markdown = report.markdown()
    assert "## Per skin-tone group at the operating point" in markdown and "Wilson" in markdown
    assert any(row.startswith("| 1 | test · cut-off") and "FST V–VI (dark)" in row and caught_text in row
               for row in markdown.splitlines())
    html = report.html()
    assert "<h2>Per skin-tone group at the operating point</h2>" in html and caught_text in html


def test_the_exports_spell_out_every_figure_with_its_interval(store, tmp_path):
    _session(store, "s-exp")
    export_session(store, "s-exp", tmp_path / "out")
    tree = json.loads((tmp_path / "out" / "tree.json").read_text())
    public = tree["nodes"][0]["test"][op.KEY]
    assert public["setting"] == "sensitivity:0.90" and set(public["groups"]) == {"12", "34", "56"}
    dark = public["groups"]["56"]
    assert dark["sensitivity_ci"][0] <= dark["sensitivity"] <= dark["sensitivity_ci"][1]
    with (tmp_path / "out" / "nodes.csv").open() as fh:
        (row,) = list(csv.DictReader(fh))
    assert list(row) == NODE_CSV_COLUMNS
    assert float(row["test_op_cut_off"]) == pytest.approx(public["threshold"])
    for figure in ("sensitivity", "specificity", "missed_per_100", "brier", "calibration_slope"):
        assert float(row[f"test_op_{figure}_56"]) == pytest.approx(dark[figure])
        assert [float(row[f"test_op_{figure}_56_lo"]), float(row[f"test_op_{figure}_56_hi"])] == \
            pytest.approx(dark[f"{figure}_ci"])
    assert int(row["test_op_caught_all"]) == public["overall"]["caught"]
    assert row["test_missed_56"] != ""   # the figures at 0.5 stay


def test_a_node_measured_before_operating_points_keeps_its_old_columns(store, tmp_path):
    _session(store, "s-old", point=False)
    assert "operating point" not in summarise(store.state("s-old")).markdown()
    export_session(store, "s-old", tmp_path / "out")
    with (tmp_path / "out" / "nodes.csv").open() as fh:
        (row,) = list(csv.DictReader(fh))
    assert row["val_op_sensitivity_56"] == "" and row["val_missed_56"] != "" and row["val_auc"] != ""


def test_a_slope_interval_below_zero_reads_with_to_not_a_dash():
    from engine.study.session_report import calibration_text

    g = op.GroupAtPoint(name="group_2", n=207, malignant=48, benign=159, caught=8, cleared=130,
                        brier=[.24, .21, .27], slope=[-.05, -.22, .12])
    assert calibration_text(g) == "Brier .24 (.21–.27) · slope -.05 (-.22 to .12) · n 207"


def test_the_published_run_at_0_5_and_at_a_cut_off_catching_90_percent(shared_data):
    """One published be-fair run (AIDE, base level) on DDI: at 0.5 it misses 40 of 48 dark-skin
    melanomas; at the cut-off that catches 90 % overall (chosen here on the same test images, the
    run has no validation set) it still misses 12 of 48 on dark skin and 1 of 49 on light."""
    from engine.evaluation.heldout import score_predictions
    from engine.evaluation.scoring import read_predictions

    predictions = read_predictions(shared_data / "befair_run_example" / "5-basic_prompt_DDI_predictions.csv")
    _, _, metrics = score_predictions(predictions, shared_data / "ddi_metadata.csv")
    y, s, g = metrics.scored
    at_half = op.OperatingPoint.of(op.block(op.Setting.parse("probability:0.5"), 0.5, y, s, g, GROUPS))
    assert (at_half.group("group_2").missed, at_half.group("group_2").malignant) == (40, 48)
    assert at_half.group("group_2").missed == round(metrics.groups[2].fnr_at_thres * 48)   # MEDFAIR's FNR at 0.5
    threshold = op.sensitivity_threshold(y, s, 0.9)
    point = op.OperatingPoint.of(op.block(op.Setting.parse(op.DEFAULT), threshold, y, s, g, GROUPS))
    assert point.overall.sensitivity[0] >= 0.9
    assert (point.group("group_2").missed, point.group("group_0").missed) == (12, 1)
