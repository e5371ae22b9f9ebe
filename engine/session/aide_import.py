"""Import an AIDE run (a log directory with journal.json and config.yaml, or a journal.json)
as a befair session, so the console can show, replay and compare it like a live one.

Mapping: node ids are renumbered 1..N in (step, ctime) order (the AIDE ids are kept in each
node_created payload as `aide_id`); edges come from `node2parent` (else a node's own `parent`);
the stage follows the tree (no parent -> draft; buggy parent -> debug; else improve); the status
from is_buggy / exc_type (TimeoutError -> timeout); the claimed metric from `metric` (a dict
{"value", "maximize"}, a number or null); event timestamps from each node's ctime. The
instruction is config.yaml's `goal`, matched to one of the four study levels when the text is
one of them verbatim (else a custom level). Imported runs were never executed here, so they have
no measured metrics; the static audit (engine.evaluation.audit) runs on each node's code when
it is available.
"""
from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from engine.errors import DataError, UsageError
from engine.session import events as ev

if TYPE_CHECKING:
    from engine.session.store import SessionStore

OUTPUT_KEEP = 16_000  # characters of imported terminal output kept per node (head + tail)
CODER = {"name": "aide-import", "label": "imported AIDE run", "simulated": False}


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


def _float(value: Any) -> float | None:
    if isinstance(value, bool) or value is None:
        return None
    try:
        out = float(value)
    except (TypeError, ValueError):
        return None
    return out if math.isfinite(out) else None


def _claimed(metric: Any) -> tuple[float | None, bool | None]:
    """(value, maximize) from AIDE's metric: {"value", "maximize"}, a number, a string, null."""
    if isinstance(metric, dict):
        return _float(metric.get("value")), metric.get("maximize")
    if isinstance(metric, str):
        m = re.search(r"value=([-+0-9.eE]+)", metric)  # "MetricValue(value=0.9, maximize=True)"
        return (_float(m.group(1)) if m else _float(metric)), None
    return _float(metric), None


def _term_out(value: Any) -> tuple[str, bool]:
    """(text, omitted) from `_term_out`: a list of strings, a string, "<OMITTED>" or missing."""
    if value is None:
        return "", False
    if isinstance(value, str):
        return ("", True) if value.strip() == "<OMITTED>" else (value, False)
    if isinstance(value, list):
        return "".join(str(v) for v in value if v is not None), False
    return str(value), False


def _head_tail(text: str) -> tuple[str, str, bool]:
    half = OUTPUT_KEEP // 2
    if len(text) <= OUTPUT_KEEP:
        return text, "", False
    return text[:half], text[-half:], True


def _level(goal: str | None) -> tuple[str, str | None]:
    from engine.task import LEVELS

    if not goal or not str(goal).strip():
        return "custom", "(no instruction recorded in the imported AIDE run)"
    norm = " ".join(str(goal).split())
    for name, text in LEVELS.items():
        if " ".join(text.split()) == norm:
            return name, None
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
    """An `audited` payload from engine.evaluation.audit when that module is available."""
    try:
        from engine.evaluation import audit as audit_mod
    except ImportError:
        return None
    audit_code = getattr(audit_mod, "audit_code", None)
    if audit_code is None:
        return None
    try:
        result = audit_code(code)
    except Exception:  # an unparsable pipeline: AIDE journals hold whatever the LLM wrote
        return None
    if hasattr(result, "to_dict"):
        result = result.to_dict()
    elif not isinstance(result, dict) and hasattr(result, "__dict__"):
        result = dict(vars(result))
    if not isinstance(result, dict):
        return None
    flags = result.get("flags", result)
    flags = {k: bool(v) for k, v in flags.items() if isinstance(v, (bool, int))}
    evidence = {k: str(v) for k, v in (result.get("evidence") or {}).items()}
    printed = None
    parse = getattr(audit_mod, "parse_claimed_metric", None)
    if parse is not None and output:
        try:
            printed = parse(output)
        except Exception:
            printed = None
        printed = _float(getattr(printed, "value", printed))
    check = getattr(audit_mod, "check_claim", None)
    if check is not None:
        try:
            claim = dict(check(claimed, None, ran_ok=status == "ok", output="<OMITTED>" if omitted else output))
        except Exception:
            claim = None
    else:
        claim = None
    if claim is None:
        unsupported = claimed is not None and (status != "ok" or (not omitted and not output.strip()))
        reason = ("the run crashed" if status != "ok" else "the run printed nothing") if unsupported else None
        claim = {"claimed": claimed, "measured": None, "difference": None, "unsupported": unsupported, "reason": reason}
    claim.update(printed=printed, source="aide journal")
    return {"flags": flags, "evidence": evidence, "claim": claim}


def import_aide(store: SessionStore, path: str | Path, *, session_id: str | None = None, by: str = "import") -> str:
    """Import an AIDE run into `store`; returns the new session's id. A journal or config of an
    unexpected shape is a DataError, and leaves no half-imported session behind."""
    journal, config_path = find_journal(path)
    nodes, n2p = _load_nodes(journal)
    if not nodes:
        raise DataError(f"{journal} holds no nodes")
    created: list[str] = []
    try:
        return _import(store, journal, config_path, nodes, n2p, session_id, created)
    except (TypeError, ValueError, KeyError, AttributeError, IndexError, OverflowError, RecursionError) as exc:
        # a journal of an unexpected shape: leave no half-imported session behind
        if created:
            try:
                store.delete_session(created[0])
            except Exception:  # noqa: BLE001 - the error below is the one to report
                pass
        raise DataError(f"{journal} is not an AIDE journal this version can import "
                        f"({type(exc).__name__}: {str(exc)[:200]})") from None


def _import(store: SessionStore, journal: Path, config_path: Path | None, nodes: list[dict[str, Any]],
            n2p: dict[str, str], session_id: str | None, created: list[str]) -> str:
    from engine.config import SessionConfig

    cfg = load_aide_config(config_path) if config_path else {}
    agent_cfg = _section(cfg, "agent")
    search = _section(agent_cfg, "search")
    exec_cfg = _section(cfg, "exec")
    code_cfg = _section(agent_cfg, "code")

    # order: step, then ctime, then position in the file
    def key(item: tuple[int, dict[str, Any]]) -> tuple[float, float, int]:
        i, n = item
        step = _float(n.get("step"))
        return (step if step is not None else float(i), _float(n.get("ctime")) or 0.0, i)

    ordered = [n for _, n in sorted(enumerate(nodes), key=key)]
    aide_ids = [str(n.get("id") or f"node-{i}") for i, n in enumerate(ordered)]
    to_int = {aid: i + 1 for i, aid in enumerate(aide_ids)}

    def parent_of(n: dict[str, Any], aid: str) -> int | None:
        p = n2p.get(aid)
        if p is None:
            raw = n.get("parent")
            p = raw.get("id") if isinstance(raw, dict) else raw
        if p is None or str(p) in ("None", ""):
            return None
        pid = to_int.get(str(p))
        return pid if pid is not None and pid < to_int[aid] else None

    def status_of(n: dict[str, Any]) -> str:
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

    level, custom_text = _level(cfg.get("goal"))
    steps_cfg = agent_cfg.get("steps")
    config = SessionConfig(
        level=level,
        custom_text=custom_text,
        steps=int(steps_cfg) if isinstance(steps_cfg, int) and steps_cfg >= 0 else len(ordered),
        step_timeout=float(exec_cfg.get("timeout") or 3600),
        best="claimed",
        coder="aide-import",
        model=code_cfg.get("model"),
        num_drafts=int(search.get("num_drafts", 5) or 5),
        debug_prob=float(search.get("debug_prob", 0.5) or 0.5),
        max_debug_depth=int(search.get("max_debug_depth", 3) or 3),
        failure_rate=0.0,
        data=str(cfg.get("data_dir") or "aide"),
        extra={"aide": {"exp_name": cfg.get("exp_name"), "eval": cfg.get("eval"),
                        "journal": str(journal), "config": str(config_path) if config_path else None,
                        "journal_version": _journal_version(journal)}},
    ).to_dict()
    coder = {**CODER, "model": code_cfg.get("model")}

    times = [_float(n.get("ctime")) for n in ordered]
    known = [t for t in times if t is not None]
    t0 = min(known) if known else 0.0
    writer = store.create_session(
        config,
        instruction=config["custom_text"] if level == "custom" else _instruction(level),
        coder=coder,
        data={"kind": "aide-import", "path": str(journal), "summary": {"nodes": len(ordered)}},
        session_id=session_id,
        origin="import",
        ts=t0,
    )
    sid = writer.session_id
    created.append(sid)
    state = writer.state
    clock = t0

    def at(t: float | None, plus: float = 0.0) -> float:
        nonlocal clock
        clock = max(clock, (t if t is not None else clock) + plus)
        return clock

    best: tuple[float, int] | None = None
    for i, (n, aid) in enumerate(zip(ordered, aide_ids, strict=True), start=1):
        parent = parent_of(n, aid)
        status = status_of(n)
        if parent is None:
            stage = "draft"
        elif state.nodes[parent].status in ("buggy", "timeout"):
            stage = "debug"
        else:
            stage = "improve"
        ctime = times[i - 1]
        code = _text(n, "code")
        plan = _text(n, "plan")
        writer.emit(ev.NODE_CREATED, {"node_id": i, "parent_id": parent, "step": i, "stage": stage,
                                      "plan": plan, "guidance_ids": [], "components": None,
                                      "origin": "import", "aide_id": aid}, ts=at(ctime))
        writer.emit(ev.CODE, {"node_id": i, "code": code}, ts=at(None))
        writer.emit(ev.EXEC_STARTED, {"node_id": i, "workdir": ""}, ts=at(None))
        text, omitted = _term_out(n.get("_term_out"))
        head, tail, truncated = _head_tail(text)
        exec_time = _float(n.get("exec_time"))
        if text:
            writer.emit(ev.OUTPUT, {"node_id": i, "text": head + tail, "stream": "stdout"}, ts=at(None))
        exc = n.get("exc_type")
        writer.emit(ev.EXEC_FINISHED, {
            "node_id": i, "status": status, "exit_code": None if status != "ok" else 0,
            "exec_time": exec_time, "exc_type": None if exc in (None, "None", "") else str(exc),
            "output_head": head if text else ("<OMITTED>" if omitted else ""), "output_tail": tail,
            "truncated": truncated,
        }, ts=at(ctime, exec_time or 0.0))
        claimed, maximize = _claimed(n.get("metric"))
        analysis = _text(n, "analysis")
        writer.emit(ev.REVIEW, {"node_id": i, "is_bug": status != "ok", "summary": analysis,
                                "claimed_metric": claimed}, ts=at(None))
        if claimed is not None and status == "ok":
            score = claimed if maximize is not False else -claimed
            if best is None or score > best[0]:
                best = (score, i)
        audited = _audit(code, text, omitted, claimed, status)
        if audited is not None:
            writer.emit(ev.AUDITED, {"node_id": i, **audited}, ts=at(None))

    writer.emit(ev.FINAL_CHOICE, {
        "by_claimed": best[1] if best else None, "by_validation": None, "by_minimax": None,
        "reasons": {"claimed": "AIDE's best node by its reported metric" if best else "no node reported a metric",
                    "validation": "imported runs were not evaluated here",
                    "minimax": "imported runs were not evaluated here"},
    }, ts=at(None))
    writer.emit(ev.SESSION_FINISHED, {"status": "finished", "reason": f"imported from {journal}"}, ts=at(None))
    return sid


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


def _instruction(level: str) -> str:
    from engine.task import LEVELS

    return LEVELS[level]
