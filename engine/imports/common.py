"""What every importer shares: how a run belongs to a study (RunTag), a monotonic event clock,
the published predictions on the final node, and the rule that a failed import leaves nothing."""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engine.errors import DataError
from engine.evaluation.audit import audit_code, check_claim, parse_claimed_metric
from engine.session import event_types as et

if TYPE_CHECKING:
    from engine.imports.predictions import ScoredPredictions
    from engine.session.store import SessionStore, SessionWriter

# Exceptions that mean "these artifacts have a shape this version cannot import".
SHAPE_ERRORS = (TypeError, ValueError, KeyError, AttributeError, IndexError, OverflowError, RecursionError,
                UnicodeDecodeError)


@dataclass
class RunTag:
    """How an imported run belongs to a study (all optional for a single import)."""
    study_id: str | None = None
    repeat_index: int | None = None
    level: str | None = None        # the level the study gave the run, when its own record names none
    protocol: str | None = None     # the task it ran under (engine.agent.session_config.PROTOCOLS), when known
    failed: str | None = None       # the run failed: why (its session ends "failed")
    extra: dict[str, Any] = field(default_factory=dict)

    def config_fields(self) -> dict[str, Any]:
        out: dict[str, Any] = {"study_id": self.study_id, "repeat_index": self.repeat_index}
        if self.protocol:
            out["protocol"] = self.protocol
        return out


class Clock:
    """Event timestamps that never go backwards: a recorded time when there is one, else the last."""

    def __init__(self, start: float):
        self.now = start

    def at(self, t: float | None = None, plus: float = 0.0) -> float:
        self.now = max(self.now, (t if t is not None else self.now) + plus)
        return self.now


def number(value: Any) -> float | None:
    """A finite float, or None (bools, text, NaN and infinities are not numbers here)."""
    if isinstance(value, bool) or value is None:
        return None
    try:
        out = float(value)
    except (TypeError, ValueError):
        return None
    return out if math.isfinite(out) else None


def head_tail(text: str, keep: int) -> tuple[str, str, bool]:
    """(head, tail, truncated) keeping the first and last keep/2 characters."""
    if len(text) <= keep:
        return text, "", False
    return text[: keep // 2], text[-(keep // 2):], True


def guarded_import(store: SessionStore, what: Path, run: Callable[[list[str]], str]) -> str:
    """Run an import; artifacts of an unexpected shape become one DataError naming `what`, and
    the half-written session (its id appended to the list `run` is given) is deleted."""
    created: list[str] = []
    try:
        return run(created)
    except BaseException as exc:
        if created:
            try:
                store.delete_session(created[0])
            except Exception:  # noqa: BLE001 - the error being raised is the one to report
                pass
        if isinstance(exc, SHAPE_ERRORS):
            raise DataError(f"{what} is not a run this version can import "
                            f"({type(exc).__name__}: {str(exc)[:200]})") from None
        raise


def emit_published(writer: SessionWriter, node_id: int | None, scored: ScoredPredictions | None,
                   clock: Clock) -> None:
    """The published predictions' scores on the run's final node (nothing when either is missing)."""
    from engine.imports.predictions import evaluated_payload

    if scored is not None and node_id is not None:
        writer.emit(et.Evaluated.from_payload(evaluated_payload(node_id, scored)), ts=clock.at(),
                    predictions=scored.scores)


def emit_end(writer: SessionWriter, final: int | None, reason: str, tag: RunTag, clock: Clock,
             what: str = "the agent's best node by its own reported metric") -> None:
    """final_choice (the agent's own pick) and session_finished: failed, with the reason, for a
    run the study published as failed."""
    writer.emit(et.FinalChoice(
        by_claimed=final, by_validation=None, by_minimax=None,
        reasons={"claimed": what if final is not None else "no node reported a metric",
                 "validation": "imported runs were not evaluated here",
                 "minimax": "imported runs were not evaluated here"},
    ), ts=clock.at())
    status = "failed" if tag.failed else "finished"
    writer.emit(et.SessionFinished(status=status, reason=tag.failed or reason), ts=clock.at())


def read_text(path: Path, limit: int | None = None) -> str:
    """A text file (undecodable bytes replaced); "" when unreadable. `limit`: keep the first and
    last limit/2 characters of a longer file."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
    if limit is not None and len(text) > limit:
        head, tail, _ = head_tail(text, limit)
        return f"{head}\n[… {len(text) - limit:,} characters cut …]\n{tail}"
    return text


def audit_payload(code: str, output: str, omitted: bool, claimed: float | None, status: str, *,
                  source: str) -> dict[str, Any] | None:
    """An `audited` payload from engine.evaluation.audit for an imported node (None when its code
    cannot be read); the claim is checked against the output the run recorded."""
    try:
        result = audit_code(code)
    except Exception:  # an unparsable pipeline: recorded runs hold whatever the LLM wrote
        return None
    printed = None
    if output:
        try:
            printed = number(parse_claimed_metric(output))
        except Exception:
            printed = None
    try:
        claim = dict(check_claim(claimed, None, ran_ok=status == "ok", output="<OMITTED>" if omitted else output))
    except Exception:
        unsupported = claimed is not None and (status != "ok" or (not omitted and not output.strip()))
        reason = ("the run crashed" if status != "ok" else "the run printed nothing") if unsupported else None
        claim = {"claimed": claimed, "measured": None, "difference": None, "unsupported": unsupported, "reason": reason}
    claim.update(printed=printed, source=source)
    out = {"flags": {k: bool(v) for k, v in result.flags.items()},
           "evidence": {k: str(v) for k, v in result.evidence.items()}, "claim": claim}
    if result.note:  # "not audited: …": its flags are unknown, not "no"
        out["note"] = result.note
    return out
