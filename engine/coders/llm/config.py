"""Configuration of the LLM coder: model, server, key, sampling, limits, retries, prices, budget.

Sources, lowest precedence first:
1. built-in defaults (below), then the session's task protocol's (`defaults`, which
   engine.agent.coder_registry.llm_config_for_session passes: the be-fair
   protocol's are AIDE's, engine.agent.task_protocol.AIDE_LLM_DEFAULTS);
2. a config file: $BEFAIR_LLM_CONFIG, else ~/.config/befair/llm.toml (TOML, or JSON when the
   name ends in .json); keys are the field names below, plus an optional [prices] table
   (`"model" = [usd_per_1M_input, usd_per_1M_output]`);
3. environment variables: OPENAI_BASE_URL, OPENAI_API_KEY (the openai client's own), and
   BEFAIR_LLM_MODEL, BEFAIR_LLM_REVIEW_MODEL, BEFAIR_LLM_BUDGET;
4. explicit overrides (CLI flags, the setup screen), where None means "not given".

With neither a key nor a base URL, `problem()` says how to configure one (the product then offers
the offline coder). A local server (vLLM, Ollama, llama.cpp) needs no key: a dummy one is sent.
The key is never written into a session: record `public_dict()`.
"""
from __future__ import annotations

import json
import math
import os
import tomllib
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any
from collections.abc import Mapping

from engine.options import Option, declared, setting
from engine.errors import BefairError

DEFAULT_MODEL = "gpt-4.1-mini"
DEFAULT_CONFIG_PATH = Path("~/.config/befair/llm.toml")
DUMMY_API_KEY = "sk-no-key-required"

# USD per 1M tokens (input, output). Published list prices at the time of writing; override them
# in the config file. Looked up by exact name, then by the longest prefix (dated snapshots such
# as "gpt-4.1-mini-2025-04-14" match "gpt-4.1-mini"). Unknown models (local ones) cost 0.
DEFAULT_PRICES: dict[str, tuple[float, float]] = {
    "gpt-4.1": (2.00, 8.00),
    "gpt-4.1-mini": (0.40, 1.60),
    "gpt-4.1-nano": (0.10, 0.40),
    "gpt-4o": (2.50, 10.00),
    "gpt-4o-mini": (0.15, 0.60),
    "o3": (2.00, 8.00),
    "o3-mini": (1.10, 4.40),
    "o4-mini": (1.10, 4.40),
    "gpt-5": (1.25, 10.00),
    "gpt-5-mini": (0.25, 2.00),
    "gpt-5-nano": (0.05, 0.40),
}


class LlmConfigError(BefairError):
    """The LLM coder cannot be configured as asked (no server, bad config file, bad value)."""


def _llm(default: Any, help_: str, *, flag: str, env: str | None = None, stored: str = "llm",
         spec: str | None = "coder.", at_setup: bool = False, **declaration: Any) -> Any:
    """An LlmConfig field that declares one of the LLM coder's options (engine.options.setting): section
    "llm", given_only (a flag not given leaves the value to the config file, the environment and the
    protocol's defaults), kept in the session's extra["llm"] and a key of a study spec's openai [coder]
    table unless said otherwise."""
    return setting(default, help_, section="llm", flag=flag, env=env, stored=stored, spec=spec, at_setup=at_setup,
                   given_only=True, **declaration)


@dataclass
class LlmConfig:
    # A field declared with _llm is an option a person may give (a flag, the setup screen, a study spec,
    # the environment); the others are the config file's only.
    model: str = _llm(DEFAULT_MODEL, "LLM model for the openai coder (default: config file, then "
                      f"$BEFAIR_LLM_MODEL, then {DEFAULT_MODEL})", flag="--model", env="BEFAIR_LLM_MODEL",
                      stored="field", at_setup=True)
    review_model: str | None = _llm(None, "model that reviews runs (default: --model)", flag="--review-model",
                                    env="BEFAIR_LLM_REVIEW_MODEL")   # None: the coding model reviews too
    base_url: str | None = _llm(None, "OpenAI-compatible server, e.g. http://localhost:8000/v1 (default: "
                                "$OPENAI_BASE_URL, else OpenAI)", flag="--base-url", env="OPENAI_BASE_URL",
                                at_setup=True)   # None: api.openai.com
    api_key: str | None = _llm(None, "API key (default: $OPENAI_API_KEY; not needed for a local server)",
                               flag="--api-key", env="OPENAI_API_KEY", stored="", spec=None, at_setup=True)
    temperature: float = _llm(0.5, "sampling temperature for coding", flag="--temperature")   # draft/improve/debug
    review_temperature: float = 0.0
    # the stall timeout (s): the openai client's timeout per HTTP attempt; streamed, it bounds each wait
    # for the next bytes, so a call ends only when no token came for this long (or at its token cap)
    timeout: float = _llm(120.0, "stall timeout: seconds the LLM client waits for the next bytes of a streamed "
                          "reply (or for the answer of an unstreamed one; default 120)", flag="--llm-timeout",
                          dest="llm_timeout", metavar="SECONDS")
    # the openai client's retries (timeouts, connection errors, 408/409/429/5xx) after the first attempt
    max_retries: int = _llm(2, "retries of a failed LLM request by the openai client (timeouts, connection "
                            "errors, 429, 5xx; default 2)", flag="--llm-retries", dest="llm_retries", metavar="N")
    # an optional wall-clock bound on one call, retries included (None/0: off, the default: a slow local
    # model that is still writing is never cut)
    call_budget_s: float | None = _llm(None, "an outer bound: seconds one LLM call may take in all, retries "
                                       "included (default: none; a streaming reply ends at its token cap or after "
                                       "--llm-timeout seconds without a token; `befair llm check` suggests one)",
                                       flag="--llm-call-budget", metavar="SECONDS")
    max_tokens: int | None = _llm(4096, "completion cap (max_tokens) for draft/improve/debug replies (default "
                                  "4096; 0: no cap)", flag="--max-tokens", metavar="TOKENS")   # 0/None: none
    review_max_tokens: int | None = _llm(512, "completion cap for reviews (default 512; 0: no cap)",
                                         flag="--review-max-tokens", metavar="TOKENS")
    stream: bool = True                      # stream replies (falls back when the server refuses)
    review_tools: bool | None = None         # None: try tool calling, fall back to JSON
    prices: dict[str, tuple[float, float]] = field(default_factory=lambda: dict(DEFAULT_PRICES))
    # the model writes features() and train() only, into befair's scaffold (engine.coders.llm.scaffold;
    # befair's protocol); the flag reads on|off
    scaffold: bool = _llm(False, "on: the model writes only features() and train(); befair's scaffold reads the "
                          "data, prints the metric and defines predict() (for small local models; `befair llm "
                          "check` says when; default off)", flag="--scaffold", metavar="on|off", at_setup=True,
                          type=str)
    # sampling seed: a client's n-th sample is asked with seed + n (None: none sent)
    seed: int | None = _llm(None, "sampling seed: the n-th reply is asked with seed+n, so a server that honours "
                            "seeds (llama.cpp's without prompt caching, vLLM) answers the same prompts alike "
                            "(default: none)", flag="--llm-seed", dest="llm_seed", metavar="N")
    # pause the session when the cost reaches it
    budget_usd: float | None = _llm(None, "pause the session when the LLM cost reaches this many USD",
                                    flag="--budget", metavar="USD", env="BEFAIR_LLM_BUDGET")
    source: str = "defaults"                 # where the settings came from (for messages)

    def __post_init__(self) -> None:
        if not self.model or not str(self.model).strip():
            raise LlmConfigError("the LLM coder needs a model name (--model)")
        for name in ("temperature", "review_temperature", "timeout", "call_budget_s"):
            value = getattr(self, name)
            if name == "call_budget_s" and value is None:
                continue
            try:
                value = float(value)
            except (TypeError, ValueError):
                raise LlmConfigError(f"llm setting {name} must be a number, not {value!r}") from None
            if value < 0 or math.isnan(value):
                raise LlmConfigError(f"llm setting {name} cannot be negative")
            setattr(self, name, value)
        if self.timeout <= 0:
            raise LlmConfigError("llm setting timeout must be positive")
        if self.call_budget_s is not None and self.call_budget_s <= 0:
            self.call_budget_s = None            # 0: no wall-clock budget (the default)
        try:
            self.max_retries = int(self.max_retries)
        except (TypeError, ValueError):
            raise LlmConfigError(f"max_retries must be an integer, not {self.max_retries!r}") from None
        if self.max_retries < 0:
            raise LlmConfigError("max_retries cannot be negative")
        if self.seed is not None:
            try:
                self.seed = int(self.seed)
            except (TypeError, ValueError):
                raise LlmConfigError(f"llm setting seed must be an integer, not {self.seed!r}") from None
        if self.budget_usd is not None:
            try:
                self.budget_usd = float(self.budget_usd)
            except (TypeError, ValueError):
                raise LlmConfigError(f"budget must be a number of USD, not {self.budget_usd!r}") from None
        for name in ("max_tokens", "review_max_tokens"):
            value = getattr(self, name)
            if value is None:
                continue
            try:
                value = int(value)
            except (TypeError, ValueError):
                raise LlmConfigError(f"llm setting {name} must be a whole number of tokens, "
                                     f"not {value!r}") from None
            if value < 0:
                raise LlmConfigError(f"llm setting {name} cannot be negative (0: no cap)")
            setattr(self, name, value or None)
        self.stream = _switch("stream", self.stream)
        self.scaffold = _switch("scaffold", self.scaffold)
        self.prices = _normalise_prices(self.prices)
        if self.base_url is not None and not str(self.base_url).strip():
            self.base_url = None
        if self.api_key is not None and not str(self.api_key).strip():
            self.api_key = None

    # -- loading --------------------------------------------------------------------------

    @classmethod
    def load(
        cls,
        overrides: Mapping[str, Any] | None = None,
        *,
        env: Mapping[str, str] | None = None,
        path: str | os.PathLike[str] | None = None,
        defaults: Mapping[str, Any] | None = None,
    ) -> "LlmConfig":
        """Defaults < the protocol's `defaults` < config file < environment < overrides (None
        values are ignored)."""
        env = os.environ if env is None else env
        values: dict[str, Any] = dict(defaults or {})
        sources: list[str] = ["protocol defaults"] if defaults else []

        file_path = _config_path(path, env)
        if file_path is not None:
            file_values = read_config_file(file_path)
            prices = file_values.pop("prices", None)
            values.update(file_values)
            if prices:
                merged = dict(DEFAULT_PRICES)
                merged.update(_normalise_prices(prices))
                values["prices"] = merged
            sources.append(str(file_path))

        env_used = False
        for var, key in ENV_VARS.items():
            if env.get(var):
                values[key] = env[var]
                env_used = True
        if env_used:
            sources.append("environment")

        if overrides:
            given = {k: v for k, v in overrides.items() if v is not None}
            unknown = set(given) - _FIELD_NAMES
            if unknown:
                raise LlmConfigError(f"unknown llm setting(s): {', '.join(sorted(unknown))}")
            if "prices" in given:
                merged = dict(values.get("prices", DEFAULT_PRICES))
                merged.update(_normalise_prices(given.pop("prices")))
                given["prices"] = merged
            if given:
                values.update(given)
                sources.append("command line")
        values["source"] = ", ".join(sources) or "defaults"
        return cls(**values)

    # -- questions the product asks ---------------------------------------------------------

    def problem(self) -> str | None:
        """Why this configuration cannot reach a model, with how to fix it; None when it can."""
        if self.api_key or self.base_url:
            return None
        return (
            "The LLM coder has no server configured: set OPENAI_API_KEY (for OpenAI), or "
            "OPENAI_BASE_URL for a local OpenAI-compatible server (vLLM, Ollama, llama.cpp; "
            "e.g. http://localhost:11434/v1, no key needed), or pass --api-key / --base-url, "
            f"or write them in {DEFAULT_CONFIG_PATH} (or the file named by $BEFAIR_LLM_CONFIG). "
            "The offline coder (a simulated agent) works without any of these."
        )

    @property
    def effective_api_key(self) -> str:
        """The key to send: the configured one, or a dummy for a keyless local server."""
        if self.api_key:
            return self.api_key
        if self.base_url:
            return DUMMY_API_KEY
        raise LlmConfigError(self.problem() or "no API key")

    @property
    def effective_review_model(self) -> str:
        return self.review_model or self.model

    def max_tokens_for(self, role: str) -> int | None:
        """The completion cap sent for a role (review, or draft/improve/debug); None: no cap."""
        return self.review_max_tokens if role == "review" else self.max_tokens

    @staticmethod
    def cap_setting(role: str) -> str:
        """Where a role's cap is set (for messages): config key / command-line flag."""
        return ("review_max_tokens / --review-max-tokens" if role == "review"
                else "max_tokens / --max-tokens")

    def price(self, model: str) -> tuple[float, float] | None:
        """(USD per 1M input tokens, per 1M output tokens) for a model, or None if unknown."""
        if model in self.prices:
            return self.prices[model]
        best = None
        for name in self.prices:
            if model.startswith(name) and (best is None or len(name) > len(best)):
                best = name
        return self.prices[best] if best is not None else None

    def cost(self, model: str, tokens_in: int, tokens_out: int) -> float:
        price = self.price(model)
        if price is None:
            return 0.0
        return (tokens_in * price[0] + tokens_out * price[1]) / 1_000_000

    def public_dict(self) -> dict[str, Any]:
        """Everything but the key (safe to record in a session's events)."""
        d = asdict(self)
        d.pop("api_key", None)
        d["api_key_set"] = bool(self.api_key)
        d["prices"] = {k: list(v) for k, v in self.prices.items()}
        return d


def over_budget(total_cost: float, config: "LlmConfig | float | None") -> bool:
    """True when a session's LLM cost has reached its budget (no budget: never)."""
    budget = config.budget_usd if isinstance(config, LlmConfig) else config
    if budget is None:
        return False
    return float(total_cost) >= float(budget)


def read_config_file(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read a TOML (or .json) config file; an optional [llm] table is accepted as the root."""
    p = Path(path).expanduser()
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise LlmConfigError(f"cannot read the LLM config file {p}: {exc.strerror or exc}") from None
    try:
        data = json.loads(text) if p.suffix.lower() == ".json" else tomllib.loads(text)
    except (ValueError, tomllib.TOMLDecodeError) as exc:
        raise LlmConfigError(f"the LLM config file {p} is not valid: {exc}") from None
    if not isinstance(data, dict):
        raise LlmConfigError(f"the LLM config file {p} must hold a table of settings")
    if isinstance(data.get("llm"), dict):
        data = data["llm"]
    aliases = {"budget": "budget_usd", "api_base": "base_url", "key": "api_key"}
    out: dict[str, Any] = {}
    for key, value in data.items():
        key = aliases.get(key, key)
        if key in _RETIRED:
            continue  # settings of the old hand-written retry loop: the openai client retries now
        if key not in _FIELD_NAMES or key == "source":
            raise LlmConfigError(f"unknown setting {key!r} in the LLM config file {p}")
        out[key] = value
    return out


def _config_path(path: str | os.PathLike[str] | None, env: Mapping[str, str]) -> Path | None:
    if path is not None:
        return Path(path).expanduser()
    if CONFIG_ENV and env.get(CONFIG_ENV):
        return Path(env[CONFIG_ENV]).expanduser()
    default = Path(env.get("HOME", "~")) / ".config" / "befair" / "llm.toml" if env.get("HOME") \
        else DEFAULT_CONFIG_PATH.expanduser()
    return default if default.is_file() else None


def _normalise_prices(prices: Any) -> dict[str, tuple[float, float]]:
    if not isinstance(prices, Mapping):
        raise LlmConfigError("prices must map a model name to [usd_per_1M_input, usd_per_1M_output]")
    out: dict[str, tuple[float, float]] = {}
    for model, pair in prices.items():
        if isinstance(pair, Mapping):
            pair = (pair.get("input", 0.0), pair.get("output", 0.0))
        try:
            a, b = pair
            out[str(model)] = (float(a), float(b))
        except (TypeError, ValueError):
            raise LlmConfigError(
                f"price of {model!r} must be [usd_per_1M_input, usd_per_1M_output], not {pair!r}"
            ) from None
    return out


def _switch(name: str, value: object) -> bool:
    """A yes/no setting given as a bool, or as text from a flag or a settings file."""
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text not in ("true", "false", "1", "0", "yes", "no", "on", "off"):
        raise LlmConfigError(f"llm setting {name} must be on or off (true/false), not {value!r}")
    return text in ("true", "1", "yes", "on")


_FIELD_NAMES = {f.name for f in fields(LlmConfig)}
# Accepted (and ignored) in config files written for earlier versions.
_RETIRED = {"retry_base_delay", "retry_max_delay"}


# -- command line ----------------------------------------------------------------------------

# the LLM coder's options: LlmConfig's fields, then the config file's path (kept nowhere)
LLM_OPTIONS: tuple[Option, ...] = (
    *declared(LlmConfig),
    Option("llm_config", str, None, "LLM config file (default: $BEFAIR_LLM_CONFIG, else ~/.config/befair/llm.toml)",
           section="llm", flag="--llm-config", env="BEFAIR_LLM_CONFIG", stored="", given_only=True),
)
# the environment variables the LLM settings are read from (LlmConfig.load): variable -> field
ENV_VARS: dict[str, str] = {o.env: o.name for o in LLM_OPTIONS if o.env and o.name != "llm_config"}
CONFIG_ENV = next(o.env for o in LLM_OPTIONS if o.name == "llm_config")
_CLI_TO_FIELD = {o.cli_dest: o.name for o in LLM_OPTIONS if o.dest}


def add_cli_arguments(parser: Any) -> None:
    """Add the LLM flags to an argparse parser (all default to None: 'not given')."""
    for option in LLM_OPTIONS:
        option.add_to(parser)


def cli_overrides(args: Any) -> dict[str, Any]:
    """The LlmConfig fields given as flags (argparse Namespace or dict), by field name."""
    get = args.get if isinstance(args, Mapping) else (lambda k, d=None: getattr(args, k, d))
    return {
        _CLI_TO_FIELD.get(o.cli_dest, o.cli_dest): get(o.cli_dest)
        for o in LLM_OPTIONS if o.name != "llm_config" and get(o.cli_dest) is not None
    }
