"""The search loop: one step at a time, every decision and result an event.

    writer = start_session(store, SessionConfig(level="fairness-methods", steps=20))  # session_setup
    state = run(store, writer.session_id)              # blocking; returns the final state
    state = resume(store, session_id)                  # after a crash / kill -9 / stop (recovery)

Per step: consume steering commands (pause, resume, stop, guide, expand, prune, set_budget),
decide (engine.agent.policy), ask the coder for code, run it (streaming output, polling the
commands table so a stop interrupts the running process), review it, evaluate it on the held-out
validation and test sets (a separate process; labels never enter the node's process) and audit
it. At the end the final choice by each criterion is recorded, then session_finished.

Commands are also consumed while a step runs (the coder thinking, the pipeline running, the
harness scoring), so guidance, pause and stop take effect within ~poll_interval: pause stops
new nodes from being created (the running one finishes), stop interrupts the running one.
"""
from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar, cast

from engine.agent import context
from engine.agent.coder_registry import make_coder
from engine.agent.commands import apply_command
from engine.agent.contract import NO_METRIC, NO_PREDICT, contract_problem
from engine.agent.policy import Decision, decide, policy_rng
from engine.agent.session_config import SessionConfig
from engine.agent.session_setup import open_session_workspace
from engine.agent.signals import INTERRUPTED, SIGNALLED, raise_if_signalled
from engine.agent.task_protocol import task_protocol
from engine.coders.llm.config import over_budget
from engine.coders.llm.prompts_be_fair import aide_closing_line
from engine.coders.llm.scaffold_audit import audit_pipeline
from engine.coders.llm.stream_relay import StreamRelay
from engine.coders.protocol import Coder, CoderContext, CoderReply, LlmCall, NodeView, Review, missing_members
from engine.data.be_fair_layout import AgentWorkspace
from engine.errors import BefairError
from engine.evaluation.audit import check_claim, parse_claimed_metric
from engine.evaluation.evaluator import LabelsChanged, NodeEvaluator, heldout_splits
from engine.evaluation.paired import Comparer
from engine.evaluation.paired import changed as paired_changed
from engine.execution import ExecResult, Executor, Job, LocalExecutor, Sandbox, prepare_node_dir, prepare_session_input
from engine.execution.sandbox import RunSpec, guard_outside
from engine.paths import cache_dir, runs_dir, session_run_dir
from engine.session import event_types as et
from engine.session import events as ev
from engine.session import live_reply, selection
from engine.session.active_time import ActiveClock, clock_runs_when_paused
from engine.session.heartbeat import Heartbeat
from engine.session.redact import Redactor
from engine.session.state import NodeState, SessionState
from engine.session.store import SessionStore, SessionWriter

EventHook = Callable[[ev.Event, SessionState], None]
T = TypeVar("T")


# the summary an `evaluated` event carries for a split that was not scored (engine.session.events)
UNSCORED = {"group_auc": {}, "group_auc_reason": {}, "n": 0}


# --------------------------------------------------------------------------- the runner


class Runner:
    """Drives one session's search loop (see the module docstring)."""

    def __init__(
        self,
        store: SessionStore,
        session_id: str,
        *,
        coder: Coder | None = None,
        executor: Executor | None = None,
        on_event: EventHook | None = None,
        workspace: AgentWorkspace | None = None,
        writer: SessionWriter | None = None,
        poll_interval: float = 0.2,
        pause_poll: float = 0.1,
    ):
        self.store = store
        self.session_id = session_id
        self.writer = writer or store.writer(session_id)
        if not self.writer.state.config:
            raise BefairError(f"session {session_id} has no session_started event")
        self.config = SessionConfig.from_dict(self.writer.state.config)
        self.protocol = task_protocol(self.config.protocol)
        self.coder: Coder = coder if coder is not None else make_coder(self.config, **self._llm_settings())
        if missing := missing_members(self.coder):
            raise BefairError(f"the coder {type(self.coder).__name__} lacks {', '.join(missing)}: "
                              "subclass engine.coders.protocol.CoderBase, which has the defaults")
        self.sandbox = Sandbox.create(self.config.sandbox)
        self.executor: Executor = executor if executor is not None else LocalExecutor(sandbox=self.sandbox)
        self.on_event = on_event
        self.workspace = workspace if workspace is not None else open_session_workspace(self.state, self.config)
        self.evaluator = self._evaluator()
        if self.sandbox.isolated:  # the runtime's folders must not expose what the sandbox hides
            guard_outside(RunSpec(cwd=Path("/")), [store.path, cache_dir(),
                                                   *[labels for _, labels in heldout_splits(self.workspace).values()]])
        self.writer.redactor = Redactor(list(self.coder.secrets))
        self.runs_root = runs_dir(store.path)
        self.stream_relay = self._relay_streams()
        prepare_session_input(self.runs_root, session_id, Path(self.workspace.agent_input))  # no-op when there
        self.poll_interval = poll_interval
        self.pause_poll = pause_poll
        self.stop = False
        self.interrupt = False
        self.timings: list[dict[str, float]] = []
        self._preview: str | None = None
        self._comparer: Comparer | None = None
        self._cost_paused = False
        self._last_poll = 0.0
        self._time_up = False
        # the time limit counts only the time runners worked (and, where the study says so, not paused)
        self.active = ActiveClock(count_paused=clock_runs_when_paused(self.writer.state.config))
        for event in store.events(session_id):
            self.active.add(event)

    def _relay_streams(self) -> StreamRelay:
        """A coder that streams its replies (the LLM coder) hands them to the relay as they come."""
        relay = StreamRelay(live_reply.live_path(self.store.path, self.session_id))
        self.coder.attach_stream(relay, relay.progress)
        return relay

    def _evaluator(self) -> NodeEvaluator:
        extra = self.config.extra if isinstance(self.config.extra, dict) else {}
        timeout = self.config.eval_timeout or extra.get("eval_timeout") or self.config.step_timeout
        return NodeEvaluator(self.workspace, sandbox=self.sandbox,
                             digests=(self.state.data or {}).get("label_sha256"), timeout=float(timeout),
                             memory_limit_mb=int(self.config.memory_limit_mb), device=extra.get("device"),
                             threads=int(extra.get("threads", 2)), operating_point=self.config.operating_point)

    def _llm_settings(self) -> dict[str, Any]:
        llm = self.config.extra.get("llm") if isinstance(self.config.extra, dict) else None
        return {"base_url": llm.get("base_url")} if isinstance(llm, dict) else {}

    @property
    def state(self) -> SessionState:
        return self.writer.state

    # -- events ---------------------------------------------------------------------------
    def emit(self, typed: et.TypedEvent, *, consumes: dict[str, Any] | None = None,
             result: str = "applied", predictions: dict[str, float] | None = None) -> ev.Event:
        event = self.writer.emit(typed, consumes=consumes, result=result, predictions=predictions)
        self.active.add(event)
        if self.on_event is not None:
            try:
                self.on_event(event, self.state)
            except Exception:  # a display hook must never stop the search
                pass
        return event

    # -- steering commands ----------------------------------------------------------------
    def poll_commands(self, *, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self._last_poll < self.poll_interval:
            return
        self._last_poll = now
        for cmd in self.store.pending_commands(self.session_id):
            apply_command(self, cmd)
        self._check_time_limit()

    def _check_time_limit(self) -> None:
        """At the session's time limit (a study's), stop as a human stop does, interrupting the
        running node; the session then ends finished, like one whose step budget is spent."""
        limit = self.config.time_limit_s
        if not limit or self._time_up or self.active.seconds(now=time.time()) < limit:
            return
        self._time_up = True
        self.emit(et.StopRequested(by="time limit", command_id=None, interrupt=True,
                                   reason=f"the session's time limit of {limit:g} s is reached"))
        self.stop = True
        self.interrupt = True

    def _flush_stream(self, *, final: bool = False) -> None:
        """At most one llm_stream event every STREAM_EVENT_INTERVAL s while a reply streams:
        offsets and times only (the text is in the side channel, and once in llm_call)."""
        step = self.state.agent_steps + 1
        self.stream_relay.step = step
        for role, stats in (self.stream_relay.finish() if final else self.stream_relay.take()):
            self.emit(et.LlmStream(role=role, step=step, **stats))

    def consume(self, cmd: dict[str, Any], result: str) -> None:
        self.writer.consume_command(cmd, result)

    def _wait_while_paused(self) -> None:
        while self.state.status == "paused" and not self.stop:
            time.sleep(self.pause_poll)
            self.poll_commands(force=True)

    def _background(self, fn: Callable[[], T]) -> T:
        """Run fn in a thread, consuming commands while it works (coder calls, evaluation)."""
        box: dict[str, Any] = {}

        def target() -> None:
            try:
                box["value"] = fn()
            except BaseException as exc:  # handed back to the caller's thread
                box["error"] = exc

        t = threading.Thread(target=target, daemon=True, name="befair-step")
        self.stream_relay.step = self.state.agent_steps + 1
        t.start()
        while True:
            t.join(self.poll_interval)
            if not t.is_alive():
                self._flush_stream(final=True)
                break
            raise_if_signalled()
            self._flush_stream()
            self.poll_commands()
        if "error" in box:
            raise box["error"]
        return cast(T, box.get("value"))

    # -- the loop -------------------------------------------------------------------------
    def run(self) -> SessionState:

        heartbeat = Heartbeat(self.store.path, self.session_id)  # sessions.heartbeat_at: this process lives
        heartbeat.start()
        try:
            while True:
                raise_if_signalled()
                self.poll_commands(force=True)
                self._wait_while_paused()
                if self.stop and self._time_up:
                    return self._finish("finished", f"time limit of {self.config.time_limit_s:g} s reached")
                if self.stop:
                    return self._finish("stopped", "stopped by a human")
                self._compare()  # a prune or the last step may have changed the leader
                decision = decide(self.state, policy_rng(self.config.seed, self.state.agent_steps), self.config)
                self.emit(et.PolicyDecision.from_payload(decision.payload()))
                if decision.action == "finish":
                    return self._finish("finished", decision.reason)
                self.step(decision)
                self._check_cost()
        except KeyboardInterrupt:
            SIGNALLED.clear()
            self._reload()
            self._mark_running_interrupted(INTERRUPTED)
            return self._finish("stopped", INTERRUPTED)
        except Exception as exc:
            self._reload()
            self._mark_running_interrupted(f"engine error: {type(exc).__name__}")
            self.emit(et.Error(message=f"{type(exc).__name__}: {exc}", node_id=None, where="runner"))
            self._finish("failed", f"{type(exc).__name__}: {exc}")
            raise
        finally:
            heartbeat.stop()

    def _reload(self) -> None:
        """Re-fold the state from the database: an exception inside a write (rolled back) may
        have left the in-memory state one event ahead."""
        self.writer.state = self.store.state(self.session_id)

    def _mark_running_interrupted(self, reason: str) -> None:
        for node in list(self.state.nodes.values()):
            if node.status in ("running", "queued"):
                self.emit(et.NodeInterrupted(node_id=node.node_id, reason=reason))

    def _check_cost(self) -> None:
        budget = self.coder.budget_usd or None  # 0: no budget
        if budget is not None and not self._cost_paused and over_budget(self.state.cost, budget):
            self._cost_paused = True
            self.emit(et.Paused(by="engine", command_id=None,
                                reason=f"LLM cost ${self.state.cost:.2f} reached the budget ${float(budget):.2f}"))

    # -- one step -------------------------------------------------------------------------
    def _context(self, parent_id: int | None) -> tuple[CoderContext, list[int]]:
        return context.coder_context(self.state, self.preview(), parent_id)

    def preview(self) -> str:
        if self._preview is None:
            agent_input = Path(self.workspace.agent_input)
            try:
                self._preview = self.protocol.data_preview(agent_input)
            except Exception:
                head = (agent_input / "skin_lesions.csv").read_text(errors="replace").splitlines()[:6]
                self._preview = "input/skin_lesions.csv (first rows):\n" + "\n".join(head) + "\ninput/images/*.jpg"
        return self._preview

    def node_view(self, node: NodeState, output: str | None = None) -> NodeView:
        return context.node_view(self.state, node, output)

    def step(self, decision: Decision) -> None:
        """One node: ask the coder, run its code, review it, evaluate it, audit it."""
        t0 = time.perf_counter()
        timing = {"coder": 0.0, "exec": 0.0, "review": 0.0, "eval": 0.0}
        parent = self.state.nodes.get(decision.node_id) if decision.node_id is not None else None
        ctx, guidance_ids = self._context(decision.node_id)
        reply = self._timed(timing, "coder", lambda: self._background(
            lambda: self._ask_coder(decision.action, ctx, parent)))
        if self.stop:  # stopped while the coder was thinking: record its calls, create nothing
            self._record_calls(reply.llm_calls, None)
            return
        node_id = self._create_node(decision, parent, reply, guidance_ids)
        if not reply.code:
            self._no_code(node_id, reply)
        else:
            code = reply.code
            result = self._timed(timing, "exec", lambda: self._run_node(node_id, code))
            review = self._timed(timing, "review", lambda: self._review_node(ctx, node_id, result))
            if result.status == "ok":
                self._timed(timing, "eval", lambda: self._evaluate(node_id, self._node_dir(node_id)))
            self._audit(node_id, code, review, result)
        self.timings.append({"total": time.perf_counter() - t0, **timing})

    @staticmethod
    def _timed(timing: dict[str, float], stage: str, fn: Callable[[], T]) -> T:
        t = time.perf_counter()
        try:
            return fn()
        finally:
            timing[stage] = time.perf_counter() - t

    def _record_calls(self, calls: list[LlmCall], node_id: int | None) -> None:
        for call in calls:
            self.emit(et.LlmCall.from_payload(_call_payload(call, node_id)))

    def _create_node(self, decision: Decision, parent: NodeState | None, reply: CoderReply,
                     guidance_ids: list[int]) -> int:
        node_id = max(self.state.nodes, default=0) + 1
        self.emit(et.NodeCreated(
            node_id=node_id, parent_id=parent.node_id if parent else None, step=self.state.agent_steps + 1,
            stage=decision.action, plan=reply.plan or "", guidance_ids=guidance_ids,
            components=reply.components, origin="agent",
        ))
        self._record_calls(reply.llm_calls, node_id)
        return node_id

    def _no_code(self, node_id: int, reply: CoderReply) -> None:
        why = reply.error or "the coder returned no code"
        # Nothing ran: no output was cut, no memory used, nothing sandboxed.
        self.emit(et.ExecFinished(node_id=node_id, status="buggy", exit_code=None, exec_time=0.0,
                                  exc_type="CoderError", output_head=f"No code to run: {why}\n", output_tail="",
                                  truncated=False, cut_chars=0, output_chars=0, peak_mem_mb=None,
                                  out_of_memory=False, sandboxed=False))
        self.emit(et.Review(node_id=node_id, is_bug=True, summary=f"No code: {why}", claimed_metric=None))

    def _node_dir(self, node_id: int) -> Path:
        return session_run_dir(self.runs_root, self.session_id) / f"node_{node_id}"

    def _run_node(self, node_id: int, code: str) -> ExecResult:
        self.emit(et.Code(node_id=node_id, code=code))
        node_dir = prepare_node_dir(self.runs_root, self.session_id, node_id, code)
        self.emit(et.ExecStarted(node_id=node_id, workdir=str(node_dir), sandbox=self.sandbox.mode))
        result = self._execute(node_id, node_dir)
        if self.protocol.closes_output:   # as AIDE's interpreter: the output ends with the run's time
            line = aide_closing_line(result.status, result.exec_time, self.config.step_timeout)
            result = dataclasses.replace(result, output_tail=result.output_tail + line,
                                         output_chars=result.output_chars + len(line))
        problem = contract_problem(code, result) if self.protocol.checks_contract else None
        if problem:
            result = dataclasses.replace(result, status="buggy", exc_type=problem)
        self.emit(et.ExecFinished.from_payload(result.to_payload(node_id)))
        return result

    def _review_node(self, ctx: CoderContext, node_id: int, result: ExecResult) -> Review:
        node = self.state.nodes[node_id]
        if result.exc_type in (NO_PREDICT, NO_METRIC):  # the contract failed: no review call needed
            review = Review(is_bug=True, summary=result.exc_type, claimed_metric=None)
        elif result.status != "ok" and not self.protocol.reviews_crashes:
            # a crash says what went wrong itself: no review call (a slow local model spends a minute
            # reading the prompt); the debug step gets the traceback. AIDE (be-fair) reviews them all.
            review = Review(is_bug=True, summary=_crash_summary(result), claimed_metric=None)
        else:
            review = self._background(lambda: self._review(ctx, self.node_view(node, result.output)))
        self._record_calls(review.llm_calls, node_id)
        self.emit(et.Review(node_id=node_id, is_bug=bool(review.is_bug), summary=review.summary,
                            claimed_metric=review.claimed_metric,
                            lower_is_better=et.ABSENT if review.lower_is_better is None else review.lower_is_better))
        return review

    def _ask_coder(self, action: str, ctx: CoderContext, parent: NodeState | None) -> CoderReply:
        try:
            if action == "draft":
                reply = self.coder.draft(ctx)
            # improve and debug always have a parent; were it None, node_view would raise in here
            # and the step would be a failed node, as for any coder error
            elif action == "improve":
                reply = self.coder.improve(ctx, self.node_view(cast(NodeState, parent)))
            else:
                reply = self.coder.debug(ctx, self.node_view(cast(NodeState, parent)))
        except Exception as exc:  # a coder must not raise; if one does, the step is a failed node
            return CoderReply(plan="", code=None, error=f"the coder raised {type(exc).__name__}: {exc}")
        if not isinstance(reply, CoderReply):
            return CoderReply(plan="", code=None, error=f"the coder returned {type(reply).__name__}")
        return reply

    def _review(self, ctx: CoderContext, view: NodeView) -> Review:
        error = "the coder returned no Review"
        try:
            review = self.coder.review(ctx, view)
        except Exception as exc:
            review = None
            error = f"{type(exc).__name__}: {exc}"
        if isinstance(review, Review):
            return review

        claimed = parse_claimed_metric(view.output)
        return Review(is_bug=view.status != "ok" or claimed is None,
                      summary=f"(review failed: {error}; read the output instead)",
                      claimed_metric=claimed)

    def _execute(self, node_id: int, node_dir: Path) -> ExecResult:
        extra = self.config.extra if isinstance(self.config.extra, dict) else {}
        job = Job(node_id=node_id, workdir=node_dir, timeout=float(self.config.step_timeout),
                  memory_limit_mb=int(self.config.memory_limit_mb), output_cap=int(self.config.output_cap),
                  threads=int(extra.get("threads", 2)), device=extra.get("device"))
        handle = self.executor.submit(job)
        cancelled = False
        try:
            for batch in self.executor.stream(handle):
                with self.writer.batch():  # one transaction per batch of output lines
                    for chunk in batch:
                        if chunk.text:
                            self.emit(et.Output(node_id=node_id, text=chunk.text, stream=chunk.stream))
                self.poll_commands()
                raise_if_signalled()
                if self.stop and self.interrupt and not cancelled:
                    self.executor.cancel(handle)
                    cancelled = True
        except BaseException:
            self.executor.cancel(handle)
            raise
        return self.executor.result(handle)

    def _evaluate(self, node_id: int, node_dir: Path) -> None:
        """Validation and test scores, measured here; LabelsChanged propagates and stops the session."""
        try:
            outcomes = self._background(lambda: self.evaluator.evaluate(node_dir))
        except LabelsChanged:
            raise
        except BefairError as exc:
            self.emit(et.Error(message=f"evaluation failed: {exc}", node_id=node_id, where="evaluation"))
            return
        for split, outcome in outcomes.items():
            blinded = bool(self.config.blind_test) and split == "test"
            self.emit(et.Evaluated(node_id=node_id, split=split, ok=outcome.ok, verdict=outcome.verdict,
                                   reason=outcome.reason, summary=outcome.summary or dict(UNSCORED),
                                   medfair=outcome.medfair, blinded=blinded),
                      predictions=outcome.predictions if outcome.ok else None)

    def _compare(self) -> None:
        """Record which nodes cannot be told apart from each criterion's leader (a `compared`
        event), when that changed. Without a validation split (be-fair) there is nothing to compare."""
        if self._comparer is None:
            labels = heldout_splits(self.workspace).get("validation")
            if labels is None:
                return
            self._comparer = Comparer(labels[1], lambda nid: self.store.predictions(self.session_id, nid, "validation"))
        payload = self._comparer.payload(self.state)
        if paired_changed(self.state.comparisons.get("validation"), payload):
            self.emit(et.Compared.from_payload(payload))

    def _audit(self, node_id: int, code: str, review: Review, result: ExecResult) -> None:

        audit = audit_pipeline(code)
        node = self.state.nodes[node_id]
        measured = node.val_auc
        claim = check_claim(review.claimed_metric, measured, ran_ok=result.status == "ok", output=result.output)
        # "not audited: …" in the note: its flags are unknown, not "no"
        self.emit(et.Audited(node_id=node_id, flags=dict(audit.flags), evidence=dict(audit.evidence), claim=claim,
                             note=audit.note or et.ABSENT))

    # -- the end --------------------------------------------------------------------------
    def final_choice(self) -> dict[str, Any]:
        return selection.final_choice(self.state)

    def _finish(self, status: str, reason: str) -> SessionState:
        try:
            self._compare()
            self.emit(et.FinalChoice.from_payload(self.final_choice()))
        except Exception as exc:  # the final choice must not keep a session from finishing
            self.emit(et.Error(message=f"final choice failed: {exc}", node_id=None, where="final_choice"))
        self.emit(et.SessionFinished(status=status, reason=reason))
        # commands nobody will act on now: leave them pending (a resume picks them up)
        return self.state


def _crash_summary(result: ExecResult) -> str:
    """A failed run in one line: its status and the last line of its output (the exception)."""
    lines = [ln.strip() for ln in (result.output or "").splitlines() if ln.strip()]
    what = {"timeout": "timed out", "buggy": "failed"}.get(result.status, result.status)
    return f"The run {what}" + (f": {lines[-1][:300]}" if lines else f" ({result.exc_type or 'no output'})")


def _call_payload(call: LlmCall, node_id: int | None) -> dict[str, Any]:
    """An llm_call event: usage, and what the agent was told and answered (see events.py)."""
    return {"node_id": node_id, "role": call.role, "model": call.model, "tokens_in": int(call.tokens_in),
            "tokens_out": int(call.tokens_out), "latency_s": float(call.latency_s), "cost": float(call.cost),
            "ok": bool(call.ok), "error": call.error, "tokens_estimated": bool(call.tokens_estimated),
            "messages": list(call.messages or []), "reply": str(call.reply or ""),
            **{k: getattr(call, k) for k in ("first_token_s", "tokens_per_s", "server_model", "check")
               if getattr(call, k) is not None}}


# --------------------------------------------------------------------------- entry points


def run(store: SessionStore, session_id: str, *, coder: Coder | None = None, executor: Executor | None = None,
        on_event: EventHook | None = None, workspace: AgentWorkspace | None = None,
        writer: SessionWriter | None = None, **runner_kw: Any) -> SessionState:
    """Run a session's search to the end of its budget (or a stop). Blocking."""
    runner = Runner(store, session_id, coder=coder, executor=executor, on_event=on_event, workspace=workspace,
                    writer=writer, **runner_kw)
    return runner.run()


__all__ = ["EventHook", "Runner", "run"]
