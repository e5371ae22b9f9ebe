"""A study with people, end to end, for its statistics: preregistered before it runs, dry-run with
4 participants × 2 levels (the offline coder, tiny SynthDerm, real sessions in worker processes),
profiles and answers recorded as participants give them, then `befair study report` with another
criterion: the mixed-model table, the paired table with Holm's correction, the long CSV with its
codebook, and the preregistration with its deviations. The model's estimates are checked against
statsmodels run directly on the exported long CSV."""
from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from engine.session.store import SessionStore
from engine.study import people
from engine.study.spec import load_spec

from .test_study_pool import study_env

__all__ = ["study_env"]

ROLES = {"p01": "dermatologist", "p02": "dermatologist", "p03": "data scientist", "p04": "data scientist"}
# how sure each participant is that the chosen pipeline is fair to dark skin: (base, fairness-methods)
SURE = {"p01": (2, 4), "p02": (5, 6), "p03": (1, 4), "p04": (4, 5)}

SPEC = '''
name = "design"
levels = ["base", "fairness-methods"]
steps = 1
seed = 1
step_timeout = 120
participants = ["p01", "p02", "p03", "p04"]

[people]
instructions = "Steer the agent towards a pipeline that is fair to every skin tone."
consent = "I agree that my steering and my answers are recorded for this study."
roles = ["dermatologist", "data scientist"]

[[people.questions]]
id = "fair_dark"
text = "How sure are you that the chosen pipeline is fair to dark skin?"
scale = [1, 7]

[search]
num_drafts = 1

[coder]
name = "offline"

[data]
synth = { n_train = 60, n_test = 40, size = 16 }
'''


def participants_answer(store: SessionStore, spec_path: Path) -> None:
    spec = people.dry_run_spec(load_spec(spec_path))
    for pid, role in ROLES.items():
        people.consent(store, spec, pid)
        people.give_profile(store, spec, pid, {"role": role, "years_dermatology": 5, "years_ml": 1, "notes": ""})
        for cell in people.participant_cells(spec, pid):
            people.answer(store, spec, pid, cell, {"fair_dark": SURE[pid][0 if cell.level.label == "base" else 1]})


@pytest.mark.slow
def test_a_preregistered_dry_run_gives_the_within_participant_statistics(tmp_path, study_env, capsys):
    import statsmodels.formula.api as smf

    from befair_tui.cli import main

    spec, db = tmp_path / "design.toml", tmp_path / "db.db"
    spec.write_text(SPEC)
    hypotheses = tmp_path / "h.md"
    hypotheses.write_text("H1: with fairness-methods the chosen pipeline's skin-tone gap is lower than at base.\n")
    assert main(["study", "preregister", str(spec), "--hypotheses", str(hypotheses), "--dry-run", "--db", str(db),
                 "--markdown", str(tmp_path / "pre.md")]) == 0
    assert "before the first session" in (tmp_path / "pre.md").read_text()
    assert main(["study", "run", str(spec), "--dry-run", "--workers", "2", "--quiet", "--db", str(db)]) == 0
    assert main(["study", "preregister", str(spec), "--hypotheses", str(hypotheses), "--dry-run",
                 "--db", str(db)]) == 2
    assert "not amended" in capsys.readouterr().err
    store = SessionStore(db)
    participants_answer(store, spec)
    store.close()

    long_csv, md = tmp_path / "long.csv", tmp_path / "pre-report.md"
    name = "design-dry-run"
    assert main(["study", "report", name, "--db", str(db), "--criterion", "minimax", "--long-csv", str(long_csv),
                 "--preregistration-md", str(md), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    within = {m["measure"]: m for m in report["within"]["measures"]}
    assert set(within) == {"test_auc", "test_auc_gap", "test_sensitivity_dark", "q_fair_dark"}
    assert "MixedLM" in report["within"]["model_method"] and "Holm" in report["within"]["paired_method"]
    # the mixed-model table (the answers differ between participants; the unsteered outcomes may not)
    sure = within["q_fair_dark"]
    assert sure["model"]["fitted"] and sure["model"]["n_participants"] == 4 and sure["fallback"] is None
    for outcome in ("test_auc", "test_auc_gap", "test_sensitivity_dark"):
        m = within[outcome]
        assert m["model"]["fitted"] or "the paired analysis stands alone" in m["fallback"]
        assert len(m["paired"]) == 1 and m["paired"][0]["n"] == 4
    # the paired table, Holm-corrected
    pair = sure["paired"][0]
    assert (pair["a"], pair["b"], pair["n"]) == ("base", "fairness-methods", 4)
    assert pair["mean"] == pytest.approx(-1.75) and pair["p_holm"] == pytest.approx(pair["p_value"])
    assert "Holm" in pair["sentence"] and report["comparison_correction"].startswith("Holm")
    # the model's estimates per expertise group × level sit in the by-expertise table
    entry = next(e for e in report["people"]["by_expertise"] if e["group"] == "data scientist"
                 and e["level"] == "fairness-methods")
    assert entry["model"]["q_fair_dark"]["estimate"] == pytest.approx(4.5, abs=1e-4)

    # the preregistration, cited with its deviations
    assert report["preregistration"]["criterion"] == "validation" and not report["preregistration"]["late"]
    assert "another criterion: final choices by minimax, preregistered validation" in report["deviations"]
    text = md.read_text()
    assert "## Deviations" in text and "another criterion" in text and "H1: with fairness-methods" in text

    # the model against statsmodels run directly on the exported long CSV
    frame = pd.read_csv(long_csv)
    assert (long_csv.parent / "long.codebook.md").exists()
    answers = frame[(frame.measure == "q_fair_dark") & (frame.included == 1)]
    assert len(answers) == 8
    theirs = smf.mixedlm("value ~ C(level, Treatment('base')) * C(role, Treatment('dermatologist'))", answers,
                         groups="participant").fit(reml=True)
    ours = {e["term"]: e for e in sure["model"]["effects"]}
    level = "C(level, Treatment('base'))[T.fairness-methods]"
    role = "C(role, Treatment('dermatologist'))[T.data scientist]"
    pairs = {"intercept": "Intercept", "level fairness-methods (vs base)": level,
             "expertise data scientist (vs dermatologist)": role,
             "level fairness-methods × expertise data scientist": f"{level}:{role}"}
    for term, column in pairs.items():
        assert ours[term]["estimate"] == pytest.approx(theirs.fe_params[column], abs=1e-4)
        assert ours[term]["se"] == pytest.approx(theirs.bse_fe[column], rel=1e-3)

    # planning participants from this pilot: its unsteered sessions do not vary, and the plan says so
    assert main(["study", "plan", str(spec), "--effect", "0.05", "--from", name, "--db", str(db)]) == 0
    plan_text = capsys.readouterr().out
    assert "participants" in plan_text and "pilot with people, 4 participants" in plan_text
    assert ("no plan: the measured spread is zero" in plan_text) or "simulated power" in plan_text

    assert main(["study", "report", name, "--db", str(db), "--criterion", "minimax"]) == 0
    out = capsys.readouterr().out
    assert "within participant" in out and "mixed model (4 participants" in out and "Holm" in out
    assert "deviations (" in out and "another criterion" in out
    assert "sensitivity on dark skin (FST V–VI) at the operating point" in out and "dermatologist · base" in out
