"""The coder registry: each kind of coder a session can name, as an adapter that declares itself.

    coder = make_coder(session_config)             # the kind config.coder names, built
    CODERS["openai"].OPTIONS                       # its settings: name, type, default, help, flag
    coder_info(coder)                              # session_started's `coder` payload

An adapter (in the manner of Harlequin's HarlequinAdapter and its ADAPTER_OPTIONS) says what a
kind is called (`name`, the value of SessionConfig.coder and of `--coder`), how it is labelled,
whether it is a simulated agent, which settings it reads (`OPTIONS`), how to build one from a
session's settings and how to describe one it built. Adding a coder: write the Coder
(engine/agent/coder.py), then an adapter here, and list it in CODERS.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, ClassVar

from engine.agent.coder import Coder
from engine.agent.coder_options import CoderOption
from engine.agent.llm_coder import LlmCoder, build_llm_coder
from engine.agent.llm_config import LLM_OPTIONS
from engine.agent.offline import OfflineCoder
from engine.agent.session_config import SessionConfig
from engine.errors import BefairError

__all__ = ["CODERS", "CoderAdapter", "LlmCoderAdapter", "OfflineCoderAdapter", "coder_info", "make_coder"]


class CoderAdapter(ABC):
    """One kind of coder: what it is called, what it reads, how it is built and described."""

    name: ClassVar[str]
    label: ClassVar[str]
    simulated: ClassVar[bool]
    help: ClassVar[str]
    OPTIONS: ClassVar[tuple[CoderOption, ...]] = ()

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
    OPTIONS = (
        CoderOption("failure_rate", float, 0.15, "offline coder: share of pipelines written with a bug "
                    "(default 0.15)", flag="--failure-rate"),
        CoderOption("seed", int, 0, "the agent's seed (same seed, same session)", flag="--seed"),
        CoderOption("device", str, None, "evaluation device (cpu, cuda); default: GPU when present",
                    flag="--device"),
        CoderOption("step_timeout", float, 600.0, "seconds per node execution (default 600)",
                    flag="--step-timeout"),
    )

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
