import pytest

from engine.agent.session_config import SessionConfig
from engine.task import CUSTOM, LEVELS, METRIC_LINE, fitzpatrick_to_group, instruction_text


def test_levels_nest_and_match_the_study_verbatim():
    base = LEVELS["base"]
    assert base.startswith("I'm a dermatologist.") and base.endswith("probability (0–1) for each image.")
    assert LEVELS["fairness-hint"] == base + " Be fair towards skin tone."
    assert LEVELS["fairness-metric"].startswith(LEVELS["fairness-hint"] + " The AUROC gap between light and dark skin")
    assert LEVELS["fairness-methods"].startswith(LEVELS["fairness-metric"] + " To improve fairness across skin tones")
    assert LEVELS["fairness-methods"].endswith("or any other appropriate methods.")
    assert METRIC_LINE == "Area under the receiver operator curve (AUROC)"


def test_aide_example_goal_equals_base_level(shared_data):
    text = (shared_data / "aide_journal_example" / "config.yaml").read_text()
    goal = " ".join(line.strip() for line in text.split("goal:", 1)[1].split("\neval:")[0].splitlines())
    assert goal.strip() == LEVELS["base"]


def test_custom_level_is_verbatim_and_required():
    assert instruction_text(CUSTOM, "  exact text ") == "  exact text "
    with pytest.raises(ValueError):
        instruction_text(CUSTOM, "")
    with pytest.raises(ValueError, match="unknown instruction level"):
        SessionConfig(level="fair")


def test_fitzpatrick_groups():
    assert [fitzpatrick_to_group(t) for t in (1, 2, 3, 4, 5, 6)] == ["group_0"] * 2 + ["group_1"] * 2 + ["group_2"] * 2
    assert fitzpatrick_to_group(-1) is None
