"""The live reply: a side channel for the text a model is writing right now.

A reply is stored once, whole, in its llm_call event. While it streams, the session's events
carry only offsets and times (llm_stream: characters and tokens so far, seconds since the
request, tokens/s); the text itself goes to one small file beside the session's node folders,
`runs/<session>/live-reply.json`, replaced at most ~5 times a second and removed when the call
ends. The console and the headless line read it; nothing stores it. A replay shows the reply
being written from the offsets and the llm_call that follows (`replay_text`).
"""
from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from engine.paths import session_run_dir
from engine.paths import runs_dir
from engine.session import events as ev

FILE = "live-reply.json"


def live_path(db_path: Path | str, session_id: str) -> Path:
    return session_run_dir(runs_dir(Path(db_path)), session_id) / FILE


def write(path: Path, payload: dict[str, Any]) -> None:
    """Replace the live reply (atomically: a reader never sees half a file)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(json.dumps(payload), encoding="utf-8")
        os.replace(tmp, path)
    except OSError:
        pass  # a display aid: never fails a call


def clear(path: Path) -> None:
    try:
        path.unlink()
    except OSError:
        pass


def read(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def text_for(live: dict[str, Any] | None, side: dict[str, Any] | None) -> str:
    """The text of the reply being written: the side channel's when it is about the same call,
    else what old sessions stored in their llm_stream events (deltas)."""
    if not live:
        return ""
    if side and side.get("role") == live.get("role") and side.get("step") == live.get("step"):
        return str(side.get("text") or "")
    return str(live.get("text") or "")


def replay_text(events: Sequence[ev.Event], position: int, live: dict[str, Any] | None) -> str:
    """In a replay at `position` (events applied so far), the part of the reply being written:
    the first `chars` characters of the llm_call that ends this stream."""
    if not live:
        return ""
    if live.get("text"):
        return str(live["text"])   # an old session: the deltas are in the events
    chars = int(live.get("chars") or 0)
    for event in events[position:]:
        if event.kind == ev.LLM_CALL and event.payload.get("role") == live.get("role"):
            return str(event.payload.get("reply") or "")[:chars]
    return ""
