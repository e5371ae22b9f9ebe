"""The coder registry: each kind of coder a session can name, as an adapter that declares itself.

    coder = make_coder(session_config)             # the kind config.coder names, built
    CODERS["openai"].OPTIONS                       # its settings (engine.options.Option): name, type, default,
                                                   # help, flag; declared once, in engine.agent.settings' table
    coder_info(coder)                              # session_started's `coder` payload
    build_llm_coder(session_config, model=...)     # the LLM coder for a session's settings (its task
                                                   # protocol's LLM defaults under them)

An adapter (in the manner of Harlequin's HarlequinAdapter and its ADAPTER_OPTIONS) says what a
kind is called (`name`, the value of SessionConfig.coder and of `--coder`), how it is labelled,
whether it is a simulated agent, which settings it reads (`OPTIONS`), how to build one from a
session's settings and how to describe one it built. Adding a coder: write the Coder
(engine/coders/protocol.py, a package of its own in engine/coders/), then an adapter here, and list
it in CODERS. The coders never import this module or the search: what a session's settings mean
for a coder (SessionConfig, the task protocol's defaults) is read here, above them.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import replace
from typing import Any, ClassVar

from engine.agent.session_config import SessionConfig
from engine.agent.settings import OPTIONS as SETTINGS
from engine.agent.task_protocol import task_protocol
from engine.coders.llm.coder import LlmCoder
from engine.coders.llm.config import LLM_OPTIONS, LlmConfig
from engine.coders.offline import OfflineCoder
from engine.coders.protocol import Coder
from engine.errors import BefairError
from engine.options import Option

__all__ = ["CODERS", "CoderAdapter", "LlmCoderAdapter", "OfflineCoderAdapter", "build_llm_coder", "coder_info",
           "llm_config_for_session", "make_coder"]


class CoderAdapter(ABC):
    """One kind of coder: what it is called, what it reads, how it is built and described."""

    name: ClassVar[str]
    label: ClassVar[str]
    simulated: ClassVar[bool]
    help: ClassVar[str]
    OPTIONS: ClassVar[tuple[Option, ...]] = ()

    @classmethod
    @abstractmethod
    def build(cls, config: SessionConfig, **overrides: Any) -> Coder:
        """A coder for a session's settings; `overrides` (flags given now) win over them."""

    @classmethod
    @abstractmethod
    def describe(cls, coder: object) -> dict[str, Any] | None:
        """What a session records of `coder` when this kind built it; None when it did not."""


class OfflineCoderAdapter(CoderAdapter):
    name = "offline"
    label = "offline (simulated agent)"
    simulated = True
    help = "the built-in simulated agent"
    OPTIONS = tuple(SETTINGS[name] for name in ("failure_rate", "seed", "device", "step_timeout"))   # the session's

    @classmethod
    def build(cls, config: SessionConfig, **overrides: Any) -> Coder:

        return OfflineCoder(failure_rate=config.failure_rate, seed=config.seed,
                            device=config.extra.get("device"), step_timeout=config.step_timeout)

    @classmethod
    def describe(cls, coder: object) -> dict[str, Any] | None:

        return coder.info() if isinstance(coder, OfflineCoder) else None


class LlmCoderAdapter(CoderAdapter):
    name = "openai"
    label = "OpenAI-compatible model"
    simulated = False
    help = "any OpenAI-compatible server"
    OPTIONS = LLM_OPTIONS

    @classmethod
    def build(cls, config: SessionConfig, **overrides: Any) -> Coder:

        return build_llm_coder(config, **{k: v for k, v in overrides.items() if v is not None})

    @classmethod
    def describe(cls, coder: object) -> dict[str, Any] | None:

        return coder.describe() if isinstance(coder, LlmCoder) else None


CODERS: dict[str, type[CoderAdapter]] = {a.name: a for a in (OfflineCoderAdapter, LlmCoderAdapter)}
# the session option `coder` (declared in engine.agent.settings) names one of these kinds, in their words
SETTINGS["coder"] = replace(SETTINGS["coder"], choices=tuple(CODERS),
                            help="; ".join(f"{kind.name}: {kind.help}" for kind in CODERS.values()))


def make_coder(config: SessionConfig, **llm_overrides: Any) -> Coder:
    """The coder a session's settings name (config.coder: a name in CODERS)."""
    adapter = CODERS.get(config.coder)
    if adapter is None:
        raise BefairError(f"unknown coder {config.coder!r}; use {' or '.join(CODERS)}")
    return adapter.build(config, **llm_overrides)


def coder_info(coder: object) -> dict[str, Any]:
    """session_started's `coder` payload: name, label, simulated, model, and what its adapter adds."""
    for adapter in CODERS.values():
        info = adapter.describe(coder)
        if info is not None:
            return dict(info)
    return _foreign_info(coder)


def _foreign_info(coder: object) -> dict[str, Any]:
    """A coder no adapter built (a study's `factory`, a test's): its own describe() or info() when
    it has one, and the Coder attributes it has."""
    info: dict[str, Any] = {}
    for method in ("describe", "info"):
        fn = getattr(coder, method, None)
        if callable(fn):
            info = dict(fn())
            break
    info.setdefault("name", getattr(coder, "name", "custom"))
    info.setdefault("label", getattr(coder, "label", info["name"]))
    info.setdefault("simulated", bool(getattr(coder, "simulated", False)))
    info.setdefault("model", getattr(coder, "model", None))
    return info


def llm_config_for_session(session_config: Any, overrides: dict[str, Any] | None = None,
                           **load_kw: Any) -> LlmConfig:
    """LlmConfig for a SessionConfig: its task protocol's defaults, its `model`, then extra["llm"]
    settings, then overrides."""
    protocol = getattr(session_config, "protocol", None)
    if protocol and "defaults" not in load_kw:
        load_kw["defaults"] = task_protocol(str(protocol)).llm_defaults
    values: dict[str, Any] = {}
    extra = getattr(session_config, "extra", None) or {}
    if isinstance(extra.get("llm"), dict):
        values.update({k: v for k, v in extra["llm"].items() if k not in ("api_key", "source")})
    if getattr(session_config, "model", None):
        values["model"] = session_config.model
    values.update({k: v for k, v in (overrides or {}).items() if v is not None})
    return LlmConfig.load(values, **load_kw)


def build_llm_coder(
    session_config: Any = None,
    *,
    model: str | None = None,
    base_url: str | None = None,
    api_key: str | None = None,
    config_path: str | None = None,
    exec_timeout: float | None = None,
    client: Any = None,
    **overrides: Any,
) -> LlmCoder:
    """The coder for `befair run --coder openai --model M [--base-url U] [--api-key K]`.

    Raises LlmConfigError (a BefairError; message says how to configure one) when no server is
    configured or a setting is invalid: the caller shows it and offers the offline coder.
    """
    given = dict(overrides, model=model, base_url=base_url, api_key=api_key)
    if session_config is not None:
        config = llm_config_for_session(session_config, given, path=config_path)
        if exec_timeout is None:
            exec_timeout = getattr(session_config, "step_timeout", None)
    else:
        config = LlmConfig.load(given, path=config_path)
    return LlmCoder(config, exec_timeout=exec_timeout, client=client)
