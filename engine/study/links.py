"""Participant links: each participant of a study with people holds a secret code, and their link
(`http://HOST:PORT/?participant=ID&code=CODE`) is the only way into their sessions.

The ids (p01, p02, …) are what anyone would guess; the code is not (12 random letters and digits, 71
bits). `befair serve --study` refuses an id without its code, and so do the sign-in form and
`befair participate`: a participant can open their own sessions only, and the steering recorded
under their id is theirs. The codes are made once, when the study is recorded (grid.ensure_study)
or first served, kept in the session database (`participant_links`), and never change; the
researcher hands the links out (`befair study links`).
"""
from __future__ import annotations

import hmac
import secrets
import string
import time
from dataclasses import dataclass
from urllib.parse import urlencode

from engine.errors import UsageError
from engine.session.store import SessionStore
from engine.study.spec import StudySpec

CODE_ALPHABET = string.ascii_letters + string.digits   # no "-": a code never reads as a command-line flag
CODE_LENGTH = 12  # 62^12: 71 bits, far beyond guessing over HTTP
DEFAULT_BASE_URL = "http://127.0.0.1:8000"


class LinkRefused(UsageError):
    """An id without its code (or with another's): what is wrong, and what to do."""

    def __init__(self, message: str, *, unknown: bool = False) -> None:
        super().__init__(message)
        self.unknown = unknown  # no such participant (HTTP 404), rather than a wrong code (403)


@dataclass(frozen=True)
class ParticipantLink:
    participant: str
    code: str
    link: str


def new_code() -> str:
    return "".join(secrets.choice(CODE_ALPHABET) for _ in range(CODE_LENGTH))


def ensure_codes(store: SessionStore, spec: StudySpec) -> dict[str, str]:
    """Every participant's code, made for those who have none yet (a study with people only)."""
    if spec.people is None:
        return {}
    ids = [p for p in spec.participants if p is not None]
    known = store.participant_codes(spec.name)
    missing = {p: new_code() for p in ids if p not in known}
    if missing:
        store.add_participant_codes(spec.name, missing, at=time.time())
        known = store.participant_codes(spec.name)
    return {p: known[p] for p in ids}


def codes(store: SessionStore, study: str) -> dict[str, str]:
    """The recorded codes of a study's participants (empty before they are made)."""
    return store.participant_codes(study)


def check(codes_by_id: dict[str, str], study: str, participant: str | None, code: str | None) -> str:
    """The participant's id when `code` is theirs; LinkRefused saying what is wrong otherwise."""
    participant = (participant or "").strip()
    given = (code or "").strip()
    if not participant:
        raise LinkRefused("no participant id: open the link the researcher gave you")
    expected = codes_by_id.get(participant)
    if expected is None:
        raise LinkRefused(f"{participant!r} is not a participant of study {study}: check your link, or ask the "
                          "researcher for your link", unknown=True)
    if not given:
        raise LinkRefused(f"the code for participant {participant} is missing: open the whole link you were "
                          "given (it ends in &code=…), or ask the researcher for your link")
    if not hmac.compare_digest(given.encode(), expected.encode()):
        raise LinkRefused(f"this code is not participant {participant}'s: open the exact link you were given, "
                          "or ask the researcher for your link")
    return participant


def check_participant(store: SessionStore, spec: StudySpec, participant: str | None, code: str | None) -> str:
    """check() against the study's recorded codes (made now if the study has none yet)."""
    return check(ensure_codes(store, spec), spec.name, participant, code)


def link(base_url: str, participant: str, code: str) -> str:
    return f"{base_url.rstrip('/')}/?{urlencode({'participant': participant, 'code': code})}"


def participant_links(store: SessionStore, spec: StudySpec, base_url: str = DEFAULT_BASE_URL) -> list[ParticipantLink]:
    """Each participant's link, in the spec's order."""
    return [ParticipantLink(p, c, link(base_url, p, c)) for p, c in ensure_codes(store, spec).items()]
