"""Minimax-Pareto selection and the `befair score` command."""
from __future__ import annotations

import json

import pandas as pd
import pytest

from engine.errors import BefairError
from engine.session.selection import minimax_pareto, pareto_front


def test_pareto_front_and_minimax():
    c = {
        1: {"group_0": 0.80, "group_1": 0.70, "group_2": 0.60},  # front, worst .60
        2: {"group_0": 0.75, "group_1": 0.70, "group_2": 0.68},  # front, worst .68 <- pick
        3: {"group_0": 0.74, "group_1": 0.69, "group_2": 0.60},  # dominated by 1 and 2
        4: {"group_0": 0.90, "group_1": 0.66, "group_2": 0.55},  # front
    }
    assert pareto_front(c) == [1, 2, 4]
    assert minimax_pareto(c) == 2


def test_minimax_tie_break_is_deterministic():
    c = {
        "a": {"group_0": 0.70, "group_1": 0.70},
        "b": {"group_0": 0.90, "group_1": 0.60},
        "c": {"group_0": 0.60, "group_1": 0.90},
    }
    # a is on the front with worst .70; b and c have worst .60
    assert minimax_pareto(c) == "a"
    tie = {"x": {"group_0": 0.7, "group_1": 0.8}, "y": {"group_0": 0.8, "group_1": 0.7}}
    assert minimax_pareto(tie) == "x"  # same worst, same mean -> first in order
    assert minimax_pareto(dict(reversed(list(tie.items())))) == "y"
    mean = {"x": {"group_0": 0.7, "group_1": 0.75}, "y": {"group_0": 0.8, "group_1": 0.7}}
    assert minimax_pareto(mean) == "y"  # same worst, higher mean


def test_missing_group_aucs():
    c = {
        1: {"group_0": 0.8, "group_1": None, "group_2": None},  # group_2 None everywhere: ignored
        2: {"group_0": 0.7, "group_1": 0.7, "group_2": None},
        3: {"group_0": None, "group_1": None, "group_2": None},  # not eligible
    }
    assert 3 not in pareto_front(c)
    assert minimax_pareto(c) == 2  # 1 has no group_1 AUC: counts as -inf there
    assert minimax_pareto({}) is None
    assert minimax_pareto({1: {"group_0": None}}) is None


@pytest.fixture()
def ddi(tmp_path):
    meta = pd.DataFrame({
        "DDI_ID": range(1, 13),
        "DDI_file": [f"{i:06d}.png" for i in range(1, 13)],
        "skin_tone": [12, 34, 56] * 4,
        "malignant": [True, True, True, False, False, False] * 2,
        "disease": "x",
    })
    meta_csv = tmp_path / "ddi.csv"
    meta.to_csv(meta_csv)
    preds = pd.DataFrame({"DDI_file": meta["DDI_file"], "predicted_probability": [0.9, 0.6, 0.3, 0.2, 0.5, 0.4] * 2})
    pred_csv = tmp_path / "pred.csv"
    preds.to_csv(pred_csv, index=False)
    return meta_csv, pred_csv, preds


def _main(argv):
    from befair_tui.cli import build_parser

    try:
        parser = build_parser()
    except ImportError:  # other areas' CLIs not written yet: register ours alone
        import argparse

        from befair_tui.cli import evaluate as cli

        parser = argparse.ArgumentParser(prog="befair")
        cli.register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(argv)
    return args.func(args)


def test_score_cli_json(ddi, capsys):
    meta_csv, pred_csv, _ = ddi
    assert _main(["score", "--predictions", str(pred_csv), "--metadata", str(meta_csv), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["Test Overall AUC"] == pytest.approx(7 / 9)
    assert {"Test auc_gap", "Test auc-group_2", "Test worst_group", "Test FNR-group_1"} <= set(out)
    assert out["Test auc-group_0"] == 1.0 and out["Test auc-group_2"] == 0.0
    assert _main(["score", "--predictions", str(pred_csv), "--metadata", str(meta_csv)]) == 0
    assert "Test Overall AUC" in capsys.readouterr().out


@pytest.mark.parametrize("mutate,message", [
    (lambda p: p.rename(columns={"predicted_probability": "prob"}), "missing column"),
    (lambda p: p.assign(DDI_file=p["DDI_file"].where(p.index != 0, "999999.png")), "unknown images"),
    (lambda p: p.assign(predicted_probability=p["predicted_probability"].where(p.index != 1)), "NaN"),
    (lambda p: p.iloc[1:], "no prediction for 1"),
    (lambda p: p.assign(predicted_probability=p["predicted_probability"] * 2), "outside [0, 1]"),
])
def test_score_cli_errors(ddi, tmp_path, mutate, message):
    meta_csv, _, preds = ddi
    bad = tmp_path / "bad.csv"
    mutate(preds).to_csv(bad, index=False)
    with pytest.raises(BefairError, match=message.replace("[", r"\[").replace("]", r"\]")):
        _main(["score", "--predictions", str(bad), "--metadata", str(meta_csv)])


def test_score_cli_on_the_published_run(shared_data, capsys):
    run = shared_data / "befair_run_example"
    _main(["score", "--predictions", str(run / "5-basic_prompt_DDI_predictions.csv"),
           "--metadata", str(shared_data / "ddi_metadata.csv"), "--json"])
    out = json.loads(capsys.readouterr().out)
    expected = pd.read_csv(run / "expected_metrics_aide_run5.csv").iloc[0]
    assert out["Test Overall AUC"] == pytest.approx(expected["Test Overall AUC"], abs=1e-9)
    assert out["Test auc_gap"] == pytest.approx(expected["Test auc_gap"], abs=1e-9)


def test_other_groupings_are_reported_as_they_are():
    from engine.evaluation.metrics import compute_metrics

    m = compute_metrics([0, 1, 0, 1], [0.1, 0.9, 0.6, 0.4], ["dark", "dark", "light", "light"])
    assert m.group_auc == {"dark": 1.0, "light": 0.0}
    assert m.worst_group == "light" and m.auc_gap == 1.0


def test_audit_cli(tmp_path, capsys):
    code = tmp_path / "solution.py"
    code.write_text('import pandas as pd\ndf = pd.read_csv("x")\nw = df["skin_tone"].map({1: 2.0})\n'
                    'model.fit(X, y, sample_weight=w)\n')
    assert _main(["audit", str(code), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["flags"]["reads_skin_tone"] and out["flags"]["reweighting"]
    assert out["evidence"]["reweighting"] == "line 4: model.fit(X, y, sample_weight=w)"
    with pytest.raises(BefairError):
        _main(["audit", str(tmp_path / "missing.py")])


@pytest.mark.parametrize("content", [b"def f(:\n    pass\n", b"\x00\x01\x89PNG binary\xff\xfe"])
def test_audit_cli_on_code_that_does_not_parse_says_not_audited_and_exits_3(tmp_path, capsys, content):
    """Unknown must not read as "no": every flag says "not audited", the reason is given, exit 3."""
    code = tmp_path / "solution.py"
    code.write_bytes(content)
    assert _main(["audit", str(code)]) == 3
    captured = capsys.readouterr()
    lines = captured.out.strip().splitlines()
    assert len(lines) == 6 and all(line.split()[1:] == ["not", "audited"] for line in lines)
    assert not any(line.endswith(" no") or " no " in line for line in lines)
    assert captured.err.startswith(f"befair: {code}: not audited: ") and captured.err.count("\n") == 1
    assert _main(["audit", str(code), "--json"]) == 3
    out = json.loads(capsys.readouterr().out)
    assert out["audited"] is False and set(out["flags"].values()) == {None}
    assert out["note"].startswith("not audited: ") and out["exit_code"] == 3
