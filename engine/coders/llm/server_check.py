"""Probing an OpenAI-compatible server before a session relies on it (`befair llm check`).

    report = check_server(config)        # models, a short streamed completion, speeds, context
    report.lines()                       # what `befair llm check` prints and the setup screen shows
    server_identity(config)              # what a session records of the server (session_started)

Nothing here raises for a server that misbehaves: the report says what failed.
"""
from __future__ import annotations

import json
import math
import time
import urllib.error
import urllib.request
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from engine.coders.llm import local_model
from engine.coders.llm.client import ChatClient
from engine.coders.llm.config import LLM_OPTIONS, LlmConfig
from engine.coders.llm.scaffold import SMALL_MODEL_PARAMS

# What one step asks of a model, measured on befair's own prompts with SynthDerm (tokens): a
# draft prompt is ~2,000, a debug prompt (code + output) up to ~4,500; a pipeline ~600-1,200.
STEP_PROMPT_TOKENS = 4_500
STEP_REPLY_TOKENS = 1_000
PROBE_MAX_TOKENS = 48
# A prompt of ~350 tokens: long enough that its reading time says how fast prompts are read.
PROBE_PROMPT = ("Write a Python function `mean(xs)` that returns the arithmetic mean of a list of numbers. "
                "Reply with the code only.\n\nContext, for timing only (ignore it): " + " ".join(
                    f"row {i}: image_{i}.jpg, skin tone {i % 6 + 1}, label benign;" for i in range(1, 25)))


@dataclass
class CheckReport:
    base_url: str
    model: str
    models: list[str] = field(default_factory=list)
    server_model: str | None = None
    context: int | None = None             # tokens, where the server says
    params: int | None = None              # the model's parameters, where the server says (llama.cpp)
    prompt_tokens: int | None = None
    first_token_s: float | None = None
    prompt_tokens_per_s: float | None = None
    tokens_per_s: float | None = None
    completion_tokens: int | None = None
    reply: str = ""
    ok: bool = False
    error: str | None = None
    advice: list[str] = field(default_factory=list)
    settings: dict[str, Any] = field(default_factory=dict)   # suggested LlmConfig values
    llama_cpp: bool = False                # llama.cpp's server (it sends keep-alives while reading a prompt)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def lines(self) -> list[str]:
        out = [f"server   {self.base_url}"]
        out.append(f"models   {', '.join(self.models) if self.models else '(none listed)'}")
        if not self.ok:
            out.append(f"FAILED   {self.error}")
            return out + [f"advice   {a}" for a in self.advice]
        ctx = f"{self.context:,} tokens" if self.context else "not reported by the server"
        size = f" · {self.params / 1e9:.1f}B parameters" if self.params else ""
        out.append(f"model    {self.server_model or self.model}{size} · context window {ctx}")
        reading = (f"{self.prompt_tokens_per_s:.0f} tokens/s ({self.prompt_tokens} tokens in "
                   f"{self.first_token_s:.1f} s)" if self.prompt_tokens_per_s else
                   f"first token after {self.first_token_s:.1f} s" if self.first_token_s is not None else "?")
        out.append(f"reading  {reading}")
        writing = f"{self.tokens_per_s:.1f} tokens/s" if self.tokens_per_s else "? (too few tokens to measure)"
        out.append(f"writing  {writing} ({self.completion_tokens or 0} tokens streamed)")
        if self.settings:
            out.append("settings " + " ".join(f"{flag} {value}" for flag, value in _flags(self.settings)))
        return out + [f"advice   {a}" for a in self.advice]


# an LLM setting's flag, by LlmConfig field (engine.coders.llm.config.LLM_OPTIONS)
FLAG = {o.name: o.flag or "" for o in LLM_OPTIONS}
ADVISED = ("timeout", "max_tokens", "call_budget_s", "scaffold")   # the settings a check suggests, in this order


def _flags(settings: dict[str, Any]) -> list[tuple[str, Any]]:
    shown = {k: ("on" if v is True else "off" if v is False else v) for k, v in settings.items()}
    return [(FLAG[k], shown[k]) for k in ADVISED if shown.get(k) is not None]


def _root(base_url: str) -> str:
    """The server's root: llama.cpp serves /props and /health beside /v1."""
    url = base_url.rstrip("/")
    return url[: -len("/v1")] if url.endswith("/v1") else url


def _get_json(url: str, api_key: str | None, timeout: float) -> Any:
    req = urllib.request.Request(url, headers={"Authorization": f"Bearer {api_key}"} if api_key else {})
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        return json.load(resp)


def server_identity(config: LlmConfig, timeout: float = 5.0) -> dict[str, Any]:
    """What a session records of its server: the model ids it lists and, for llama.cpp, the GGUF
    it loaded and that file's SHA-256 when known (a `<file>.sha256` beside it, or the local
    model's install manifest). Never raises; {"error": ...} when the server cannot be asked."""
    base = config.base_url or "https://api.openai.com/v1"
    key = config.effective_api_key if (config.api_key or config.base_url) else None
    out: dict[str, Any] = {}
    try:
        data = _get_json(f"{base.rstrip('/')}/models", key, timeout)
        listed = data.get("data") if isinstance(data, dict) else None
        out["models"] = [str(m.get("id")) for m in listed or [] if isinstance(m, dict) and m.get("id")][:20]
        owners = {str(m.get("owned_by")) for m in listed or [] if isinstance(m, dict) and m.get("owned_by")}
        if owners:
            out["owned_by"] = sorted(owners)[0]
        ctx = _context_from_models(listed)
        if ctx:
            out["context"] = ctx
        params = _meta_int(listed, "n_params")
        if params:
            out["params"] = params
    except (OSError, ValueError, urllib.error.URLError) as exc:
        out["error"] = f"GET /models failed: {type(exc).__name__}: {str(exc)[:120]}"
        return out
    if config.base_url:
        try:
            props = _get_json(f"{_root(base)}/props", key, timeout)
        except (OSError, ValueError, urllib.error.URLError):
            props = None
        if isinstance(props, dict) and props.get("model_path"):
            path = str(props["model_path"])
            out["model_path"] = path
            digest = _known_sha256(Path(path))
            if digest:
                out["gguf_sha256"] = digest
    return out


def _context_from_models(listed: Any) -> int | None:
    """The context window a /models listing states: llama.cpp's meta.n_ctx, vLLM's max_model_len."""
    for m in listed or []:
        if not isinstance(m, dict):
            continue
        meta: dict[str, Any] = m["meta"] if isinstance(m.get("meta"), dict) else {}
        for value in (meta.get("n_ctx"), m.get("max_model_len"), m.get("context_length")):
            if isinstance(value, int) and value > 0:
                return value
    return None


def _meta_int(listed: Any, key: str) -> int | None:
    """A whole number from llama.cpp's per-model `meta` (n_params, n_ctx_train)."""
    for m in listed or []:
        meta = m.get("meta") if isinstance(m, dict) else None
        value = meta.get(key) if isinstance(meta, dict) else None
        if isinstance(value, int) and value > 0:
            return value
    return None


def _known_sha256(path: Path) -> str | None:

    digest = local_model.sidecar_sha256(path)
    if digest:
        return digest
    installed = local_model.find()
    try:
        same = installed.model.resolve() == path.resolve()
    except OSError:
        same = False
    return installed.sha256 if same else None


def check_server(config: LlmConfig, *, timeout: float = 120.0) -> CheckReport:
    """Ask the server for its models, then stream a short completion and time it."""
    report = CheckReport(base_url=config.base_url or "https://api.openai.com/v1", model=config.model)
    ident = server_identity(config, timeout=min(timeout, 10.0))
    report.models = list(ident.get("models") or [])
    report.llama_cpp = ident.get("owned_by") == "llamacpp"
    report.context = ident.get("context")
    report.params = ident.get("params")
    if ident.get("error"):
        report.error = f"cannot list the server's models ({ident['error']})"
        report.advice.append("check --base-url (OpenAI-compatible servers usually end in /v1) and that the "
                             "server is running")
        return report
    if report.models and config.model not in report.models:
        report.advice.append(f"the server does not list the model {config.model!r}: use --model "
                             f"{report.models[0]}" + (" (llama.cpp serves its one model under any name)"
                                                      if len(report.models) == 1 else ""))
    _probe(config, report, timeout)
    if report.ok:
        _advise(config, report)
    return report


def _probe(config: LlmConfig, report: CheckReport, timeout: float) -> None:

    probe = LlmConfig(**{**asdict(config), "max_tokens": PROBE_MAX_TOKENS, "timeout": timeout,
                         "call_budget_s": None, "max_retries": 0})
    stats: list[Any] = []
    t0 = time.monotonic()
    result = ChatClient(probe).complete([{"role": "user", "content": PROBE_PROMPT}], role="draft",
                                        model=config.model, temperature=0.0,
                                        on_progress=lambda _role, s: stats.append(s))
    call = result.calls[-1] if result.calls else None
    if not result.ok and result.kind != "truncated":   # a probe cut at its small cap is fine
        report.error = result.error or "the completion failed"
        return
    report.ok = True
    report.reply = (call.reply if call else result.content or "")[:400]
    report.server_model = call.server_model if call else None
    report.completion_tokens = call.tokens_out if call else None
    if call is not None and not call.tokens_estimated:
        report.prompt_tokens = call.tokens_in
    last = stats[-1] if stats else None
    report.first_token_s = round(last.first_token_s, 2) if last and last.first_token_s is not None else \
        round(time.monotonic() - t0, 2)
    if last is not None and last.tokens_per_s:
        report.tokens_per_s = round(last.tokens_per_s, 2)
    if report.prompt_tokens and report.first_token_s:
        report.prompt_tokens_per_s = round(report.prompt_tokens / report.first_token_s, 1)
    if not stats:
        report.advice.append("the server did not stream the reply: befair shows no live progress for it")


def _advise(config: LlmConfig, report: CheckReport) -> None:
    """Settings for this server: a stall timeout that covers reading the longest prompt, a token
    cap that fits the context window, and (if one is wanted at all) a call budget."""
    cap = config.max_tokens or 4096
    reading = report.prompt_tokens_per_s
    stall = 120.0
    if reading and not report.llama_cpp:   # llama.cpp keeps the stream alive while it reads a prompt
        stall = max(stall, math.ceil(2 * STEP_PROMPT_TOKENS / reading / 10) * 10)
    if report.context:
        room = report.context - STEP_PROMPT_TOKENS
        if room < 1024:
            report.advice.append(f"the context window ({report.context:,} tokens) is too small for befair's prompts "
                                 f"(~{STEP_PROMPT_TOKENS:,} tokens) and a pipeline: start the server with a larger "
                                 "one (llama-server -c 16384)")
        cap = max(512, min(cap, room))
    settings: dict[str, Any] = {"timeout": int(stall), "max_tokens": cap}
    tps = report.tokens_per_s
    if tps:
        per_step = STEP_PROMPT_TOKENS / (reading or 50.0) + STEP_REPLY_TOKENS / tps
        budget = math.ceil((STEP_PROMPT_TOKENS / (reading or 50.0) + 1.5 * cap / tps) / 60) * 60
        settings["call_budget_s"] = None
        report.advice.append(f"a step's call takes about {per_step / 60:.1f} min at these speeds (a "
                             f"~{STEP_REPLY_TOKENS:,}-token pipeline); leave {FLAG['call_budget_s']} off, or set it "
                             f"to {budget} s (the {cap:,}-token cap at 2/3 of the measured speed)")
        if tps < 3:
            report.advice.append("under 3 tokens/s: the machine is busy or slow; a 20-step session will take hours")
    if reading and stall > 120:
        report.advice.append(f"prompts are read at {reading:.0f} tokens/s: a long debug prompt takes "
                             f"~{STEP_PROMPT_TOKENS / reading:.0f} s before the first token, so use "
                             f"{FLAG['timeout']} {int(stall)}")
    elif reading and report.llama_cpp:
        report.advice.append(f"prompts are read at {reading:.0f} tokens/s (~{STEP_PROMPT_TOKENS / reading:.0f} s for "
                             "a long debug prompt); llama.cpp keeps a lone request's stream alive meanwhile, so "
                             f"the default {FLAG['timeout']} {LlmConfig.timeout:g} holds; sessions sharing one server "
                             f"wait for each other's prompts in silence: raise it (e.g. {FLAG['timeout']} 900)")
    _advise_scaffold(config, report, settings)
    if tps and tps < 3 and report.llama_cpp:
        report.advice.append("on a machine with 2 busy cores, start llama-server with -t 1 (befair llm serve-local "
                             "does): 2 threads stall each other")
    report.settings = settings


def _advise_scaffold(config: LlmConfig, report: CheckReport, settings: dict[str, Any]) -> None:
    """A model under 7B parameters gets the scaffold: a 1.5B coder wrote 36 whole pipelines without
    it and none ran to a measurement (guessed file names, removed APIs, functions that do not exist)."""
    if not report.params or report.params >= SMALL_MODEL_PARAMS:
        return
    settings["scaffold"] = True
    if not config.scaffold:
        report.advice.append(f"a {report.params / 1e9:.1f}B-parameter model rarely writes a whole pipeline that "
                             f"runs: use {FLAG['scaffold']} on (befair writes the data loading, the metric line and "
                             "predict(); the model writes features() and train())")
