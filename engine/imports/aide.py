"""Import an AIDE run (a log directory with journal.json, config.yaml and, when present, aide.log
and best_solution.py; or a journal.json) as a befair session, so the console can show, replay
and compare it like a live one.

Mapping: node ids are renumbered 1..N in (step, ctime) order (the AIDE ids are kept in each
node_created payload as `aide_id`); edges come from `node2parent` (else a node's own `parent`);
the stage follows the tree (no parent -> draft; buggy parent -> debug; else improve); the status
from is_buggy / exc_type (TimeoutError -> timeout); the claimed metric from `metric` (a dict
{"value", "maximize"}, a number or null); event timestamps from each node's ctime. The
instruction is config.yaml's `goal`, matched to one of the four study levels when the text is
one of them verbatim (else the level the study tag names, else a custom level).

aide.log (when present) gives every LLM call: its model, latency, tokens (in/out), the prompt
AIDE sent and the reply, as llm_call events. A code call belongs to the node whose "parsing
execution results for node <id>" line follows it, a review call to the node just parsed; the
rest (the report at the end) belongs to the run. Published DDI predictions, when given, are
scored here and put on the run's final node (the node whose code is best_solution.py, else the
best by AIDE's own metric) as a test evaluation labelled "published predictions, scored here".
Imported runs were never executed here; the static audit runs on each node's code.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from engine.agent.session_config import SessionConfig
from engine.errors import DataError, UsageError
from engine.imports.common import (
    Clock,
    RunTag,
    audit_payload,
    emit_end,
    emit_published,
    guarded_import,
    head_tail,
    number,
)
from engine.session import event_types as et
from engine.task import LEVELS

if TYPE_CHECKING:
    from engine.imports.predictions import ScoredPredictions
    from engine.session.state import SessionState
    from engine.session.store import SessionStore, SessionWriter

OUTPUT_KEEP = 16_000  # characters of imported terminal output kept per node (head + tail)
CODER = {"name": "aide-import", "label": "imported AIDE run", "simulated": False}
LOG_FILE = "aide.log"
BEST_SOLUTION = "best_solution.py"


class _TolerantLoader(yaml.SafeLoader):  # type: ignore[misc]  # yaml: no stubs installed, so Any
    """A SafeLoader that reads AIDE's `!!python/...` tags (e.g. pathlib.PosixPath) as text."""


def _python_tag(loader: yaml.SafeLoader, suffix: str, node: yaml.Node) -> Any:
    if isinstance(node, yaml.SequenceNode):
        parts = [str(p) for p in loader.construct_sequence(node, deep=True)]
        if suffix.endswith("Path") and parts:
            head, rest = parts[0], parts[1:]
            return head.rstrip("/") + "/" + "/".join(rest) if head == "/" else "/".join(parts)
        return " ".join(parts)
    if isinstance(node, yaml.MappingNode):
        return str(loader.construct_mapping(node, deep=True))
    return str(loader.construct_scalar(node))


_TolerantLoader.add_multi_constructor("tag:yaml.org,2002:python/", _python_tag)


def load_aide_config(path: str | Path) -> dict[str, Any]:
    """config.yaml as a dict (python tags as strings); {} if unreadable."""
    try:
        data = yaml.load(Path(path).read_text(encoding="utf-8"), Loader=_TolerantLoader)
    except (OSError, yaml.YAMLError):
        return {}
    return data if isinstance(data, dict) else {}


def find_journal(path: str | Path) -> tuple[Path, Path | None]:
    """(journal.json, config.yaml or None) for a run directory, a logs/ directory or a journal."""
    path = Path(path)
    if not path.exists():
        raise DataError(f"{path} does not exist")
    if path.is_file():
        journal = path
    else:
        direct = path / "journal.json"
        if direct.is_file():
            journal = direct
        else:
            found = sorted(path.glob("logs/*/journal.json")) or sorted(path.glob("*/journal.json")) \
                or sorted(path.rglob("journal.json"))
            if not found:
                raise DataError(f"no journal.json under {path}")
            if len(found) > 1:
                listing = ", ".join(str(p.relative_to(path)) for p in found[:5])
                raise UsageError(f"several AIDE runs under {path} ({listing}); give one of them")
            journal = found[0]
    config = None
    for candidate in (journal.parent / "config.yaml", journal.parent.parent / "config.yaml"):
        if candidate.is_file():
            config = candidate
            break
    return journal, config


def _claimed(metric: Any) -> tuple[float | None, bool | None]:
    """(value, maximize) from AIDE's metric: {"value", "maximize"}, a number, a string, null."""
    if isinstance(metric, dict):
        return number(metric.get("value")), metric.get("maximize")
    if isinstance(metric, str):
        m = re.search(r"value=([-+0-9.eE]+)", metric)  # "MetricValue(value=0.9, maximize=True)"
        return (number(m.group(1)) if m else number(metric)), None
    return number(metric), None


def _term_out(value: Any) -> tuple[str, bool]:
    """(text, omitted) from `_term_out`: a list of strings, a string, "<OMITTED>" or missing."""
    if value is None:
        return "", False
    if isinstance(value, str):
        return ("", True) if value.strip() == "<OMITTED>" else (value, False)
    if isinstance(value, list):
        return "".join(str(v) for v in value if v is not None), False
    return str(value), False


def _level(goal: str | None, fallback: str | None = None) -> tuple[str, str | None]:

    if goal and str(goal).strip():
        norm = " ".join(str(goal).split())
        for name, text in LEVELS.items():
            if " ".join(text.split()) == norm:
                return name, None
    if fallback in LEVELS:
        return str(fallback), None
    if not goal or not str(goal).strip():
        return "custom", "(no instruction recorded in the imported AIDE run)"
    return "custom", str(goal)


def _load_nodes(journal: Path) -> tuple[list[dict[str, Any]], dict[str, str]]:
    try:
        raw = journal.read_bytes()
    except OSError as exc:
        raise DataError(f"cannot read {journal}: {exc.strerror or exc}") from None
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise DataError(f"cannot read {journal}: not UTF-8 text (byte {exc.start}), so not an AIDE journal; "
                        "give a journal.json or the run's log folder") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise DataError(f"cannot read {journal}: not JSON ({exc.msg} at line {exc.lineno}, column {exc.colno}), "
                        "so not an AIDE journal") from None
    except RecursionError:
        raise DataError(f"cannot read {journal}: its JSON is nested too deeply for an AIDE journal") from None
    n2p: dict[str, str]
    if isinstance(data, list):
        nodes, n2p = data, {}
    elif isinstance(data, dict):
        nodes, n2p = data.get("nodes") or [], data.get("node2parent") or {}
    else:
        raise DataError(f"{journal} is not an AIDE journal (a JSON {type(data).__name__}, not an object)")
    if not isinstance(nodes, list):
        raise DataError(f"{journal} is not an AIDE journal: \"nodes\" is a {type(nodes).__name__}, not a list")
    nodes = [n for n in nodes if isinstance(n, dict)]
    if not isinstance(n2p, dict):
        n2p = {}
    return nodes, {str(k): str(v) for k, v in n2p.items() if v is not None}


def _audit(code: str, output: str, omitted: bool, claimed: float | None, status: str) -> dict[str, Any] | None:
    """The `audited` payload of one journal node (engine.imports.common.audit_payload)."""
    return audit_payload(code, output, omitted, claimed, status, source="aide journal")


# --------------------------------------------------------------------------- aide.log


_RECORD = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) - ([A-Z]+) - (.*)$")
_REQUEST = re.compile(r"^\w+ API request: system=")
_COMPLETED = re.compile(r"^\w+ API call completed - (?P<model>\S+) - (?P<latency>[0-9.]+)s - (?P<total>\d+) tokens "
                        r"\(in: (?P<tin>\d+), out: (?P<tout>\d+)\)")
_RESPONSE = re.compile(r"^\w+ API response: ")
_PARSING = re.compile(r"^Agent is parsing execution results for node (\S+)")
_USER_SPLIT = "\n, user="


@dataclass
class AideCall:
    """One LLM call from aide.log: what AIDE sent, what came back, what it cost in tokens."""
    role: str                               # draft | improve | debug | review | report
    system: str
    user: str | None = None
    model: str = ""
    latency_s: float = 0.0
    tokens_in: int = 0
    tokens_out: int = 0
    reply: str = ""
    aide_node: str | None = None            # the journal node it belongs to, None: the run's

    @property
    def tokens(self) -> int:
        return self.tokens_in + self.tokens_out

    def payload(self, node_id: int | None) -> dict[str, Any]:
        messages = [{"role": "system", "content": self.system}]
        if self.user is not None:
            messages.append({"role": "user", "content": self.user})
        return {"node_id": node_id, "role": self.role, "model": self.model, "tokens_in": self.tokens_in,
                "tokens_out": self.tokens_out, "latency_s": self.latency_s, "cost": 0.0, "ok": True, "error": None,
                "tokens_estimated": False, "messages": messages, "reply": self.reply, "source": LOG_FILE}


@dataclass
class AideLog:
    calls: list[AideCall] = field(default_factory=list)
    parsed_nodes: list[str] = field(default_factory=list)   # aide ids in the order AIDE reviewed them

    @property
    def tokens(self) -> int:
        return sum(c.tokens for c in self.calls)

    def for_node(self, aide_id: str, review: bool) -> list[AideCall]:
        return [c for c in self.calls if c.aide_node == aide_id and (c.role == "review") == review]


def _role(system: str) -> str:
    if "evaluate the output of the code execution" in system:
        return "review"
    if "previous solution had a bug" in system:
        return "debug"
    if "previously developed solution" in system:
        return "improve"
    if "come up with an excellent and creative plan" in system:
        return "draft"
    return "report"


def _records(text: str) -> list[tuple[str, str]]:
    """(level, message with its continuation lines) for each timestamped record of a log."""
    out: list[tuple[str, list[str]]] = []
    for line in text.splitlines():
        m = _RECORD.match(line)
        if m:
            out.append((m.group(2), [m.group(3)]))
        elif out:
            out[-1][1].append(line)
    return [(level, "\n".join(lines)) for level, lines in out]


def read_aide_log(path: str | Path) -> AideLog:
    """Every LLM call in an aide.log, each assigned to its journal node (see the module doc)."""
    log = AideLog()
    pending: list[AideCall] = []     # code calls waiting for the node they produced
    current: str | None = None       # the node AIDE is reviewing
    call: AideCall | None = None
    for _level_name, message in _records(Path(path).read_text(encoding="utf-8", errors="replace")):
        if _REQUEST.match(message):
            body = message.split("system=", 1)[1]
            system, _, user = body.rpartition(_USER_SPLIT) if _USER_SPLIT in body else (body, "", "None")
            system += "\n" if _USER_SPLIT in body else ""  # AIDE's compiled prompt ends with a newline
            call = AideCall(role=_role(system), system=system, user=None if user.strip() == "None" else user)
            log.calls.append(call)
            if call.role == "review":
                call.aide_node = current
            elif call.role != "report":
                pending.append(call)
        elif (m := _COMPLETED.match(message)) and call is not None:
            call.model, call.latency_s = m["model"], float(m["latency"])
            call.tokens_in, call.tokens_out = int(m["tin"]), int(m["tout"])
        elif _RESPONSE.match(message) and call is not None:
            call.reply = _RESPONSE.sub("", message, count=1)
        elif m := _PARSING.match(message):
            current = m.group(1)
            log.parsed_nodes.append(current)
            for c in pending:
                c.aide_node = current
            pending = []
    return log


# --------------------------------------------------------------------------- the import


@dataclass
class _Run:
    """An AIDE run's artifacts, read and ordered, ready to become events."""
    journal: Path
    config_path: Path | None
    cfg: dict[str, Any]
    ordered: list[dict[str, Any]]
    aide_ids: list[str]
    n2p: dict[str, str]
    log: AideLog | None
    best_code: str | None

    def parent_of(self, n: dict[str, Any], aid: str, to_int: dict[str, int]) -> int | None:
        p = self.n2p.get(aid)
        if p is None:
            raw = n.get("parent")
            p = raw.get("id") if isinstance(raw, dict) else raw
        if p is None or str(p) in ("None", ""):
            return None
        pid = to_int.get(str(p))
        return pid if pid is not None and pid < to_int[aid] else None


def _status(n: dict[str, Any]) -> str:
    exc = n.get("exc_type")
    exc = None if exc in (None, "None", "") else str(exc)
    if exc and "Timeout" in exc:
        return "timeout"
    buggy = n.get("is_buggy")
    if isinstance(buggy, str):
        buggy = buggy.strip().lower() == "true"
    if buggy is None:
        buggy = exc is not None
    return "buggy" if buggy else "ok"


def _read_run(path: str | Path) -> _Run:
    journal, config_path = find_journal(path)
    nodes, n2p = _load_nodes(journal)
    if not nodes:
        raise DataError(f"{journal} holds no nodes")

    def key(item: tuple[int, dict[str, Any]]) -> tuple[float, float, int]:  # step, ctime, file order
        i, n = item
        step = number(n.get("step"))
        return (step if step is not None else float(i), number(n.get("ctime")) or 0.0, i)

    ordered = [n for _, n in sorted(enumerate(nodes), key=key)]
    log_path, best = journal.parent / LOG_FILE, journal.parent / BEST_SOLUTION
    return _Run(journal=journal, config_path=config_path,
                cfg=load_aide_config(config_path) if config_path else {}, ordered=ordered,
                aide_ids=[str(n.get("id") or f"node-{i}") for i, n in enumerate(ordered)], n2p=n2p,
                log=read_aide_log(log_path) if log_path.is_file() else None,
                best_code=best.read_text(encoding="utf-8", errors="replace") if best.is_file() else None)


def import_aide(store: SessionStore, path: str | Path, *, session_id: str | None = None, by: str = "import",
                predictions: str | Path | None = None, metadata: str | Path | None = None,
                tag: RunTag | None = None) -> str:
    """Import an AIDE run into `store`; returns the new session's id. `predictions` (the run's
    published DDI predictions) need `metadata` (DDI-format labels) to be scored. A journal or
    config of an unexpected shape is a DataError, and leaves no half-imported session behind."""
    from engine.imports.predictions import published_scores

    scored = published_scores(predictions, metadata)
    run = _read_run(path)
    return guarded_import(store, run.journal,
                          lambda created: _import(store, run, session_id, tag or RunTag(), scored, created))


def _session_config(run: _Run, tag: RunTag) -> tuple[dict[str, Any], str]:

    agent = _section(run.cfg, "agent")
    search, exec_cfg, code_cfg = _section(agent, "search"), _section(run.cfg, "exec"), _section(agent, "code")
    level, custom_text = _level(run.cfg.get("goal"), tag.level)
    steps = agent.get("steps")
    config = SessionConfig(
        level=level, custom_text=custom_text,
        steps=int(steps) if isinstance(steps, int) and steps >= 0 else len(run.ordered),
        step_timeout=float(exec_cfg.get("timeout") or 3600), best="claimed", coder="aide-import",
        model=code_cfg.get("model"), num_drafts=int(search.get("num_drafts", 5) or 5),
        debug_prob=float(search.get("debug_prob", 0.5) or 0.5),
        max_debug_depth=int(search.get("max_debug_depth", 3) or 3), failure_rate=0.0,
        data=str(run.cfg.get("data_dir") or "aide"), **tag.config_fields(),
        extra={**tag.extra, "aide": {
            "exp_name": run.cfg.get("exp_name"), "eval": run.cfg.get("eval"), "journal": str(run.journal),
            "config": str(run.config_path) if run.config_path else None,
            "journal_version": _journal_version(run.journal),
            "log": str(run.journal.parent / LOG_FILE) if run.log is not None else None,
            "tokens": run.log.tokens if run.log is not None else None}},
    ).to_dict()
    return config, str(custom_text) if level == "custom" else LEVELS[level]


def _import(store: SessionStore, run: _Run, session_id: str | None, tag: RunTag,
            scored: ScoredPredictions | None, created: list[str]) -> str:
    config, instruction = _session_config(run, tag)
    times = [number(n.get("ctime")) for n in run.ordered]
    known = [t for t in times if t is not None]
    clock = Clock(min(known) if known else 0.0)
    code_model = _section(_section(run.cfg, "agent"), "code").get("model")
    writer = store.create_session(
        config, instruction=instruction, coder={**CODER, "model": code_model},
        data={"kind": "aide-import", "path": str(run.journal), "summary": {"nodes": len(run.ordered)}},
        session_id=session_id, origin="import", ts=clock.now)
    created.append(writer.session_id)
    to_int = {aid: i + 1 for i, aid in enumerate(run.aide_ids)}
    best: tuple[float, int] | None = None
    for i, (n, aid) in enumerate(zip(run.ordered, run.aide_ids, strict=True), start=1):
        score = _emit_node(writer, run, n, aid, i, run.parent_of(n, aid, to_int), times[i - 1], clock)
        if score is not None and (best is None or score > best[0]):
            best = (score, i)
    known_ids = set(run.aide_ids)
    for call in run.log.calls if run.log is not None else []:
        if call.aide_node not in known_ids:  # the report, or a node the journal does not have
            writer.emit(et.LlmCall.from_payload(call.payload(None)), ts=clock.at())
    final = _final_node(run, writer.state, best[1] if best else None)
    emit_published(writer, final, scored, clock)
    emit_end(writer, best[1] if best else None, f"imported from {run.journal}", tag, clock)
    return writer.session_id


def _final_node(run: _Run, state: SessionState, by_claimed: int | None) -> int | None:
    """The node the study evaluated: the one whose code is best_solution.py, else AIDE's best."""
    if run.best_code is not None:
        want = run.best_code.strip()
        for node_id, node in state.nodes.items():
            if node.code.strip() == want:
                return node_id
    return by_claimed


def _emit_node(writer: SessionWriter, run: _Run, n: dict[str, Any], aid: str, node_id: int,
               parent: int | None, ctime: float | None, clock: Clock) -> float | None:
    """One journal node's events; returns its score for AIDE's best (None: not a candidate)."""
    status = _status(n)
    if parent is None:
        stage = "draft"
    else:
        stage = "debug" if writer.state.nodes[parent].status in ("buggy", "timeout") else "improve"
    code = _text(n, "code")
    writer.emit(et.NodeCreated(node_id=node_id, parent_id=parent, step=node_id, stage=stage, plan=_text(n, "plan"),
                               guidance_ids=[], components=None, origin="import", aide_id=aid), ts=clock.at(ctime))
    for call in run.log.for_node(aid, review=False) if run.log is not None else []:
        writer.emit(et.LlmCall.from_payload(call.payload(node_id)), ts=clock.at())
    writer.emit(et.Code(node_id=node_id, code=code), ts=clock.at())
    writer.emit(et.ExecStarted(node_id=node_id, workdir=""), ts=clock.at())
    text, omitted = _term_out(n.get("_term_out"))
    head, tail, truncated = head_tail(text, OUTPUT_KEEP)
    exec_time = number(n.get("exec_time"))
    if text:
        writer.emit(et.Output(node_id=node_id, text=head + tail, stream="stdout"), ts=clock.at())
    exc = n.get("exc_type")
    writer.emit(et.ExecFinished(
        node_id=node_id, status=status, exit_code=None if status != "ok" else 0,
        exec_time=exec_time, exc_type=None if exc in (None, "None", "") else str(exc),
        output_head=head if text else ("<OMITTED>" if omitted else ""), output_tail=tail, truncated=truncated,
    ), ts=clock.at(ctime, exec_time or 0.0))
    for call in run.log.for_node(aid, review=True) if run.log is not None else []:
        writer.emit(et.LlmCall.from_payload(call.payload(node_id)), ts=clock.at())
    claimed, maximize = _claimed(n.get("metric"))
    writer.emit(et.Review(node_id=node_id, is_bug=status != "ok", summary=_text(n, "analysis"),
                          claimed_metric=claimed), ts=clock.at())
    audited = _audit(code, text, omitted, claimed, status)
    if audited is not None:
        writer.emit(et.Audited.from_payload({"node_id": node_id, **audited}), ts=clock.at())
    if claimed is None or status != "ok":
        return None
    return claimed if maximize is not False else -claimed


def _section(cfg: dict[str, Any], key: str) -> dict[str, Any]:
    """A sub-table of AIDE's config; {} when absent or not a mapping."""
    value = cfg.get(key)
    return value if isinstance(value, dict) else {}


def _text(node: dict[str, Any], key: str) -> str:
    """A journal node's text field; "" when absent or not text."""
    value = node.get(key)
    return value if isinstance(value, str) else ""


def _journal_version(journal: Path) -> Any:
    try:
        data = json.loads(journal.read_text(encoding="utf-8"))
    except Exception:
        return None
    return data.get("__version") if isinstance(data, dict) else None
