"""engine.study.spec: the study spec (TOML) and its grid of sessions."""
from __future__ import annotations

from pathlib import Path

import pytest

from engine.study.spec import SpecError, load_spec, parse_spec
from engine.task import CUSTOM, LEVELS

ROOT = Path(__file__).resolve().parents[2]

# The minimal spec, verbatim: it must be valid as written.
MINIMAL = '''
name = "levels-demo"
levels = ["base", "fairness-methods"]
repeats = 2
steps = 3
seed = 1          # repeat r runs with seed + r

[coder]
name = "offline"

[data]
synth = { n_train = 300, n_test = 120, size = 32 }
'''


def _spec(tmp_path, text):
    path = tmp_path / "study.toml"
    path.write_text(text)
    return load_spec(path)


def test_the_minimal_spec_is_valid_and_makes_its_grid(tmp_path):
    spec = _spec(tmp_path, MINIMAL)
    cells = spec.cells()
    assert [(c.level.label, c.repeat, c.seed) for c in cells] == [
        ("base", 0, 1), ("base", 1, 2), ("fairness-methods", 0, 1), ("fairness-methods", 1, 2)]
    assert [c.session_id for c in cells] == ["levels-demo-base-r0", "levels-demo-base-r1",
                                             "levels-demo-fairness-methods-r0", "levels-demo-fairness-methods-r1"]
    config = spec.session_config(cells[3])
    assert (config.level, config.steps, config.seed, config.coder) == ("fairness-methods", 3, 2, "offline")
    assert (config.study_id, config.repeat_index, config.participant_id) == ("levels-demo", 1, None)
    assert config.extra["synth"] == {"n_train": 300, "n_test": 120, "size": 32}
    assert config.data == "synth" and config.best == "validation" and config.sandbox == "bwrap"
    assert len(spec.digest) == 64 and spec.digest == _spec(tmp_path, MINIMAL).digest


def test_shipped_examples_are_valid():
    for path in sorted((ROOT / "examples" / "studies").glob("*.toml")):
        spec = load_spec(path)
        assert spec.cells(), path


def test_every_key(tmp_path):
    spec = _spec(tmp_path, '''
name = "full.study_1"
levels = ["base", {label = "mine", text = "Build a fair classifier."}]
repeats = 3
seeds = [5, 9, 11]
steps = 4
best = "minimax"
blind_test = true
step_timeout = 120
eval_timeout = 60
memory_limit_mb = 4096
sandbox = "none"
participants = ["p01", "p02"]

[search]
num_drafts = 2

[[coders]]
name = "offline"
failure_rate = 0.0

[[coders]]
name = "openai"
model = "gpt-4o-mini"
base_url = "http://localhost:8000/v1"
budget_usd = 2.5

[data]
workspace = "some/workspace"

[resources]
num_cpus = 2
num_gpus = 0.5
''')
    cells = spec.cells()
    assert len(cells) == 2 * 2 * 2 * 3
    last = cells[-1]
    assert (last.coder.label, last.participant, last.level.label, last.repeat, last.seed) == \
        ("gpt-4o-mini", "p02", "mine", 2, 11)
    assert last.session_id == "full.study_1-gpt-4o-mini-p02-mine-r2"
    config = spec.session_config(last)
    assert config.level == CUSTOM and config.custom_text == "Build a fair classifier."
    assert config.extra["llm"] == {"base_url": "http://localhost:8000/v1", "budget_usd": 2.5}
    assert (config.best, config.blind_test, config.step_timeout, config.eval_timeout, config.memory_limit_mb,
            config.sandbox, config.num_drafts) == ("minimax", True, 120.0, 60.0, 4096, "none", 2)
    assert config.data.endswith("some/workspace") and Path(config.data).is_absolute()
    assert spec.session_config(cells[0]).failure_rate == 0.0
    assert spec.resources == {"num_cpus": 2.0, "num_gpus": 0.5}


@pytest.mark.parametrize("text, message", [
    ('levels = ["base"]', "name must be"),
    ('name = "a b"\nlevels = ["base"]', "name must be"),
    ('name = "x"', "levels must be"),
    ('name = "x"\nlevels = ["fairest"]', "unknown level 'fairest'"),
    ('name = "x"\nlevels = ["base", "base"]', "level labels repeat"),
    ('name = "x"\nlevels = [{label = "a"}]', "custom level is"),
    ('name = "x"\nlevels = ["base"]\nrepeats = 0', "repeats must be at least 1"),
    ('name = "x"\nlevels = ["base"]\nrepeats = 2\nseeds = [1]', "one seed per repeat"),
    ('name = "x"\nlevels = ["base"]\nseed = 1\nseeds = [1]', "seed or seeds"),
    ('name = "x"\nlevels = ["base"]\nsteps = "3"', "steps must be a whole number"),
    ('name = "x"\nlevels = ["base"]\nbest = "fastest"', "best must be one of"),
    ('name = "x"\nlevels = ["base"]\nrepeat = 2', "unknown key(s) repeat"),
    ('name = "x"\nlevels = ["base"]\n[coder]\nname = "claude"', "coder name must be"),
    ('name = "x"\nlevels = ["base"]\n[coder]\nname = "openai"', "needs its model"),
    ('name = "x"\nlevels = ["base"]\n[coder]\nname = "openai"\nmodel = "m"\napi_key = "sk"', "never put an API key"),
    ('name = "x"\nlevels = ["base"]\n[coder]\nname = "offline"\nbase_url = "u"', "unknown coder key(s) base_url"),
    ('name = "x"\nlevels = ["base"]\n[data]\nsynth = { n_train = 0 }', "data.synth.n_train must be at least 1"),
    ('name = "x"\nlevels = ["base"]\n[data]\nfolder = "x"', "[data] takes"),
    ('name = "x"\nlevels = ["base"]\n[search]\ndebug_prob = 2.0', "debug_prob"),
    ('name = "x"\nlevels = ["base"]\nparticipants = ["a", "a"]', "participant ids repeat"),
    ('name = "x"\nlevels = ["base"]\n[resources]\ngpus = 1', "[resources] takes"),
    ('name = "x"\nlevels = ["base"', "not valid TOML"),
])
def test_bad_specs_name_the_problem(tmp_path, text, message):
    with pytest.raises(SpecError) as err:
        _spec(tmp_path, text)
    assert message in str(err.value)
    assert err.value.exit_code == 3


def test_a_missing_spec_file(tmp_path):
    with pytest.raises(SpecError, match="no study spec at"):
        load_spec(tmp_path / "nope.toml")


def test_all_four_levels_and_the_default_coder():
    spec = parse_spec({"name": "four", "levels": list(LEVELS), "repeats": 3})
    assert [c.coder.label for c in spec.cells()] == ["offline"] * 12
    assert spec.seeds == [0, 1, 2]


def test_the_agent_settings_are_keys_and_a_study_can_vary_them():
    spec = parse_spec({"name": "arms", "levels": ["base", "fairness-methods"], "feedback": ["auc", "groups"],
                       "best": "robust", "steps": 2})
    labels = [lv.label for lv in spec.levels]
    assert labels == ["base.feedback-auc", "base.feedback-groups", "fairness-methods.feedback-auc",
                      "fairness-methods.feedback-groups"]
    configs = {c.session_id: spec.session_config(c) for c in spec.cells()}
    assert {(k, c.level, c.feedback, c.best) for k, c in configs.items()} == {
        ("arms-base.feedback-auc-r0", "base", "auc", "robust"),
        ("arms-base.feedback-groups-r0", "base", "groups", "robust"),
        ("arms-fairness-methods.feedback-auc-r0", "fairness-methods", "auc", "robust"),
        ("arms-fairness-methods.feedback-groups-r0", "fairness-methods", "groups", "robust")}
    plain = parse_spec({"name": "plain", "levels": ["base"]})
    assert [(plain.session_config(c).feedback, plain.session_config(c).best) for c in plain.cells()] == [
        ("auc", "validation")]
    with pytest.raises(SpecError, match="feedback must be one of none, auc, groups"):
        parse_spec({"name": "bad", "levels": ["base"], "feedback": "loud"})
