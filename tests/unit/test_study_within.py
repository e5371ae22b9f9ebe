"""Study statistics for the design a study has: the within-participant mixed model and paired
differences (engine.study.within), Holm's correction of pairs of levels (engine.study.comparisons),
the long CSV with its codebook (engine.study.people_report), planning by simulation
(engine.study.plan) and the preregistration (engine.study.prereg). Checked against statsmodels and
scipy run directly; the preregistration against a real study database."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from engine.errors import UsageError
from engine.session.store import SessionStore
from engine.study import grid, plan, prereg
from engine.study.comparisons import between_groups
from engine.study.people_report import codebook, long_measures, write_long_csv
from engine.study.people_spec import Question
from engine.study.spec import parse_spec
from engine.study.within import Observation, analyse, fit_model, paired

LEVELS = ["base", "fairness-hint", "fairness-methods"]


def observations(n: int = 8, *, person_sd: float = 0.05, seed: int = 1) -> list[Observation]:
    """n participants (half dermatologists) × 3 levels: a participant's own level, a level effect."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        group, own = ("dermatologist" if i % 2 else "data scientist"), rng.normal(0, person_sd)
        for level, effect in zip(LEVELS, (0.0, 0.03, 0.06), strict=True):
            out.append(Observation(f"p{i:02d}", group, level, 0.6 + own + effect + rng.normal(0, 0.02)))
    return out


# statsmodels warns of a boundary for its own fit here, with the variance well away from it
@pytest.mark.filterwarnings("ignore::statsmodels.tools.sm_exceptions.ConvergenceWarning")
def test_the_mixed_model_is_statsmodels_formula_fit():
    import statsmodels.formula.api as smf

    obs = observations()
    fit = fit_model(obs, measure="test_auc", label="test AUC", level_order=LEVELS,
                    group_order=["data scientist", "dermatologist"])
    assert fit.fitted and fit.why is None and fit.n_participants == 8 and fit.participant_variance > 0
    frame = pd.DataFrame([o.__dict__ for o in obs])
    theirs = smf.mixedlm("value ~ C(level, Treatment('base')) * C(group, Treatment('data scientist'))", frame,
                         groups="participant").fit(reml=True)
    ours = {e.term: e for e in fit.effects}
    names = {"intercept": "Intercept",
             "level fairness-hint (vs base)": "C(level, Treatment('base'))[T.fairness-hint]",
             "expertise dermatologist (vs data scientist)": "C(group, Treatment('data scientist'))[T.dermatologist]",
             "level fairness-methods × expertise dermatologist":
                 "C(level, Treatment('base'))[T.fairness-methods]:"
                 "C(group, Treatment('data scientist'))[T.dermatologist]"}
    for term, name in names.items():
        assert ours[term].estimate == pytest.approx(theirs.fe_params[name], abs=1e-6)
        assert ours[term].se == pytest.approx(theirs.bse_fe[name], rel=1e-4)
        assert ours[term].ci[0] == pytest.approx(theirs.conf_int().loc[name, 0], abs=1e-5)
    # the model's estimate of a group × level is the sum of its effects
    cell = next(c for c in fit.cells if c["group"] == "dermatologist" and c["level"] == "fairness-methods")
    x = pd.DataFrame({"level": ["fairness-methods"], "group": ["dermatologist"]})
    assert cell["estimate"] == pytest.approx(float(theirs.predict(x).iloc[0]), abs=1e-6)
    assert cell["ci"][0] < cell["estimate"] < cell["ci"][1]


def test_too_few_participants_or_no_participant_variance_fall_back_to_the_paired_analysis():
    few = fit_model(observations(3), measure="m", label="m", level_order=LEVELS, group_order=["data scientist"])
    assert not few.fitted and few.status == "too few participants" and "at least 4" in few.why
    same = [Observation(o.participant, o.group, o.level, {"base": 0.5, "fairness-hint": 0.55}.get(o.level, 0.6))
            for o in observations(6)]
    flat = fit_model(same, measure="m", label="m", level_order=LEVELS, group_order=["data scientist", "dermatologist"])
    assert flat.status == "singular fit" and not flat.effects
    # a participant's own level with no spread of its own: the participants' variance sits at zero
    noise = observations(8, person_sd=0.0, seed=3)
    assert fit_model(noise, measure="m", label="m", level_order=LEVELS, group_order=["data scientist"]).status in (
        "singular fit", "fitted")
    rows = [{"participant": o.participant, "role": o.group, "level": o.level, "test_auc": o.value, "excluded": None}
            for o in observations(3)]
    result = analyse(rows, level_order=LEVELS, group_order=["data scientist", "dermatologist"])
    auc = next(m for m in result["measures"] if m["measure"] == "test_auc")
    assert "the paired analysis stands alone" in auc["fallback"] and len(auc["paired"]) == 3


def test_paired_differences_are_scipys_paired_t_and_holm_is_statsmodels():
    from statsmodels.stats.multitest import multipletests

    obs = observations(8)
    pairs = paired(obs, measure="test_auc", label="test AUC", level_order=LEVELS)
    assert [(p.a, p.b) for p in pairs] == [("base", "fairness-hint"), ("base", "fairness-methods"),
                                         ("fairness-hint", "fairness-methods")]
    value = {(o.participant, o.level): o.value for o in obs}
    people = sorted({o.participant for o in obs})
    for p in pairs:
        a, b = np.array([value[(q, p.a)] for q in people]), np.array([value[(q, p.b)] for q in people])
        test = stats.ttest_rel(a, b)
        ci = test.confidence_interval(0.95)
        assert p.n == 8 and p.mean == pytest.approx(float(np.mean(a - b)))
        assert p.ci == pytest.approx((ci.low, ci.high)) and p.p_value == pytest.approx(test.pvalue)
    holm = multipletests([p.p_value for p in pairs], method="holm")[1]
    assert [p.p_holm for p in pairs] == pytest.approx(list(holm))
    assert all(p.told_apart == (p.p_holm < 0.05) for p in pairs) and "Holm" in pairs[0].sentence()
    # repeats are averaged within a participant before differencing
    twice = [*obs, *(Observation(o.participant, o.group, o.level, o.value + 0.01) for o in obs if o.level == "base")]
    assert paired(twice, measure="m", label="m", level_order=LEVELS)[0].mean == pytest.approx(pairs[0].mean + 0.005)


def test_between_runs_pairs_of_levels_are_holm_corrected():
    rng = np.random.default_rng(4)
    values = {("AIDE", lv): list(rng.normal(mu, 0.02, 6)) for lv, mu in zip(LEVELS, (0.10, 0.12, 0.18), strict=True)}
    found = between_groups(values, figure="gap", level_order=LEVELS)
    assert len(found) == 3 and all(c.p_holm is not None for c in found)
    raw = sorted(c.p_value for c in found)
    assert sorted(c.p_holm for c in found)[0] == pytest.approx(min(1.0, 3 * raw[0]))
    assert all(c.p_holm >= c.p_value for c in found) and "Holm" in found[0].sentence()
    one = between_groups({("AIDE", "base"): [0.1, 0.12, 0.11], ("AIDE", "fairness-hint"): [0.2, 0.21, 0.19]},
                         figure="gap", level_order=LEVELS)
    assert one[0].p_holm is None and one[0].told_apart == (one[0].p_value < 0.05)   # a family of one pair


def test_long_csv_loads_in_pandas_and_its_codebook_names_every_column_and_measure(tmp_path):
    questions = [Question("fair_dark", "How sure are you it is fair to dark skin?"),
                 Question("comment", "Anything else?", kind="text", required=False)]
    rows = [{"study": "s", "participant": f"p{i}", "role": "dermatologist", "years_dermatology": 3.0,
             "years_ml": None, "session_id": f"s-p{i}-{lv}", "cell": i, "level": lv, "instruction_level": lv,
             "agent": "offline", "repeat": 0, "position": 1, "status": "finished", "excluded": None,
             "test_auc": 0.61, "test_auc_ci_lo": 0.55, "test_auc_ci_hi": 0.67, "test_auc_gap": 0.1, "pauses": 2,
             "guidance": 1, "q_fair_dark": 5, "q_comment": "fine, thanks"} for i in range(2) for lv in LEVELS[:2]]
    rows[0]["excluded"] = "the session is failed"
    path, book = write_long_csv(rows, tmp_path / "long.csv", questions, study="s")
    frame = pd.read_csv(path)
    assert len(frame) == len(rows) * len(long_measures(questions))
    assert frame["value"].dtype == float and frame["included"].isin([0, 1]).all()
    auc = frame[frame.measure == "test_auc"]
    assert list(auc["included"]) == [0, 1, 1, 1] and auc["ci_lo"].iloc[1] == 0.55
    assert "q_comment" not in set(frame.measure) and "q_fair_dark" in set(frame.measure)
    text = book.read_text()
    assert book.name == "long.codebook.md" and text == codebook(questions, csv_name="long.csv", study="s")
    for column in frame.columns:
        assert f"| `{column}` |" in text
    for measure in set(frame.measure):
        assert f"| `{measure}` |" in text


def test_plan_by_simulation_agrees_with_the_t_test_power_formula():
    from statsmodels.stats.power import TTestIndPower, TTestPower

    residuals = list(np.random.default_rng(0).normal(0, 0.05, 4000))
    spread = plan.Spread("gap", "runs", "normal draws", residuals, 1, len(residuals))
    n, power = plan.needed(spread, 0.05, within=False, alpha=0.05, power=0.8)
    formula = TTestIndPower().solve_power(effect_size=1.0, alpha=0.05, power=0.8)   # d = .05 / .05
    assert n == pytest.approx(formula, abs=2) and power >= 0.8
    paired_spread = plan.Spread("gap", "paired", "normal draws", residuals, 1, len(residuals))
    n_within, _ = plan.needed(paired_spread, 0.025, within=True, alpha=0.05, power=0.8)
    assert n_within == pytest.approx(TTestPower().solve_power(effect_size=0.5, alpha=0.05, power=0.8), abs=3)
    assumptions, plans = plan.plan(spread, [(0.05, "a .05 difference"), (0.001, "tiny")], within=False, pairs=6)
    assert plans[0].alpha == pytest.approx(0.05 / 6) and plans[0].n > n
    assert plans[1].n is None and "more than" in plans[1].sentence()
    assert any("α / 6" in note for note in assumptions.notes) and "sd 0.0499" in assumptions.notes[0]


def test_plan_spreads_from_runs_pairs_and_intervals():
    runs = plan.spread_from_runs({("A", "base"): [0.1, 0.2, 0.3], ("A", "hint"): [0.5], ("B", "base"): [0.2, 0.4]},
                                 outcome="gap", source="s")
    assert runs.groups == 2 and runs.values == 5 and len(runs.residuals) == 5
    # resampling the scaled residuals keeps each group's sample variance
    assert np.mean(np.square(runs.residuals[:3])) == pytest.approx(np.var([0.1, 0.2, 0.3], ddof=1))
    wide = plan.spread_from_intervals([(0.0, 0.392), (0.1, 0.492), (0.2, 0.2)], outcome="gap", source="s")
    assert wide.kind == "per-run intervals" and wide.values == 2 and wide.sd == pytest.approx(0.1, rel=0.05)


# --------------------------------------------------------------------------- preregistration

SPEC = {"name": "pre", "levels": ["base", "fairness-methods"], "repeats": 2, "steps": 1, "coder": {"name": "offline"},
        "data": {"synth": {"n_train": 60, "n_test": 40, "size": 16}}}


def test_preregistration_is_recorded_once_before_the_first_session_and_refused_after(tmp_path):
    store = SessionStore(tmp_path / "db.db")
    spec = parse_spec(SPEC)
    with pytest.raises(UsageError, match="empty"):
        prereg.preregister(store, spec, hypotheses="  \n")
    found = prereg.preregister(store, spec, hypotheses="H1: fairness-methods lowers the gap by .05.",
                               spec_file=b"name = 'pre'")
    assert not found.late and found.spec_sha256 == spec.digest and found.primary_outcome == "test_auc_gap"
    assert found.design == prereg.BETWEEN and "Holm" in found.analysis and found.criterion == spec.best
    assert prereg.find(store, "pre") == found and [e.kind for e in store.study_events("pre")] == ["preregistered"]
    with pytest.raises(UsageError, match="not amended"):
        prereg.preregister(store, spec, hypotheses="H2")
    text = prereg.markdown(found, ["another criterion: final choices by minimax, preregistered validation"])
    assert spec.digest in text and "H1: fairness-methods" in text and "## Deviations" in text
    assert "before the first session" in text

    later = parse_spec({**SPEC, "name": "later"})
    grid.ensure_study(store, later)
    assert grid.claim(store, "later", 0)                         # a session of the study has started
    with pytest.raises(UsageError, match="already started.*--late"):
        prereg.preregister(store, later, hypotheses="H1")
    assert prereg.find(store, "later") is None
    late = prereg.preregister(store, later, hypotheses="H1", late=True)
    assert late.late and late.started_before == 1 and "**late**" in prereg.markdown(late)
    listed = prereg.deviations(late, criterion="minimax", spec_sha256=later.digest, within=None, excluded=[
        {"cell": 1, "participant": None, "prompt": "base", "repeat": 1, "reason": "the session is failed"}])
    assert listed[0].startswith("preregistered late") and "another criterion: final choices by minimax" in listed[1]
    assert "session left out: cell 1 (base r1): the session is failed" in listed[2]
    store.close()


# --------------------------------------------------------------------------- befair study plan


def test_study_plan_from_an_imported_study_prints_its_assumptions(tmp_path, capsys):
    import json

    from befair_tui.cli import main

    from .test_import_be_fair import _cli, _metadata, _tree

    db = tmp_path / "plan.db"
    assert _cli("import", "be-fair", _tree(tmp_path / "be-fair"), "--metadata", _metadata(tmp_path / "ddi.csv"),
                "--db", db) == 0
    capsys.readouterr()
    assert main(["study", "plan", "be-fair", "--effect", "0.05", "--observed", "--db", str(db), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["design"] == "between runs" and [r["agent"] for r in out["results"]] == ["AIDE", "MLZero"]
    aide = out["results"][0]
    assert aide["assumptions"]["pairs"] == 1 and aide["assumptions"]["spread"]["kind"] == "runs"
    assert aide["assumptions"]["spread"]["values"] == 2          # AIDE's two base runs; one fairness-hint run
    assert [p["label"] for p in aide["plans"]][0] == "a difference of 0.05"
    assert aide["plans"][1]["label"].startswith("observed base − fairness-hint (AIDE)")

    people = tmp_path / "people.toml"
    people.write_text('name = "ppl"\nlevels = ["base", "fairness-hint", "fairness-methods"]\nparticipants = ["p1"]\n'
                      '[people]\nconsent = "I agree."\n[coder]\nname = "offline"\n')
    assert main(["study", "plan", str(people), "--from", "be-fair", "--agent", "AIDE", "--effect", "0.05",
                 "--db", str(db)]) == 0
    text = capsys.readouterr().out
    assert "participants to detect a difference" in text and "3 pairs of levels" in text
    assert "the difference of two independent runs" in text and "rests on 2 values only" in text
    assert main(["study", "plan", "be-fair", "--db", str(db)]) == 2
    assert "give --effect" in capsys.readouterr().err
    assert main(["study", "plan", "nope", "--effect", "0.05", "--db", str(db)]) == 2
    assert "no study 'nope'" in capsys.readouterr().err


def test_a_study_with_one_run_per_level_plans_from_its_runs_own_intervals():
    from engine.study.report import StudyReport

    sessions = [{"session_id": f"s{i}", "model": "AIDE", "prompt": level, "test_auc_gap": 0.1 + 0.01 * i,
                 "test_auc_gap_ci": [0.0 + 0.01 * i, 0.2 + 0.01 * i]} for i, level in enumerate(LEVELS)]
    report = StudyReport(study="pilot", criterion="validation", data={}, synthetic=True, counts={},
                         sessions=sessions, excluded=[], table=[])
    spread = plan.measured_spread(report, "gap")
    assert spread.kind == "per-run intervals" and spread.values == 3
    assert spread.sd == pytest.approx(0.2 / 3.92, rel=0.05)
    _, plans = plan.plan(spread, [(0.05, "a .05 difference")], within=False)
    assert plans[0].n is not None and "lower bound" in plan._spread_note(spread, within=False)
