"""A level is its instruction alone: what the agent is shown of befair's measurements and what the
search follows are settings, the same and fairness-neutral at every level by default, and the
prompt audit (engine.agent.prompt_audit, `befair prompts`) finds no word about skin tone, groups or
fairness that no setting and no person put there."""
from __future__ import annotations

import subprocess
import sys

import pytest

from engine.agent.commands import apply_command
from engine.agent.context import coder_context, node_view
from engine.agent.prompt_audit import FAIRNESS_WORDS, audit, example_state, stage_prompts
from engine.agent.session_config import SessionConfig
from engine.session import events as ev
from engine.session import feedback, selection
from engine.session.store import SessionStore
from engine.task import LEVELS
from tests.command_sink import WriterSink
from engine.coders.protocol import CoderBase

PREVIEW = "Data folder: ./input\n  columns: image_name, skin_tone, alternative_skin_tone, label"
PROTOCOLS = (("befair", None), ("be-fair", "claimed"))


def _config(level: str, protocol: str, best: str | None, **kw: object) -> SessionConfig:
    return SessionConfig(level=level, protocol=protocol, **({"best": best} if best else {}), **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize("protocol,best", PROTOCOLS)
@pytest.mark.parametrize("level", list(LEVELS))
def test_no_level_hears_of_skin_tone_beyond_its_instruction(level, protocol, best):
    prompts = stage_prompts(_config(level, protocol, best), PREVIEW)
    assert [p.stage for p in prompts] == ["draft", "improve", "debug", "review"]
    assert audit(prompts) == []


@pytest.mark.parametrize("level", list(LEVELS))
def test_the_scaffold_adds_no_word_of_skin_tone(level):
    prompts = stage_prompts(_config(level, "befair", None), PREVIEW, scaffold=True)
    assert "features(X)" in prompts[0].text   # the scaffold is there
    assert audit(prompts) == []


def test_the_defaults_are_the_same_and_neutral_at_every_level():
    for level in LEVELS:
        config = SessionConfig(level=level)
        assert (config.feedback, config.best) == ("auc", "validation")
    be_fair = SessionConfig(level="base", protocol="be-fair", best="claimed")
    assert be_fair.feedback == "none"


@pytest.mark.parametrize("protocol,best", PROTOCOLS)
def test_two_levels_differ_in_their_instruction_alone(protocol, best):
    base = stage_prompts(_config("base", protocol, best), PREVIEW)
    methods = stage_prompts(_config("fairness-methods", protocol, best), PREVIEW)
    for b, m in zip(base, methods, strict=True):
        changed = [(x, y) for x, y in zip(b.text.splitlines(), m.text.splitlines(), strict=True) if x != y]
        assert changed, b.stage
        for x, y in changed:
            assert x == LEVELS["base"] and y == LEVELS["fairness-methods"], (b.stage, x, y)


def test_turning_group_feedback_on_is_seen_by_the_audit():
    prompts = stage_prompts(_config("base", "befair", None, feedback="groups"), PREVIEW)
    findings = audit(prompts)
    assert {f.stage for f in findings} == {"draft", "improve"}   # the memory, and the parent's measured line
    assert {f.section for f in findings} == {"Memory", "Previous solution (node 1)"}


def test_the_expert_guidance_is_a_person_s_and_not_flagged():
    prompts = stage_prompts(_config("base", "befair", None), PREVIEW,
                            guidance=("It has to work as well on dark skin as on light skin.",))
    assert FAIRNESS_WORDS.search(prompts[0].text)   # it reached the agent
    assert audit(prompts) == []


def test_what_the_agent_is_handed_follows_the_feedback_setting():
    for shown, keys in (("none", None), ("auc", {"auc"}), ("groups", {"auc", "auc_gap", "group_auc", "worst_auc",
                                                                       "best_auc"})):
        state = example_state(SessionConfig(feedback=shown))
        view = node_view(state, state.nodes[1])
        assert (set(view.measured.to_payload()) if view.measured else None) == keys
        ctx, _ = coder_context(state, PREVIEW, 1)
        assert ctx.feedback == shown
        item = ctx.memory[0]
        assert (item.measured_auc is not None, item.measured_gap is not None) == (shown != "none", shown == "groups")


def test_sessions_recorded_before_the_setting_read_as_shown_every_figure():
    old = SessionConfig.from_dict({"level": "base", "best": "robust", "sandbox": "bwrap"})
    assert (old.feedback, old.best) == ("groups", "robust")


def test_be_fair_refuses_befair_s_measurements():
    with pytest.raises(ValueError, match="be-fair protocol"):
        SessionConfig(protocol="be-fair", best="claimed", feedback="auc")


def test_turning_feedback_on_live_is_a_recorded_steering_act(tmp_path):
    store = SessionStore(tmp_path / "befair.db")
    writer = store.create_session(SessionConfig().to_dict(), instruction="x", coder={"name": "offline"}, data={},
                                  session_id="s")
    sink = WriterSink(writer)
    for value, expected in (("groups", "groups"), ("loud", "groups"), ("groups", "groups"), ("none", "none")):
        cid = store.issue_command("s", "set_feedback", {"feedback": value}, by="dermatologist")
        apply_command(sink, store.command(cid))
        assert feedback.current_feedback(writer.state) == expected
    kinds = [e.kind for e in store.events("s") if e.kind in (ev.FEEDBACK_SET, ev.ERROR)]
    assert kinds == [ev.FEEDBACK_SET, ev.ERROR, ev.FEEDBACK_SET]
    first = next(e for e in store.events("s") if e.kind == ev.FEEDBACK_SET)
    assert first.payload["by"] == "dermatologist" and first.payload["command_id"] is not None
    assert selection.current_criterion(writer.state) == "validation"
    store.close()


def test_befair_prompts_audits_from_the_command_line():
    """`befair prompts --audit` on real (small, generated) data, for base under both protocols."""
    for protocol in ("befair", "be-fair"):
        done = subprocess.run([sys.executable, "-m", "befair_tui.cli", "prompts", "--level", "base", "--protocol",
                               protocol, "--audit", "--synth-n-train", "120", "--synth-n-test", "60",
                               "--synth-size", "24"], capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stdout + done.stderr
        assert "no word about skin tone" in done.stdout
    done = subprocess.run([sys.executable, "-m", "befair_tui.cli", "prompts", "--level", "base", "--feedback",
                           "groups", "--audit", "--synth-n-train", "120", "--synth-n-test", "60", "--synth-size", "24"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 1 and "improve · Memory: 'skin-tone'" in done.stdout, done.stdout
    done = subprocess.run([sys.executable, "-m", "befair_tui.cli", "prompts", "--stage", "draft", "--synth-n-train",
                           "120", "--synth-n-test", "60", "--synth-size", "24"], capture_output=True, text=True,
                          timeout=300)
    assert done.stdout.startswith("# example session, not a measurement"), done.stdout[:200]


class _Recording(CoderBase):
    """The offline coder, recording every context the runner hands it."""

    def __init__(self, coder):
        self.coder, self.contexts = coder, []
        self.name, self.label, self.simulated = coder.name, coder.label, coder.simulated

    def info(self):
        return self.coder.info()

    def __getattr__(self, name):
        return getattr(self.coder, name)

    def _recorded(self, stage, ctx, *args):
        self.contexts.append((stage, ctx))
        return getattr(self.coder, stage)(ctx, *args)

    def draft(self, ctx):
        return self._recorded("draft", ctx)

    def improve(self, ctx, parent):
        return self._recorded("improve", ctx, parent)

    def debug(self, ctx, parent):
        return self._recorded("debug", ctx, parent)

    def review(self, ctx, node):
        return self.coder.review(ctx, node)


def test_a_base_and_a_methods_session_differ_where_the_instruction_makes_them(tmp_path, workspace):
    """Two real sessions (same seed, offline coder, defaults): their settings differ in the level
    alone, and every context the agent got differs from the other's in the instruction and the level
    only until the simulated agent's own choices (which read the instruction) make the trees differ."""
    import dataclasses

    from engine.agent.runner import run
    from engine.agent.session_setup import start_session
    from engine.coders.offline import OfflineCoder

    got = {}
    for level in ("base", "fairness-methods"):
        store = SessionStore(tmp_path / f"{level}.db")
        config = SessionConfig(level=level, steps=2, seed=4, failure_rate=0.0, data=str(workspace.root),
                               step_timeout=120, extra={"device": "cpu"})
        coder = _Recording(OfflineCoder(failure_rate=0.0, seed=4, device="cpu", step_timeout=120))
        writer = start_session(store, config, workspace=workspace, coder=coder)
        state = run(store, writer.session_id, coder=coder, workspace=workspace, writer=writer)
        got[level] = (state, coder.contexts)
        store.close()
    (base, base_ctx), (methods, methods_ctx) = got["base"], got["fairness-methods"]
    differing = {k for k in base.config if base.config[k] != methods.config[k]}
    assert differing == {"level"}
    assert base.config["feedback"] == methods.config["feedback"] == "auc"
    assert base.config["best"] == methods.config["best"] == "validation"
    (stage_a, first_a), (stage_b, first_b) = base_ctx[0], methods_ctx[0]
    assert stage_a == stage_b == "draft"
    fields = {f.name for f in dataclasses.fields(first_a) if getattr(first_a, f.name) != getattr(first_b, f.name)}
    assert fields == {"instruction", "level"}
    for _, ctx in base_ctx + methods_ctx:
        for item in ctx.memory:
            assert item.measured_gap is None   # the default feedback shows no skin-tone figure


def test_every_surface_names_the_agent_settings():
    from engine.session import views

    state = example_state(SessionConfig(level="base"))
    assert views.settings_json(state) == {"feedback": "auc", "best": "validation", "scaffold": "unknown",
                                          "protocol": "befair"}
    assert views.settings_line(state).startswith("agent is shown: measured AUC · search and ★ follow: validation AUC")
    state.coder.update({"scaffold": True, "scaffold_wording": "2026-11-25"})
    assert "scaffold: on (wording 2026-11-25)" in views.settings_line(state)
    assert views.session_json(state)["agent_settings"]["scaffold"] == "on"
    from engine.study.session_report import summarise

    assert "Agent settings: agent is shown: measured AUC" in "\n".join(summarise(state).lines())
