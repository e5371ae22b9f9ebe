"""The setup screen validates what is typed (limits, whole numbers, clear messages), takes its
defaults from the one source `befair run` uses, remembers settings per database but never the
participant id or an API key, and gives a typed API key to that session's process only."""
from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

import pytest

from engine.agent.session_config import SessionConfig
from engine.data import synth

from befair_tui import launch
from befair_tui.app import create_app
from befair_tui.screens.setup import SetupScreen
from befair_tui.settings import LIMITS, SetupChoices, load_choices, parse_whole, settings_path

from .conftest import screen_text

KEY = "sk-typed-in-setup-0123456789"


def test_defaults_are_befair_runs_defaults():
    choices, config = SetupChoices(), SessionConfig()
    for field in ("level", "steps", "step_timeout", "coder", "best", "blind_test", "seed", "data"):
        assert getattr(choices, field) == getattr(config, field), field
    assert (choices.synth_n_train, choices.synth_n_test, choices.synth_size) == (
        synth.DEFAULTS["n_train"], synth.DEFAULTS["n_test"], synth.DEFAULTS["size"])
    assert choices.model == (config.model or "") and choices.participant == ""
    # the defaults are inside their own limits
    for field, (low, high, _what) in LIMITS.items():
        assert low <= getattr(choices, field) <= high, field


def test_image_limits_are_the_generators(tmp_path):
    """The lowest counts and size the form accepts are the lowest the generator accepts."""
    low = {k: LIMITS[f"synth_{k}"][0] for k in ("n_train", "n_test", "size")}
    for name in low:
        below = {**low, name: low[name] - 1}
        with pytest.raises(ValueError):
            synth.generate(tmp_path / f"below-{name}", **below)
    assert LIMITS["synth_n_train"][1] == synth.FULL["n_train"] and LIMITS["synth_n_test"][1] == synth.FULL["n_test"]


@pytest.mark.parametrize("field,raw,message", [
    ("steps", "0", "from 1 to 500"), ("steps", "501", "from 1 to 500"), ("steps", "12.5", "whole number"),
    ("steps", "ten", "whole number"), ("step_timeout", "9", "from 10 to"), ("step_timeout", "60.5", "no decimals"),
    ("synth_n_train", "20", "from 21 to 16,577"), ("synth_n_test", "17", "from 18 to 656"),
    ("synth_n_test", "657", "from 18 to 656"), ("synth_size", "15", "from 16 to 512"), ("seed", "-1", "from 0"),
])
def test_limits_say_what_is_allowed(field, raw, message):
    with pytest.raises(ValueError, match=message):
        parse_whole(raw, field)


def test_remembered_values_outside_the_limits_are_not_restored(tmp_path):
    path = tmp_path / "befair.settings.json"
    path.write_text(json.dumps({"steps": 9999, "step_timeout": 1, "synth_size": "big", "seed": 7,
                                "participant": "P01", "blind_test": True, "level": "nonsense"}))
    choices = load_choices(path)
    assert choices.steps == SessionConfig().steps and choices.step_timeout == SessionConfig().step_timeout
    assert choices.synth_size == synth.DEFAULTS["size"] and choices.level == SessionConfig().level
    assert choices.seed == 7 and choices.blind_test is True and choices.participant == ""


async def test_setup_shows_each_problem_and_starts_nothing(db, monkeypatch):
    started = []
    monkeypatch.setattr("befair_tui.app.BefairApp.start_session",
                        lambda self, c, secrets=None: started.append(c))
    app = create_app(db)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = app.screen
        assert isinstance(screen, SetupScreen)
        values = {"#steps": "600", "#step-timeout": "5", "#synth-n-train": "10", "#synth-size": "3.5",
                  "#seed": "x"}
        for wid, value in values.items():
            screen.query_one(wid).value = value
        await pilot.pause()
        await pilot.press("ctrl+s")
        await pilot.pause()
        assert not started
        shown = str(screen.query_one("#setup-problems").render())
        for words in ("step budget must be from 1 to 500", "time limit per step (seconds) must be from 10",
                      "training images must be from 21", "image size (pixels) must be a whole number",
                      "seed must be a whole number"):
            assert words in shown, words
        for wid, value in {"#steps": "7", "#step-timeout": "60", "#synth-n-train": "100", "#synth-size": "32",
                           "#seed": "3"}.items():
            screen.query_one(wid).value = value
        await pilot.pause()
        assert not screen.query_one("#setup-problems").display  # fixed: the messages go away
        await pilot.press("ctrl+s")
        await pilot.pause()
        (choices,) = started
        assert (choices.steps, choices.step_timeout, choices.synth_n_train, choices.synth_size, choices.seed) == (
            7, 60.0, 100, 32, 3)


async def test_settings_are_per_database_and_forget_the_participant(tmp_path, monkeypatch):
    monkeypatch.setattr("befair_tui.app.BefairApp.start_session", lambda self, c, secrets=None: None)
    study, personal = tmp_path / "study" / "befair.db", tmp_path / "mine" / "befair.db"
    app = create_app(study)
    async with app.run_test(size=(100, 40)) as pilot:
        app.screen.query_one("#blind").value = True
        app.screen.query_one("#participant").value = "P07"
        app.screen.query_one("#steps").value = "9"
        await pilot.pause()
        await pilot.press("ctrl+s")
        await pilot.pause()
    saved = json.loads(settings_path(study).read_text())
    assert settings_path(study).parent == study.parent
    assert saved["blind_test"] is True and saved["steps"] == 9 and "participant" not in saved
    app = create_app(study)  # the next person on the same study database
    async with app.run_test(size=(100, 40)) as pilot:
        await pilot.pause()
        assert app.screen.query_one("#participant").value == ""
        assert app.screen.query_one("#blind").value is True and app.screen.query_one("#steps").value == "9"
    app = create_app(personal)  # another database: none of the study's settings
    async with app.run_test(size=(100, 40)) as pilot:
        await pilot.pause()
        assert app.screen.query_one("#blind").value is False
        assert app.screen.query_one("#steps").value == str(SessionConfig().steps)


async def test_openai_fields_and_a_key_for_this_session_only(db, tmp_path, monkeypatch):
    calls = []

    def fake_start(choices, db_path, env=None):
        calls.append((choices, dict(env or {})))
        raise OSError("not starting anything in this test")

    monkeypatch.setattr(launch, "start_session", fake_start)
    app = create_app(db)
    async with app.run_test(size=(100, 40)) as pilot:
        screen = app.screen
        screen.query_one("#coder-openai").value = True
        await pilot.pause()
        assert "Not configured" in str(screen.query_one("#coder-note").render())  # no key, no server yet
        assert screen.query_one("#api-key").password
        screen.query_one("#base-url").value = "localhost:11434/v1"
        screen.query_one("#model").value = "qwen2.5-coder"
        await pilot.pause()
        await pilot.press("ctrl+s")
        await pilot.pause()
        assert not calls and "must start with http" in str(screen.query_one("#setup-problems").render())
        screen.query_one("#base-url").value = "http://localhost:11434/v1"
        screen.query_one("#api-key").value = KEY
        await pilot.pause()
        assert "Not configured" not in str(screen.query_one("#coder-note").render())
        await pilot.press("ctrl+s")
        await pilot.pause()
        assert "Cannot start" in screen_text(app) or calls
    (choices, env), = calls
    assert env["OPENAI_API_KEY"] == KEY
    config = choices.session_config()     # the session the setup starts: built from the options' table
    assert KEY not in json.dumps(config.to_dict())
    assert config.extra["llm"]["base_url"] == "http://localhost:11434/v1"
    assert config.model == "qwen2.5-coder"
    text = settings_path(db).read_text()
    assert KEY not in text and "api_key" not in text
    assert json.loads(text)["base_url"] == "http://localhost:11434/v1"
    assert KEY not in repr(dataclasses.asdict(choices))


def test_the_typed_key_reaches_the_child_environment_not_its_command_line(tmp_path, monkeypatch):
    from .test_launch_secrets import _probe, _read

    script, out = _probe(tmp_path, monkeypatch)
    monkeypatch.setattr(sys, "executable", str(script))
    choices = SetupChoices(coder="openai", model="m", base_url="http://localhost:1/v1")
    _sid, proc = launch.start_session(choices, tmp_path / "befair.db", env=launch.key_env(KEY))
    proc.wait(timeout=30)
    seen = _read(out)
    assert seen["key"] == KEY and not any(KEY in part for part in seen["cmdline"])
    request = Path(seen["cmdline"][seen["cmdline"].index("--request") + 1])   # the settings: a file, no flags
    assert KEY not in request.read_text()
    assert json.loads(request.read_text())["config"]["extra"]["llm"]["base_url"] == "http://localhost:1/v1"


async def test_choosing_the_openai_coder_checks_the_server(db, monkeypatch):
    """`befair llm check` on the setup screen: the server's models, its speed and the settings to
    use, for the address filled in (again with Check server)."""
    from tests.fakes.chat_server import AutoResponder, FakeChatServer

    from .conftest import wait_for

    with FakeChatServer(default=AutoResponder()) as srv:
        monkeypatch.setenv("OPENAI_BASE_URL", srv.base_url)
        monkeypatch.setenv("BEFAIR_LLM_MODEL", "fake-model")
        app = create_app(db)
        async with app.run_test(size=(100, 50)) as pilot:
            screen = app.screen
            screen.query_one("#coder-openai").value = True
            check = screen.query_one("#llm-check")
            await wait_for(pilot, lambda: "writing" in str(check.render()), what="the server check")
            text = str(check.render())
            assert "models   fake-model" in text and "--max-tokens" in text
            screen.query_one("#base-url").value = "http://127.0.0.1:9/v1"
            await pilot.click("#llm-check-button")
            await wait_for(pilot, lambda: "FAILED" in str(check.render()), what="the failed check")


async def test_the_check_turns_the_scaffold_on_for_a_small_model_once(db, monkeypatch):
    """A server whose model has under 7B parameters: the check ticks the scaffold (and says so), the
    session would start with --scaffold on, and a person who unticks it keeps it off."""
    from tests.fakes.chat_server import AutoResponder, FakeChatServer

    from .conftest import wait_for

    with FakeChatServer(default=AutoResponder(), meta={"n_params": 1_777_088_000}) as srv:
        monkeypatch.setenv("OPENAI_BASE_URL", srv.base_url)
        monkeypatch.setenv("BEFAIR_LLM_MODEL", "fake-model")
        app = create_app(db)
        async with app.run_test(size=(100, 50)) as pilot:
            screen = app.screen
            box = screen.query_one("#scaffold")
            assert box.value is False
            screen.query_one("#coder-openai").value = True
            check = screen.query_one("#llm-check")
            await wait_for(pilot, lambda: "scaffold turned on" in str(check.render()), what="the advice")
            assert box.value is True and "1.8B parameters" in str(check.render())
            choices = screen.read_choices()
            assert choices.option_values()["scaffold"] == "on"
            assert choices.session_config().extra["llm"]["scaffold"] == "on"
            box.value = False
            await pilot.click("#llm-check-button")
            await wait_for(pilot, lambda: "writing" in str(check.render()) and "scaffold turned on" not in
                           str(check.render()), what="the second check")
            assert box.value is False and screen.read_choices().option_values()["scaffold"] is None
