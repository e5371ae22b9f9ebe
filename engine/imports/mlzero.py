"""Import an MLZero (autogluon-assistant) run folder as a befair session.

What a run folder holds: info_logs.txt (every INFO line; logs.txt has the BRIEF ones only),
token_usage.json (tokens per LLM session), best_run_<k> (the path of the best node's folder),
node_<k>/ for the iterations MLZero kept (generated_code.py, states/ with each agent's prompt and
response), node_init/ and states/ for the work before the search (data perception, task
description, tool selection).

Mapping: MCTS iteration i (1-based) is MLZero's node i-1 and befair's node i. A node's parent
and stage come from the lines MLZero logs while creating it: "creating evolve node from root"
(a draft), "Creating evolve node from Node k" (an improvement of k), "Debug attempts on parent
node k" / "Replaced debug origin node k with successful debug node j" (a debug of k). Its status
is the executer's planner decision (SUCCESS: ok, FIX: buggy), its claimed metric the logged
validation score, its review the error summary. The code is attached when the iteration's
folder survived (MLZero deletes the folders of nodes it no longer needs).

Tokens: token_usage.json's single-turn sessions (retriever, reranker, executer, error analyzer,
...) are stamped with their start time, so each belongs to the iteration running then; the two
multi-turn sessions (python and bash coder) span the whole search and stay with the run, as do
the sessions before the first iteration. Each becomes an llm_call event, with the prompt and the
reply attached where the run folder still has them. Without token_usage.json the run's total
from the log ("Total tokens — input: …, output: …") is recorded instead.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engine.agent.session_config import SessionConfig
from engine.errors import DataError
from engine.imports.common import (
    Clock,
    RunTag,
    audit_payload,
    emit_end,
    emit_published,
    guarded_import,
    head_tail,
    number,
    read_text,
)
from engine.imports.run_names import level_of
from engine.session import event_types as et
from engine.task import LEVELS

if TYPE_CHECKING:
    from engine.imports.predictions import ScoredPredictions
    from engine.session.store import SessionStore, SessionWriter

CODER = {"name": "mlzero-import", "label": "imported MLZero run", "simulated": False}
OUTPUT_KEEP = 16_000     # characters of a node's stdout/stderr kept (head + tail)
MESSAGE_KEEP = 200_000   # characters of one attached prompt or reply kept (head + tail)
LOG_FILES = ("info_logs.txt", "logs.txt")
TOKENS_FILE = "token_usage.json"
RUN_LEVEL = -1           # MLZero's "node" of the work before the first iteration

_RECORD = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d) +([A-Z]+) +\[([^\]]*)\] (.*)$")
_ITERATION = re.compile(r"Starting MCTS iteration (\d+)/(\d+)")
_FROM_ROOT = re.compile(r"creating \w+ node from root", re.IGNORECASE)
_FROM_NODE = re.compile(r"Creating (\w+) node from Node (\d+)")
_DEBUG_PARENT = re.compile(r"Debug attempts on parent node (\d+)")
_DEBUG_REPLACED = re.compile(r"Replaced debug origin node (\d+) with successful debug node (\d+)")
_DECISION = re.compile(r"Planner decision: (\w+)")
_SCORE = re.compile(r"^Validation score: (\S+)")
_ERROR = re.compile(r"^Error summary: (.*)", re.DOTALL)
_EXEC_START = "ExecuterAgent: executing code"
_EXEC_END = "ExecuterAgent: execution finished"
_BEST = re.compile(r"Best node: (\d+) with validation score (\S+)")
_MODEL = re.compile(r"Using \w+ model: (\S+)")
_TOTAL = re.compile(r"Total tokens\D+(\d+)\D+(\d+)\D+(\d+)")
_SAVING = re.compile(r"^Saving (.+?)\.\.\.$")
_SESSION = re.compile(r"^(single_turn|multi_turn)_(.+)_(\d{14})$")
_STATE_FILE = re.compile(r"^(?P<agent>.+?)_(?P<kind>prompt|response)(?:_[0-9a-f]{4})?\.txt$")
_FILE_AGENT = {"bash_executer": "executer", "python_executer": "executer"}


def _stamp(text: str, form: str = "%Y-%m-%d %H:%M:%S") -> float:
    """A log time as unix seconds (read as UTC: the study's machine time zone is not recorded)."""
    return datetime.strptime(text, form).replace(tzinfo=UTC).timestamp()


@dataclass
class MlzNode:
    """One MCTS iteration as MLZero logged it."""
    index: int                         # MLZero's node number (iteration - 1)
    started: float
    parent: int | None = None
    stage: str = "draft"
    plan: str = ""
    decision: str | None = None
    score: float | None = None
    error: str | None = None
    exec_started: float | None = None
    exec_finished: float | None = None

    @property
    def status(self) -> str:
        if self.decision is None:
            return "interrupted"
        return "ok" if self.decision.upper() == "SUCCESS" else "buggy"


@dataclass
class MlzLog:
    nodes: list[MlzNode] = field(default_factory=list)
    budget: int | None = None
    model: str | None = None
    best: int | None = None
    total: tuple[int, int] | None = None         # (input, output) from the log's last line
    saved: list[tuple[str, float]] = field(default_factory=list)   # (path as logged, when)
    started: float | None = None
    data_folder: str | None = None


def _records(text: str) -> list[tuple[float, str]]:
    out: list[tuple[float, list[str]]] = []
    for line in text.splitlines():
        m = _RECORD.match(line)
        if m:
            out.append((_stamp(m.group(1)), [m.group(4)]))
        elif out:
            out[-1][1].append(line)
    return [(t, "\n".join(lines)) for t, lines in out]


def read_mlzero_log(path: str | Path) -> MlzLog:
    """The search tree, decisions, scores and saved files an MLZero log records."""
    log = MlzLog()
    node: MlzNode | None = None
    for t, msg in _records(Path(path).read_text(encoding="utf-8", errors="replace")):
        log.started = t if log.started is None else log.started
        if m := _ITERATION.search(msg):
            node = MlzNode(index=int(m.group(1)) - 1, started=t)
            log.nodes.append(node)
            log.budget = int(m.group(2))
        elif node is None:
            _before_search(log, msg)
        else:
            _in_iteration(log, node, t, msg)
        if (s := _SAVING.match(msg)) is not None:
            log.saved.append((s.group(1), t))
    return log


def _before_search(log: MlzLog, msg: str) -> None:
    if (m := _MODEL.search(msg)) and log.model is None:
        log.model = m.group(1)
    elif msg.startswith("Analyzing folder: ") and log.data_folder is None:
        log.data_folder = msg.split(": ", 1)[1].strip()


def _in_iteration(log: MlzLog, node: MlzNode, t: float, msg: str) -> None:
    if _FROM_ROOT.search(msg):
        node.parent, node.stage, node.plan = None, "draft", msg
    elif m := _FROM_NODE.search(msg):
        node.parent, node.stage, node.plan = int(m.group(2)), "improve", msg
    elif m := _DEBUG_PARENT.search(msg):
        node.parent, node.stage = int(m.group(1)), "debug"
    elif (m := _DEBUG_REPLACED.search(msg)) and int(m.group(2)) == node.index:
        node.parent, node.stage = int(m.group(1)), "debug"
    elif m := _DECISION.search(msg):
        node.decision = m.group(1)
    elif m := _SCORE.match(msg):
        node.score = number(m.group(1))
    elif m := _ERROR.match(msg):
        node.error = m.group(1).strip()
    elif msg.startswith(_EXEC_START):
        node.exec_started = t
    elif msg.startswith(_EXEC_END):
        node.exec_finished = t
    elif m := _BEST.search(msg):
        log.best = int(m.group(1))
    elif m := _TOTAL.search(msg):
        log.total = (int(m.group(1)), int(m.group(2)))


# --------------------------------------------------------------------------- tokens and calls


@dataclass
class MlzCall:
    """One LLM session of token_usage.json, or one prompt/response pair a folder kept."""
    agent: str
    tokens_in: int = 0
    tokens_out: int = 0
    when: float | None = None
    multi_turn: bool = False
    prompt: Path | None = None
    response: Path | None = None
    note: str | None = None

    def payload(self, node_id: int | None) -> dict[str, Any]:
        messages = [{"role": "user", "content": read_text(self.prompt, MESSAGE_KEEP)}] if self.prompt else []
        out: dict[str, Any] = {
            "node_id": node_id, "role": self.agent, "model": "", "tokens_in": self.tokens_in,
            "tokens_out": self.tokens_out, "latency_s": 0.0, "cost": 0.0, "ok": True, "error": None,
            "tokens_estimated": False, "messages": messages,
            "reply": read_text(self.response, MESSAGE_KEEP) if self.response else "", "source": TOKENS_FILE}
        if self.note:
            out["tokens_note"] = self.note
        return out


def read_token_usage(path: str | Path) -> tuple[list[MlzCall], tuple[int, int]]:
    """(one call per LLM session, (input, output) of the file's total)."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise DataError(f"cannot read {path}: {exc}") from None
    if not isinstance(data, dict):
        raise DataError(f"{path} is not MLZero's token_usage.json (not a JSON object)")
    calls = []
    for key, usage in (data.get("sessions") or {}).items():
        m = _SESSION.match(str(key))
        calls.append(MlzCall(agent=m.group(2) if m else str(key), tokens_in=int(usage.get("input_tokens") or 0),
                             tokens_out=int(usage.get("output_tokens") or 0),
                             when=_stamp(m.group(3), "%Y%m%d%H%M%S") if m else None,
                             multi_turn=bool(m and m.group(1) == "multi_turn")))
    total = data.get("total") or {}
    declared = (int(total.get("total_input_tokens") or 0), int(total.get("total_output_tokens") or 0))
    return calls, declared


def _state_pairs(run_dir: Path, log: MlzLog) -> dict[int, list[MlzCall]]:
    """Prompt/response pairs still in the folder, per MLZero node (RUN_LEVEL: node_init, states),
    in the order the log saved them (else by name)."""
    order = {_saved_key(Path(p)): i for i, (p, _) in enumerate(log.saved)}
    pairs: dict[int, list[MlzCall]] = {}
    for states in sorted(run_dir.glob("node_*/states")) + [run_dir / "states"]:
        owner = states.parent.name.removeprefix("node_") if states.parent != run_dir else "init"
        index = int(owner) if owner.isdigit() else RUN_LEVEL
        files = sorted((f for f in states.glob("*.txt") if _STATE_FILE.match(f.name)),
                       key=lambda f: (order.get(_saved_key(f), len(order)), f.name))
        open_prompts: dict[str, MlzCall] = {}
        for f in files:
            m = _STATE_FILE.match(f.name)
            assert m is not None  # filtered above
            if m["kind"] == "prompt":
                call = MlzCall(agent=m["agent"], prompt=f)
                pairs.setdefault(index, []).append(call)
                open_prompts[m["agent"]] = call
            elif m["agent"] in open_prompts:
                open_prompts.pop(m["agent"]).response = f
    return pairs


def _saved_key(path: Path) -> tuple[str, str]:
    """(node folder or "", file name): a state file's identity in the log and on disk alike."""
    folder = path.parent.parent.name
    return (folder if folder.startswith("node_") else "", path.name)


def _assign_calls(log: MlzLog, sessions: list[MlzCall], pairs: dict[int, list[MlzCall]]
                  ) -> dict[int, list[MlzCall]]:
    """The llm_call records of each MLZero node (RUN_LEVEL: the run's), prompts attached."""
    starts = [(n.started, n.index) for n in log.nodes]
    out: dict[int, list[MlzCall]] = {}
    unused = {k: list(v) for k, v in pairs.items()}
    for call in sorted(sessions, key=lambda c: (c.when or 0.0, c.agent)):
        owner = RUN_LEVEL
        if not call.multi_turn and call.when is not None:
            owner = max((i for s, i in starts if s <= call.when), default=RUN_LEVEL)
        want = _FILE_AGENT.get(call.agent, call.agent)
        match = next((p for p in unused.get(owner, []) if p.agent == want), None)
        if match is not None and not call.multi_turn:
            unused[owner].remove(match)
            call.prompt, call.response = match.prompt, match.response
        out.setdefault(owner, []).append(call)
    coder_totals = {c.agent: c.tokens_in + c.tokens_out for c in sessions if c.multi_turn}
    for owner, rest in unused.items():
        for pair in (p for p in rest if p.response is not None):  # a prompt with no reply is no call
            total = coder_totals.get(pair.agent)
            pair.note = (f"counted in the run's multi-turn {pair.agent} session ({total:,} tokens over all iterations)"
                         if total is not None else "its tokens are in the run's total, not attributable to this call")
            out.setdefault(owner, []).append(pair)
    return out


# --------------------------------------------------------------------------- the import


@dataclass
class _Run:
    path: Path
    log_path: Path
    log: MlzLog
    calls: dict[int, list[MlzCall]]
    tokens: tuple[int, int]
    final: int | None                 # MLZero's node index of the best run


def find_log(path: Path) -> Path:
    for name in LOG_FILES:
        if (path / name).is_file():
            return path / name
    raise DataError(f"{path} is not an MLZero run folder (no {' or '.join(LOG_FILES)})")


def _best_run(path: Path, log: MlzLog) -> int | None:
    for link in sorted(path.glob("best_run*")):
        target = read_text(link).strip() if link.is_file() else str(link.resolve())
        m = re.search(r"node_(\d+)\s*$", target)
        if m:
            return int(m.group(1))
    return log.best


def _read_run(path: str | Path) -> _Run:
    run_dir = Path(path)
    if not run_dir.is_dir():
        raise DataError(f"{run_dir} is not a folder (an MLZero run is a folder)")
    log_path = find_log(run_dir)
    log = read_mlzero_log(log_path)
    if not log.nodes:
        raise DataError(f"{log_path} records no MCTS iteration, so there is no node to import")
    tokens_file = run_dir / TOKENS_FILE
    if tokens_file.is_file():
        sessions, declared = read_token_usage(tokens_file)
    else:
        tin, tout = log.total or (0, 0)
        note = f"{TOKENS_FILE} is missing: the run's total from {log_path.name}"
        sessions = [MlzCall(agent="run total", tokens_in=tin, tokens_out=tout, multi_turn=True, note=note)]
        declared = (tin, tout)
    calls = _assign_calls(log, sessions, _state_pairs(run_dir, log))
    return _Run(path=run_dir, log_path=log_path, log=log, calls=calls, tokens=declared, final=_best_run(run_dir, log))


def import_mlzero(store: SessionStore, path: str | Path, *, session_id: str | None = None,
                  predictions: str | Path | None = None, metadata: str | Path | None = None,
                  tag: RunTag | None = None) -> str:
    """Import one MLZero run folder; returns the new session's id (see the module doc)."""
    from engine.imports.predictions import published_scores

    scored = published_scores(predictions, metadata)
    run = _read_run(path)
    return guarded_import(store, run.path,
                          lambda created: _import(store, run, session_id, tag or RunTag(), scored, created))


def _session_config(run: _Run, tag: RunTag) -> tuple[dict[str, Any], str]:

    level = tag.level or level_of(run.path.name) or level_of(Path(run.log.data_folder or "").name)
    config = SessionConfig(
        level=level or "custom", custom_text=None if level else "(no instruction level recorded in the MLZero run)",
        steps=run.log.budget or len(run.log.nodes), best="claimed", coder="mlzero-import", model=run.log.model,
        failure_rate=0.0, data=run.log.data_folder or "mlzero", **tag.config_fields(),
        extra={**tag.extra, "mlzero": {"folder": str(run.path), "log": str(run.log_path),
                                       "tokens": {"input": run.tokens[0], "output": run.tokens[1],
                                                  "total": sum(run.tokens)},
                                       "best_node": run.final}},
    ).to_dict()
    return config, LEVELS[level] if level else str(config["custom_text"])


def _import(store: SessionStore, run: _Run, session_id: str | None, tag: RunTag,
            scored: ScoredPredictions | None, created: list[str]) -> str:
    config, instruction = _session_config(run, tag)
    clock = Clock(run.log.started or run.log.nodes[0].started)
    writer = store.create_session(
        config, instruction=instruction, coder={**CODER, "model": run.log.model},
        data={"kind": "mlzero-import", "path": str(run.path), "summary": {"nodes": len(run.log.nodes)}},
        session_id=session_id, origin="import", ts=clock.now)
    created.append(writer.session_id)
    for call in run.calls.get(RUN_LEVEL, []):
        writer.emit(et.LlmCall.from_payload(call.payload(None)), ts=clock.at())
    for node in run.log.nodes:
        _emit_node(writer, run, node, clock)
    final = run.final + 1 if run.final is not None and run.final + 1 in writer.state.nodes else None
    emit_published(writer, final, scored, clock)
    emit_end(writer, final, f"imported from {run.path}", tag, clock,
             what="MLZero's best node by its validation score")
    return writer.session_id


def _node_texts(run: _Run, index: int) -> tuple[str, str, str]:
    """(code, stdout, stderr) a node's folder kept ("" where MLZero removed it)."""
    folder = run.path / f"node_{index}"
    code = next((read_text(p) for p in (folder / "generated_code.py", folder / "states" / "python_code.py")
                 if p.is_file()), "")
    return code, read_text(folder / "states" / "stdout", OUTPUT_KEEP), read_text(folder / "states" / "stderr",
                                                                                 OUTPUT_KEEP)


def _emit_node(writer: SessionWriter, run: _Run, node: MlzNode, clock: Clock) -> None:
    node_id = node.index + 1
    parent = node.parent + 1 if node.parent is not None and node.parent + 1 in writer.state.nodes else None
    code, stdout, stderr = _node_texts(run, node.index)
    plan = node.plan or f"{node.stage} (MLZero iteration {node_id})"
    if not code:
        plan += "\n[the code of this iteration was not kept: MLZero removed its folder]"
    writer.emit(et.NodeCreated(node_id=node_id, parent_id=parent, step=node_id, stage=node.stage, plan=plan,
                               guidance_ids=[], components=None, origin="import", mlzero_node=node.index),
                ts=clock.at(node.started))
    for call in run.calls.get(node.index, []):
        writer.emit(et.LlmCall.from_payload(call.payload(node_id)), ts=clock.at())
    writer.emit(et.Code(node_id=node_id, code=code), ts=clock.at())
    writer.emit(et.ExecStarted(node_id=node_id, workdir=""), ts=clock.at(node.exec_started))
    for text, stream in ((stdout, "stdout"), (stderr, "stderr")):
        if text:
            writer.emit(et.Output(node_id=node_id, text=text, stream=stream), ts=clock.at())
    head, tail, truncated = head_tail(stdout + stderr, OUTPUT_KEEP)
    took = (node.exec_finished - node.exec_started
            if node.exec_started is not None and node.exec_finished is not None else None)
    writer.emit(et.ExecFinished(node_id=node_id, status=node.status, exit_code=None, exec_time=took, exc_type=None,
                                output_head=head, output_tail=tail, truncated=truncated),
                ts=clock.at(node.exec_finished))
    writer.emit(et.Review(node_id=node_id, is_bug=node.status != "ok",
                          summary=node.error or f"planner decision: {node.decision or 'none (run ended)'}",
                          claimed_metric=node.score), ts=clock.at())
    if code:
        audited = audit_payload(code, stdout + stderr, not (stdout or stderr), node.score, node.status,
                                source="mlzero log")
        if audited is not None:
            writer.emit(et.Audited.from_payload({"node_id": node_id, **audited}), ts=clock.at())
