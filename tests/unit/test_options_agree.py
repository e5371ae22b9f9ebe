"""Each session option is declared once (a SessionConfig or LlmConfig field, or an Option of its own,
gathered in engine.agent.settings.OPTIONS), and `befair run --help`, SessionConfig, the setup screen's
choices and a study spec offer it with the same name, default, choices and section, read from that one
declaration (issue 35).

The last test edits the declarations in a copy of the source (a default, a help text, a spec key, a
setup range) and sees the change in all of them."""
from __future__ import annotations

import argparse
import dataclasses
import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from engine.agent.coder_registry import CODERS
from engine.agent.session_config import SessionConfig
from engine.agent.settings import OPTIONS, SECTIONS, at_setup, spec_keys
from engine.coders.llm.config import LLM_OPTIONS, LlmConfig
from engine.options import declared
from engine.study import spec as study_spec

from befair_tui.cli import build_parser
from befair_tui.settings import LIMITS, SetupChoices

ROOT = Path(__file__).resolve().parents[2]
NOT_OPTIONS = {"help", "db"}     # argparse's own, and the database every command takes (engine.paths)


def _run_parser() -> argparse.ArgumentParser:
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices["run"]


def test_every_flag_of_run_is_a_declared_option_with_its_default_choices_and_section():
    run = _run_parser()
    actions = {a.dest: a for a in run._actions if a.dest not in NOT_OPTIONS}
    flagged = {dest: o for dest, o in OPTIONS.items() if o.flag}
    assert set(actions) == set(flagged)
    assert actions["coder"].choices == list(CODERS)   # the kinds of the registry
    titles = {a.dest: g.title for g in run._action_groups for a in g._group_actions}
    for dest, option in flagged.items():
        action = actions[dest]
        assert action.option_strings == [option.flag], dest
        assert action.default == option.cli_default, dest
        assert action.choices == (list(option.allowed()) if option.allowed() is not None else None), dest
        if not option.action:
            assert action.type is option.type, dest
        assert titles[dest] == SECTIONS[option.section], dest
        assert option.help, dest


def test_help_lists_the_sections_in_order_each_flag_under_its_own():
    text = _run_parser().format_help()
    starts = [text.index(f"\n{title}:\n") for title in SECTIONS.values()]
    assert starts == sorted(starts)
    bounds = dict(zip(SECTIONS, [*starts[1:], len(text)], strict=True))
    for option in OPTIONS.values():
        if option.flag:
            start = text.index(f"\n{SECTIONS[option.section]}:\n")
            assert f"  {option.flag}" in text[start:bounds[option.section]], option.flag


def test_the_stored_options_are_session_config_fields_with_their_defaults():
    fields = {f.name: f for f in dataclasses.fields(SessionConfig) if f.name != "extra"}
    stored = {o.name: o for o in OPTIONS.values() if o.stored == "field"}
    assert set(fields) == set(stored)
    resolved = {"model": None,        # the LLM config's model unless one is given
                "sandbox": "bwrap"}   # "auto" asks for bwrap, and refuses where it cannot run
    for name, option in stored.items():
        assert fields[name].default == resolved.get(name, option.default), name
    names = [o.cli_dest for o in OPTIONS.values()]
    assert len(names) == len(set(names))
    assert all(o.section in SECTIONS for o in OPTIONS.values())


def test_a_study_spec_takes_the_declared_keys_and_defaults():
    keys = spec_keys()
    assert study_spec.TOP_KEYS == study_spec.STUDY_KEYS | {k.split(".")[0] for k in keys}
    assert study_spec.SEARCH_KEYS == {k.removeprefix("search.") for k in keys if k.startswith("search.")}
    assert study_spec.SYNTH_KEYS == {k.removeprefix("data.synth.") for k in keys if k.startswith("data.synth.")}
    # a spec that gives every flat and [search] key its declared default runs the default session
    given = {k: o.default for k, o in keys.items() if "." not in k and o.default is not None and k != "data"}
    # sandbox "none": only configurations are compared (nothing runs), and "auto" would probe bwrap here
    given.update(step_timeout=600.0, sandbox="none")
    search = {k.removeprefix("search."): o.default for k, o in keys.items()
              if k.startswith("search.") and o.default is not None}
    raw = {"name": "defaults", "levels": ["base"], **given, "search": search}
    spec = study_spec.parse_spec(raw)
    config = spec.session_config(spec.cells()[0])
    cli = SessionConfig.from_options(vars(_run_parser().parse_args(["--sandbox", "none"])))
    for key, option in keys.items():
        if option.stored == "field":
            assert getattr(config, option.name) == getattr(cli, option.name), key
    with pytest.raises(study_spec.SpecError, match=r"unknown key\(s\) headless"):
        study_spec.parse_spec({"name": "x", "levels": ["base"], "headless": True})


def test_the_setup_screen_offers_the_at_setup_options_with_their_defaults():
    fields = {f.name for f in dataclasses.fields(SetupChoices)}
    assert fields == (set(at_setup()) - {"api_key"}) | {"workspace"}   # the key is typed, never kept
    # the session the setup's defaults start is `befair run`'s without a flag (sandbox "none": configurations
    # only, nothing runs)
    setup = SessionConfig.from_options({**SetupChoices().option_values(), "sandbox": "none"})
    cli = SessionConfig.from_options(vars(_run_parser().parse_args(["--sandbox", "none"])))
    assert {**setup.to_dict(), "extra": {}} == {**cli.to_dict(), "extra": {}}
    sizes = {o.name.removeprefix("synth_"): o.default for o in OPTIONS.values()
             if o.stored == "extra.synth" and o.at_setup}
    assert setup.extra == {"synth": sizes} and cli.extra == {"synth": {}}


def test_the_llm_options_are_llm_config_fields_with_their_defaults():
    config = LlmConfig()
    fields = [o.name for o in declared(LlmConfig)]
    assert [o.name for o in LLM_OPTIONS] == [*fields, "llm_config"]   # the config file's path is no field
    for name in fields:
        assert getattr(config, name) == next(o.default for o in LLM_OPTIONS if o.name == name), name
    assert all(OPTIONS[o.cli_dest] is o for o in LLM_OPTIONS)


def test_the_setup_limits_are_the_declared_bounds():
    assert LIMITS == {dest: (*o.bounds, o.what) for dest, o in at_setup().items() if o.bounds}
    assert set(LIMITS) == {"steps", "step_timeout", "seed", "synth_n_train", "synth_n_test", "synth_size"}
    for dest, (low, _high, _what) in LIMITS.items():
        option = OPTIONS[dest]
        assert option.check is None or option.check[0](low), dest   # the setup's range keeps the flag's rule


# SessionConfig's stored form, as recorded before its fields became the declarations (byte for byte:
# the same inputs give the same session_started payload, and old databases load)
RECORDED_ARGV = ["--level", "custom", "--custom-text", "hi", "--steps", "7", "--seed", "3", "--model", "gpt-x",
                 "--base-url", "http://a", "--llm-timeout", "9", "--budget", "2.5", "--scaffold", "on",
                 "--llm-seed", "4", "--synth-size", "40", "--device", "cpu", "--participant", "p1", "--study", "s",
                 "--repeat", "2", "--memory-limit", "100", "--eval-timeout", "5", "--best", "minimax",
                 "--feedback", "groups", "--operating-point", "probability:0.3", "--num-drafts", "2",
                 "--policy", "aide", "--debug-prob", "0.2", "--blind-test", "--sandbox", "none"]
RECORDED_GIVEN = (
    '{"level": "custom", "custom_text": "hi", "steps": 7, "step_timeout": 600.0, "time_limit_s": null, '
    '"eval_timeout": 5.0, "memory_limit_mb": 100, "output_cap": 200000, "best": "minimax", '
    '"feedback": "groups", "blind_test": true, "operating_point": "probability:0.30", '
    '"coder": "offline", "model": "gpt-x", "seed": 3, "num_drafts": 2, "policy": "aide", '
    '"debug_prob": 0.2, "max_debug_depth": 3, "failure_rate": 0.15, "data": "synth", "sandbox": "none", '
    '"protocol": "befair", "participant_id": "p1", "study_id": "s", "repeat_index": 2, '
    '"extra": {"llm": {"base_url": "http://a", "timeout": 9.0, "scaffold": "on", "seed": 4, '
    '"budget_usd": 2.5}, "synth": {"size": 40}, "device": "cpu"}}')
RECORDED_DEFAULT = (
    '{"level": "base", "custom_text": null, "steps": 20, "step_timeout": 600.0, "time_limit_s": null, '
    '"eval_timeout": null, "memory_limit_mb": 8192, "output_cap": 200000, "best": "validation", '
    '"feedback": "auc", "blind_test": false, "operating_point": "sensitivity:0.90", "coder": "offline", '
    '"model": null, "seed": 0, "num_drafts": null, "policy": "befair", "debug_prob": 0.5, '
    '"max_debug_depth": 3, "failure_rate": 0.15, "data": "synth", "sandbox": "bwrap", '
    '"protocol": "befair", "participant_id": null, "study_id": null, "repeat_index": null, "extra": {}}')


@pytest.mark.parametrize(("argv", "recorded"), [(RECORDED_ARGV, RECORDED_GIVEN), ([], RECORDED_DEFAULT)])
def test_a_session_config_is_recorded_as_before(argv, recorded):
    config = SessionConfig() if not argv else SessionConfig.from_options(vars(_run_parser().parse_args(argv)))
    assert json.dumps(config.to_dict()) == recorded
    assert SessionConfig.from_dict(json.loads(recorded)) == config


# the declarations, edited in a copy of the source: a default, a help text and a spec key of a session
# field, an LLM setting's default, a setup range
EDITS = {
    "engine/agent/session_config.py": [('steps: int = setting(20, "step budget: nodes the search may create"',
                                        'steps: int = setting(33, "CHANGED HELP"'),
                                       ('spec="steps", check=AT_LEAST_1, bounds=(1, 500)',
                                        'spec="budget", check=AT_LEAST_1, bounds=(1, 400)')],
    "engine/coders/llm/config.py": [('temperature: float = _llm(0.5,', 'temperature: float = _llm(0.7,')],
}
CHANGED = """
import argparse, json
from engine.agent.session_config import SessionConfig
from engine.coders.llm.config import LlmConfig
from engine.study.spec import parse_spec
from befair_tui.cli import build_parser
from befair_tui.settings import LIMITS, SetupChoices
sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
run = sub.choices["run"]
spec = parse_spec({"name": "x", "levels": ["base"], "budget": 5})
help = " ".join(run.format_help().split())
print(json.dumps({"cli": run.parse_args([]).steps, "help": "--steps STEPS CHANGED HELP (default: 33)" in help,
                  "config": SessionConfig().steps, "setup": SetupChoices().steps, "spec": spec.steps,
                  "spec_default": parse_spec({"name": "x", "levels": ["base"]}).steps,
                  "setup_range": LIMITS["steps"][:2], "llm": LlmConfig().temperature}))
"""


def test_a_declaration_changed_once_shows_everywhere(tmp_path):
    for top in ("engine", "befair_tui", "baselines"):
        shutil.copytree(ROOT / top, tmp_path / top, ignore=shutil.ignore_patterns("__pycache__"))
    for name, edits in EDITS.items():
        text = (tmp_path / name).read_text(encoding="utf-8")
        for old, new in edits:
            assert text.count(old) == 1, old
            text = text.replace(old, new)
        (tmp_path / name).write_text(text, encoding="utf-8")
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(CHANGED)], capture_output=True, text=True,
                         cwd=tmp_path, timeout=120, env={"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == {"cli": 33, "help": True, "config": 33, "setup": 33, "spec": 5,
                                      "spec_default": 33, "setup_range": [1, 400], "llm": 0.7}
