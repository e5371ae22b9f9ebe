"""The coder registry: each kind declares its name, label, simulated flag and options."""
from __future__ import annotations

import argparse
import dataclasses

import pytest

from engine.agent.coder_registry import CODERS, coder_info, make_coder
from engine.agent.session_config import SessionConfig
from engine.coders.llm.config import LlmConfig, add_cli_arguments
from engine.options import Option
from engine.errors import BefairError


def test_every_kind_declares_itself():
    assert list(CODERS) == ["offline", "openai"]
    for name, kind in CODERS.items():
        assert kind.name == name and kind.label and kind.help
        assert isinstance(kind.simulated, bool)
        assert kind.OPTIONS and all(isinstance(o, Option) and o.help for o in kind.OPTIONS)
        assert len({o.name for o in kind.OPTIONS}) == len(kind.OPTIONS)
    assert CODERS["offline"].simulated and not CODERS["openai"].simulated


def test_declared_defaults_are_the_settings_defaults():
    llm = LlmConfig()
    for option in CODERS["openai"].OPTIONS:
        if option.name != "llm_config":          # the config file's path, not a setting in it
            assert getattr(llm, option.name) == option.default, option.name
    fields = SessionConfig.__dataclass_fields__
    for option in CODERS["offline"].OPTIONS:
        if option.name != "device":              # kept in SessionConfig.extra
            assert fields[option.name].default == option.default, option.name


def test_the_llm_flags_come_from_the_options_table():
    parser = argparse.ArgumentParser()
    add_cli_arguments(parser)
    flags = {a.option_strings[0]: a for a in parser._actions if a.option_strings}
    for option in CODERS["openai"].OPTIONS:
        action = flags[option.flag]
        assert action.dest == option.cli_dest and action.type is option.type and action.default is None


def test_make_coder_builds_the_kind_named():
    coder = make_coder(SessionConfig(coder="offline", seed=3, failure_rate=0.0, extra={"device": "cpu"}))
    assert (coder.name, coder.simulated) == ("offline", True)
    assert coder_info(coder) == coder.info()
    with pytest.raises(BefairError, match="unknown coder 'other'; use offline or openai"):
        make_coder(dataclasses.replace(SessionConfig(), coder="other"))


def test_a_coder_from_elsewhere_is_described_by_its_attributes():
    class Custom:
        name, label, simulated = "mine", "my coder", True

    assert coder_info(Custom()) == {"name": "mine", "label": "my coder", "simulated": True, "model": None}
    assert coder_info(object())["name"] == "custom"
