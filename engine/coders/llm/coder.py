"""The LLM coder: any OpenAI-compatible Chat Completions server drives the search.

    config = LlmConfig.load({"model": "gpt-4.1-mini", "base_url": None})   # env, file, flags
    if config.problem(): ...offer the offline coder...
    coder = LlmCoder(config, exec_timeout=session_config.step_timeout)
    coder.on_stream = lambda role, text: ...   # optional: the reply so far, at most 5 times/s
    coder.on_progress = lambda role, stats: ...   # optional: StreamStats (tokens, tokens/s), as often
    reply = coder.draft(ctx)            # CoderReply; never raises
    review = coder.review(ctx, node)    # Review; never raises

Prompts in (engine.coders.llm.prompts), a CoderReply or Review out (engine.coders.llm.response_parsing
reads the reply). Each call goes through engine.coders.llm.client.ChatClient, which bounds it and
accounts for every HTTP attempt as an LlmCall; the calls ride on the reply, and the runner
stores them as llm_call events.
"""
from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from typing import Any, TypeVar

from engine.coders.llm import prompts, reply_flaws, scaffold
from engine.coders.llm.attempts import shorten
from engine.coders.llm.client import ChatClient, ChatResult, StreamStats
from engine.coders.llm.config import LlmConfig, LlmConfigError
from engine.coders.llm.prompts_be_fair import BeFairContext
from engine.coders.llm.reply_rules import NO_CODE, UNWRITTEN, RuleHit
from engine.coders.llm.response_parsing import (
    aide_code_formatter,
    aide_extract_code,
    aide_extract_plan,
    aide_review,
    extract_all_code,
    extract_code,
    extract_plan,
    parse_json_object,
    review_from_dict,
)
from engine.coders.llm.server_check import server_identity
from engine.coders.protocol import CoderContext, CoderReply, LlmCall, NodeView, Review
from engine.evaluation.audit import parse_claimed_metric

T = TypeVar("T")

__all__ = ["LlmCoder"]

ParsedReview = tuple[bool, str, float | None, bool | None]   # is_bug, summary, claimed metric, lower_is_better
ReviewReader = Callable[[dict[str, Any]], "ParsedReview | None"]
NO_USABLE_REVIEW = "the reply held no usable review"
CODE_ATTEMPTS = 3  # AIDE's plan_and_code_query(retries=3)


class LlmCoder:
    """The Coder protocol over an OpenAI-compatible server. Never raises from its four methods."""

    name = "openai"
    simulated = False

    def __init__(self, config: LlmConfig, *, exec_timeout: float | None = None,
                 client: Any = None) -> None:
        problem = config.problem()
        if problem:
            raise LlmConfigError(problem)
        self.config = config
        self.model = config.model
        self.review_model = config.effective_review_model
        self.label = f"LLM coder ({self.model})"
        self.exec_timeout = exec_timeout
        self.chat = ChatClient(config, client=client)
        self._tools_misses = 0
        self._tools_ok = config.review_tools is not False
        self.calls: list[LlmCall] = []          # every call this coder made, in order
        # Set by the runner to show a reply while it streams: on_stream(role, reply text so far),
        # called on the coder's thread at most ~5 times a second (and once with the whole reply).
        self.on_stream: Callable[[str, str], None] | None = None
        # Set by the runner for the status line: on_progress(role, StreamStats), as often.
        self.on_progress: Callable[[str, StreamStats], None] | None = None
        self._server: dict[str, Any] | None = None

    @property
    def secrets(self) -> tuple[str, ...]:
        return (self.config.api_key,) if self.config.api_key else ()

    @property
    def budget_usd(self) -> float | None:
        return self.config.budget_usd

    def attach_stream(self, on_stream: Callable[[str, str], None],
                      on_progress: Callable[[str, StreamStats], None]) -> None:
        self.on_stream, self.on_progress = on_stream, on_progress

    # -- what the session records ---------------------------------------------------------

    def describe(self) -> dict[str, Any]:
        """For session_started's `coder` payload: what was asked for, and what the server says
        it serves (its model ids; for a local llama.cpp GGUF, the file and its SHA-256 when known)."""
        if self._server is None:

            self._server = server_identity(self.config)
        cfg = self.config
        return {"name": self.name, "label": self.label, "simulated": self.simulated,
                "model": self.model, "review_model": self.review_model,
                "base_url": cfg.base_url, "server": self._server,
                "sampling": {"temperature": cfg.temperature, "review_temperature": cfg.review_temperature,
                             "max_tokens": cfg.max_tokens, "review_max_tokens": cfg.review_max_tokens,
                             "seed": cfg.seed, "source": cfg.source},
                "aide_code_format": aide_code_formatter() or "unformatted (black is not installed)",
                "scaffold": bool(cfg.scaffold),
                **({"scaffold_wording": scaffold.WORDING_VERSION} if cfg.scaffold else {})}

    def cancel(self) -> None:
        """End the LLM call in progress now (a stop command); later calls run normally."""
        self.chat.cancel()

    # -- the Coder protocol ---------------------------------------------------------------

    def draft(self, ctx: CoderContext) -> CoderReply:
        ctx = self._scaffolded(ctx)
        return self._code("draft", lambda: prompts.draft_prompt(ctx, self.exec_timeout), ctx)

    def improve(self, ctx: CoderContext, parent: NodeView) -> CoderReply:
        ctx = self._scaffolded(ctx)
        return self._code("improve", lambda: prompts.improve_prompt(ctx, parent, self.exec_timeout), ctx)

    def debug(self, ctx: CoderContext, parent: NodeView) -> CoderReply:
        ctx = self._scaffolded(ctx)
        return self._code("debug", lambda: prompts.debug_prompt(ctx, parent, self.exec_timeout), ctx,
                          failed=parent.code)

    def _scaffolded(self, ctx: CoderContext) -> CoderContext:
        """The context asking for features() and train() only, when the settings want the scaffold
        and the context's protocol can take it (the be-fair protocol's cannot)."""
        if not self.config.scaffold or not ctx.scaffoldable:
            return ctx
        return dataclasses.replace(ctx, scaffold=True)

    def review(self, ctx: CoderContext, node: NodeView) -> Review:
        calls: list[LlmCall] = []     # every call made, kept when a later step fails
        aide = isinstance(ctx, BeFairContext)
        read = _aide_reader(node) if aide else _product_review
        try:
            parsed, why = self._review_by_model(ctx, node, calls, read)
        except Exception as exc:  # noqa: BLE001 - a review must never crash the session
            parsed, why = None, f"internal error: {type(exc).__name__}: {exc}"
        if parsed is not None:
            is_bug, summary, metric, lower_is_better = parsed
            return Review(is_bug=is_bug, summary=summary if aide else summary or "(no summary)",
                          claimed_metric=metric, lower_is_better=lower_is_better, llm_calls=calls)
        return _review_from_output(node, why, calls)

    def _review_by_model(self, ctx: CoderContext, node: NodeView, calls: list[LlmCall],
                         read: ReviewReader) -> tuple[ParsedReview | None, str]:
        """The model's review through the submit_review tool, else as JSON; and why none came."""
        parsed: ParsedReview | None = None
        why, want_json = "no reply", not self._tools_ok
        if self._tools_ok:
            parsed, why, want_json = self._review_with_tools(ctx, node, calls, read)
        if want_json:
            parsed, why = self._review_as_json(ctx, node, calls, why, read)
        return parsed, why

    def _review_with_tools(self, ctx: CoderContext, node: NodeView, calls: list[LlmCall],
                           read: ReviewReader) -> tuple[ParsedReview | None, str, bool]:
        """(review, why none, whether to ask again for JSON). A server that ignores the tool twice,
        or rejects it, is asked for JSON from then on (unless review_tools is set)."""
        res = self._complete(
            prompts.to_messages(prompts.review_prompt(ctx, node)), role="review",
            model=self.review_model,
            temperature=self._temperature(isinstance(ctx, BeFairContext), self.review_model, review=True),
            tools=[prompts.PROMPT_SETS[ctx.protocol].review_tool],
            tool_choice={"type": "function", "function": {"name": "submit_review"}},
        )
        calls += res.calls
        if res.ok:
            parsed = _review_from_tools(res.tool_calls, read)
            if parsed is None:
                self._tools_misses += 1
                if self._tools_misses >= 2 and self.config.review_tools is None:
                    self._tools_ok = False      # the server ignores tools: go JSON
                parsed = read(parse_json_object(res.content or "") or {})
            else:
                self._tools_misses = 0
            return parsed, NO_USABLE_REVIEW, parsed is None
        if res.kind == "http" and self.config.review_tools is None:
            self._tools_ok = False              # tools rejected (400/422): go JSON
            return None, res.error or "no reply", True
        return None, res.error or "no reply", False

    def _review_as_json(self, ctx: CoderContext, node: NodeView, calls: list[LlmCall],
                        why: str, read: ReviewReader) -> tuple[ParsedReview | None, str]:
        res = self._complete(
            prompts.to_messages(prompts.review_prompt(ctx, node, json_only=True)),
            role="review", model=self.review_model,
            temperature=self._temperature(isinstance(ctx, BeFairContext), self.review_model, review=True),
        )
        calls += res.calls
        if not res.ok:
            return None, res.error or why
        parsed = read(parse_json_object(res.content or "") or {})
        return parsed, NO_USABLE_REVIEW if parsed is None else why

    def _temperature(self, aide: bool, model: str, *, review: bool = False) -> float | None:
        """The temperature sent; under the be-fair protocol none for a reasoning model (o1, o3,
        o4-mini, codex-mini-latest), which AIDE's OpenAI backend leaves out."""
        temperature = self.config.review_temperature if review else self.config.temperature
        if aide and _AIDE_NO_TEMPERATURE.match(model):
            return None
        return temperature

    # -- internals ------------------------------------------------------------------------

    def _complete(self, messages: list[dict[str, Any]], **kw: Any) -> ChatResult:
        res = self.chat.complete(messages, on_stream=self.on_stream, on_progress=self.on_progress, **kw)
        self.calls.extend(res.calls)
        return res

    def _code(self, role: str, build: Callable[[], dict[str, Any]], ctx: CoderContext,
              failed: str | None = None) -> CoderReply:
        """Ask for a plan and code; a reply that holds no code is asked again, as AIDE's
        plan_and_code_query does (CODE_ATTEMPTS replies in all, the same prompt each time). With the
        scaffold, so is a reply that leaves features() or train() unwritten
        (engine.coders.llm.scaffold.unusable), and one that would fail at once (Scaffold.flaw; for a
        debug reply, handing back the `failed` code unchanged is one); the prompt is sent again with
        a note of what the last reply lacked (not with that reply: a small model shown its reply
        repeats it word for word). When no reply is free of flaws, the last one that wrote both
        functions runs as it is (not the failed code handed back, if another wrote both), so that the
        model sees its error. A usable reply goes into the
        scaffold (assemble): the node's code is the whole file."""
        if isinstance(ctx, BeFairContext):
            return self._aide_code(role, build)
        calls: list[LlmCall] = []
        unusable: list[str] = []     # why each reply with code was not taken
        flawed: list[tuple[str, str]] = []   # (plan, code) of each complete reply with a flaw
        try:
            messages = first = prompts.to_messages(build())
            for attempt in range(1, CODE_ATTEMPTS + 1):
                res = self._complete(messages, role=role, model=self.model,
                                     temperature=self.config.temperature)
                calls += res.calls
                content = res.content or ""
                if not res.ok:  # refused, cut, failed: asking again would not help
                    return CoderReply(plan=extract_plan(content), code=None, error=res.error,
                                      llm_calls=calls)
                code = (extract_all_code if ctx.scaffold else extract_code)(content)
                plan = extract_plan(content) or "(the model gave no plan)"
                if code is not None and not ctx.scaffold:
                    return CoderReply(plan=plan, code=code, llm_calls=calls)
                if code is None:
                    _record(res.calls, RuleHit(NO_CODE.id, "the reply held no ```python code block"), attempt)
                    messages = scaffold.with_note(first, None) if ctx.scaffold else messages
                    continue
                frame = scaffold.load()
                hit = _ast_retried(frame.check, code, failed)
                if hit is None:
                    return CoderReply(plan=plan, code=_ast_retried(frame.assemble, code), llm_calls=calls)
                _record(res.calls, hit, attempt)
                unusable.append(hit.message)
                if hit.rule != UNWRITTEN.id:
                    flawed.append((plan, code))
                messages = scaffold.with_note(first, hit.message)
            if flawed:
                plan, code = _to_run(flawed, failed)
                return CoderReply(plan=plan, code=_ast_retried(scaffold.load().assemble, code), llm_calls=calls)
            return CoderReply(plan=extract_plan(content), code=None, llm_calls=calls,
                              error=_no_code_reason(content, unusable))
        except Exception as exc:  # noqa: BLE001 - a coder never raises
            return CoderReply(plan="", code=None, llm_calls=calls,
                              error=f"internal error in the LLM coder: {type(exc).__name__}: {exc}")


    def _aide_code(self, role: str, build: Callable[[], dict[str, Any]]) -> CoderReply:
        """AIDE's plan_and_code_query: the same prompt up to CODE_ATTEMPTS times until a reply has
        both a plan and code (AIDE's extract_code and extract_text_up_to_code); after the last, no
        plan and the whole reply as the code, as AIDE runs it."""
        calls: list[LlmCall] = []
        content = ""
        try:
            messages = prompts.to_messages(build())
            for _ in range(CODE_ATTEMPTS):
                res = self._complete(messages, role=role, model=self.model,
                                     temperature=self._temperature(True, self.model))
                calls += res.calls
                if not res.ok:  # AIDE's backend retries failed requests without end; befair's client gave up
                    return CoderReply(plan="", code=None, error=res.error, llm_calls=calls)
                content = res.content or ""
                code, plan = aide_extract_code(content), aide_extract_plan(content)
                if code and plan:
                    return CoderReply(plan=plan, code=code, llm_calls=calls)
            return CoderReply(plan="", code=content, llm_calls=calls,
                              error=None if content else f"{CODE_ATTEMPTS} empty replies")
        except Exception as exc:  # noqa: BLE001 - a coder never raises
            return CoderReply(plan="", code=None, llm_calls=calls,
                              error=f"internal error in the LLM coder: {type(exc).__name__}: {exc}")


_AIDE_NO_TEMPERATURE = re.compile(r"^o\d|^codex-mini-latest$")


def _product_review(data: dict[str, Any]) -> ParsedReview | None:
    parsed = review_from_dict(data)
    return None if parsed is None else (*parsed, None)


def _aide_reader(node: NodeView) -> ReviewReader:
    """AIDE's reading of a review of `node`: its verdict (the model says so, the run raised, or
    no float metric is buggy) and the metric's direction."""
    def read(data: dict[str, Any]) -> ParsedReview | None:
        review = aide_review(data)
        if review is None:
            return None
        return review.verdict(node.exc_type), review.summary, review.metric, review.lower_is_better
    return read


def _record(calls: list[LlmCall], hit: RuleHit, attempt: int) -> None:
    """The rule the reply hit, on the call that brought the reply (its llm_call event's `check`)."""
    if calls:
        calls[-1].check = hit.payload(attempt)


def _to_run(flawed: list[tuple[str, str]], failed: str | None) -> tuple[str, str]:
    """Of the flawed complete replies, the one that runs: the last that is not the `failed` code
    handed back (that one would fail again the same way and teach the next step nothing)."""
    frame = scaffold.load()
    new = [f for f in flawed
           if not failed or not _ast_retried(lambda code: reply_flaws.repeats(frame.assemble(code), failed), f[1])]
    return (new or flawed)[-1]


AST_TRIES = 3


def _ast_retried(fn: Callable[..., T], *args: Any) -> T:
    """fn(*args), again after a SystemError "AST constructor recursion depth mismatch": CPython
    3.11's ast raises it spuriously when another thread converts an AST at the same time
    (python/cpython#106905; black, a dependency, does), and a step was lost to it."""
    for _ in range(AST_TRIES - 1):
        try:
            return fn(*args)
        except SystemError:
            continue
    return fn(*args)


def _no_code_reason(content: str, unusable: list[str]) -> str:
    if len(unusable) == CODE_ATTEMPTS:
        return f"no usable code in {CODE_ATTEMPTS} replies: " + "; ".join(dict.fromkeys(unusable))
    start = shorten(content, 160) if content.strip() else "(empty)"
    why = f"the reply held no usable Python code ({CODE_ATTEMPTS} replies"
    why += f"; also: {'; '.join(dict.fromkeys(unusable))})" if unusable else ")"
    return f"{why}; the last began: {start}"


def _review_from_output(node: NodeView, why: str, calls: list[LlmCall]) -> Review:
    """No usable review from the model: judged from the run (its status, the AUC it printed)."""
    output = node.output if isinstance(node.output, str) else ""
    metric = parse_claimed_metric(output)
    is_bug = bool(node.exc_type) or node.status != "ok" or metric is None
    return Review(
        is_bug=is_bug,
        summary=f"No review from the model ({why}); judged from the execution output.",
        claimed_metric=metric,
        llm_calls=calls,
    )


def _review_from_tools(tool_calls: list[dict[str, Any]], read: ReviewReader) -> ParsedReview | None:
    ordered = sorted(tool_calls, key=lambda t: t.get("name") != "submit_review")
    for tc in ordered:
        args = tc.get("arguments")
        data = args if isinstance(args, dict) else parse_json_object(str(args or ""))
        if data:
            parsed = read(data)
            if parsed is not None:
                return parsed
    return None
