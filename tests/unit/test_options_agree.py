"""Each session option is declared once (engine.agent.settings.OPTIONS), and `befair run --help`,
SessionConfig, the setup screen's choices and a study spec offer it with the same name, default,
choices and section, read from that one declaration (issue 35).

The last test changes a declaration (a default, a help text, a spec key) before anything reads the
table and sees the change in all of them."""
from __future__ import annotations

import argparse
import dataclasses
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from engine.agent.coder_registry import CODERS
from engine.agent.session_config import SessionConfig
from engine.agent.settings import OPTIONS, SECTIONS, at_setup, spec_keys
from engine.study import spec as study_spec

from befair_tui.cli import build_parser
from befair_tui.settings import SetupChoices

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


CHANGED = """
import dataclasses, json
from engine.agent import settings
settings.OPTIONS["steps"] = dataclasses.replace(settings.OPTIONS["steps"], default=33, help="CHANGED HELP",
                                                 spec="budget")
import argparse
from engine.agent.coder_registry import CODERS
from engine.agent.session_config import SessionConfig
from engine.study.spec import parse_spec
from befair_tui.cli import build_parser
from befair_tui.settings import SetupChoices
sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
run = sub.choices["run"]
spec = parse_spec({"name": "x", "levels": ["base"], "budget": 5})
help = " ".join(run.format_help().split())
print(json.dumps({"cli": run.parse_args([]).steps, "help": "--steps STEPS CHANGED HELP (default: 33)" in help,
                  "config": SessionConfig().steps, "setup": SetupChoices().steps, "spec": spec.steps,
                  "spec_default": parse_spec({"name": "x", "levels": ["base"]}).steps}))
"""


def test_a_declaration_changed_once_shows_everywhere():
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(CHANGED)], capture_output=True, text=True,
                         cwd=ROOT, timeout=120, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == {"cli": 33, "help": True, "config": 33, "setup": 33, "spec": 5,
                                      "spec_default": 33}
