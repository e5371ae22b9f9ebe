"""Blinded test metrics, sealed: kept out of everything a participant can read in the database.

A session that blinds test metrics (`SessionConfig.blind_test`) has each blinded test
evaluation written in two parts. The `evaluated` event keeps its verdict, says `sealed: true`
and loses its figures (`summary`, `medfair`); the figures go to the `sealed_metrics` table,
keyed by the event's (session_id, seq). The nodes table is folded from the event, so its test
columns stay empty.

When the session ends, unless it belongs to a study (`study_id` set: a study keeps them blind
for good), the writer reveals them (`SessionWriter`, engine.session.store.writer): before
`session_finished` it appends each sealed evaluation
again with its figures and `revealed: true`. Every reader's fold, the console following the
log, and the nodes table then have them.

A researcher reads sealed figures before that, or in a study, with `--unblind`:
`unsealed_events` puts them back into the events before the fold, so the reducer gives the
same state as if nothing had been sealed.

The sealed figures are in the same SQLite file: whoever can read the raw file can read them.
What this guarantees is that they are in no table a participant is shown (`events`, `nodes`,
the Datasette views) until they are revealed.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from engine.session import events as ev
from engine.session.state import SessionState, fold

SEALED_KEYS = ("summary", "medfair")  # an evaluated payload's figures
PREDICTIONS_KEY = "predictions"       # sealed with them: each image's prediction (never in an event)


class SealedSource(Protocol):
    """What a reader needs of the store (engine.session.store.SessionStore) to open sealed figures."""

    def events(self, session_id: str, after_seq: int = 0, limit: int | None = None) -> list[ev.Event]: ...

    def sealed_figures(self, session_id: str) -> dict[int, dict[str, Any]]: ...


def sealable(kind: str, payload: dict[str, Any]) -> bool:
    """A blinded test evaluation not yet revealed."""
    return (kind == ev.EVALUATED and payload.get("split") == "test" and bool(payload.get("blinded"))
            and not payload.get("revealed") and not payload.get("sealed"))


def sealed_part(payload: dict[str, Any], predictions: dict[str, float] | None) -> dict[str, Any]:
    """What is sealed of a blinded test evaluation: its figures and each image's prediction."""
    figures: dict[str, Any] = {k: payload[k] for k in SEALED_KEYS if k in payload}
    if predictions is not None:
        figures[PREDICTIONS_KEY] = predictions
    return figures


def clear_part(payload: dict[str, Any]) -> dict[str, Any]:
    """What stays in clear in the `evaluated` event: the payload without its figures, `sealed: true`."""
    return {**{k: v for k, v in payload.items() if k not in SEALED_KEYS}, "sealed": True}


def revealed(clear: dict[str, Any], figures: dict[str, Any]) -> tuple[dict[str, Any], dict[str, float] | None]:
    """(the revealing event's payload, the predictions sealed with it) from a sealed evaluation's
    clear payload and its sealed figures."""
    payload = {k: v for k, v in clear.items() if k not in ("sealed", "predictions_kept")}
    opened = dict(figures)
    predictions = opened.pop(PREDICTIONS_KEY, None)
    return {**payload, **opened, "revealed": True}, predictions


def kept_blind(state: SessionState) -> bool:
    """A study keeps its blinded test metrics blind after the end (see engine.session.views)."""
    return bool(state.config.get("study_id"))


def unsealed_events(store: SealedSource, session_id: str, events: Sequence[ev.Event]) -> list[ev.Event]:
    """The events with every sealed evaluation's figures put back (a researcher's --unblind)."""
    figures = store.sealed_figures(session_id)
    if not figures:
        return list(events)
    out = []
    for e in events:
        if e.seq in figures and e.kind == ev.EVALUATED:
            payload = {k: v for k, v in e.payload.items() if k != "sealed"}
            opened = {k: v for k, v in figures[e.seq].items() if k != PREDICTIONS_KEY}
            e = ev.Event(seq=e.seq, kind=e.kind, payload={**payload, **opened}, ts=e.ts, session_id=e.session_id)
        out.append(e)
    return out


def open_sealed(store: SealedSource, session_id: str, *, unblind: bool = False) -> SessionState:
    """The session's state for a reader: a participant's fold of the events as stored, or, with
    `unblind` (a researcher), with the sealed figures put back."""
    events = store.events(session_id)
    if unblind:
        events = unsealed_events(store, session_id, events)
    return fold(events, session_id)
