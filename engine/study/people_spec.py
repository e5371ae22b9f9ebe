"""The `[people]` table of a study spec: a study whose sessions people steer from a browser
(`befair serve --study`), each participant through their own cells in a counterbalanced order.

    participants = ["p01", "p02"]
    time_limit = 600                          # seconds per session (a top-level key: any study)

    [people]
    instructions = "You will steer an agent ..."
    consent = "I agree that my steering and answers are recorded ..."
    fields = ["role", "years_dermatology", "years_ml", "notes"]     # asked once (default: all four)
    roles = ["dermatologist", "data scientist / ML engineer", "other"]
    order = "latin-square"                    # or "as-listed"
    guidance_budget = 5                       # most guidance messages per session (default: no limit)
    references = "researcher"                 # who sees the published reference rows: researcher | everyone
    clock_runs_when_paused = true             # a paused session's time limit keeps running (default)
    max_running = 4                           # sessions running at once; later starts wait (default: no limit)

    [[people.questions]]
    id = "fair_dark"
    text = "How sure are you that the chosen pipeline is fair to dark skin?"
    scale = [1, 7]                            # or kind = "text"
    labels = ["not at all", "completely"]

A participant's expertise group in the report is their role.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

FIELDS = ("role", "years_dermatology", "years_ml", "notes")
FIELD_LABELS = {"role": "Your role", "years_dermatology": "Years of experience in dermatology",
                "years_ml": "Years of experience in machine learning",
                "notes": "Anything else about your background (free text, optional)"}
DEFAULT_ROLES = ("dermatologist", "other clinician", "data scientist / ML engineer", "other")
ORDERS = ("latin-square", "as-listed")
PEOPLE_KEYS = {"instructions", "consent", "fields", "roles", "order", "guidance_budget", "questions",
               "references", "clock_runs_when_paused", "max_running"}
REFERENCES = ("researcher", "everyone")   # a published figure can anchor a participant's answers
QUESTION_KEYS = {"id", "text", "scale", "kind", "labels", "required"}
QUESTION_ID = re.compile(r"^[A-Za-z][A-Za-z0-9_]{0,39}$")
MAX_TEXT = 2000  # characters of a free-text answer or field


@dataclass(frozen=True)
class Question:
    id: str
    text: str
    kind: str = "scale"                       # scale | text
    low: int = 1
    high: int = 7
    labels: tuple[str, str] | None = None     # what the scale's two ends mean
    required: bool = True

    def check(self, value: Any) -> int | str | None:
        """The answer as stored, or ValueError saying what is wrong."""
        if value is None or (isinstance(value, str) and not value.strip()):
            if self.required:
                raise ValueError(f"{self.text} needs an answer")
            return None
        if self.kind == "text":
            return str(value).strip()[:MAX_TEXT]
        try:
            number = int(str(value).strip())
        except ValueError:
            raise ValueError(f"{self.text}: a whole number from {self.low} to {self.high}") from None
        if not self.low <= number <= self.high:
            raise ValueError(f"{self.text}: a whole number from {self.low} to {self.high}")
        return number


@dataclass(frozen=True)
class PeopleSpec:
    instructions: str = ""
    consent: str = ""
    fields: tuple[str, ...] = FIELDS
    roles: tuple[str, ...] = DEFAULT_ROLES
    order: str = "latin-square"
    guidance_budget: int | None = None
    questions: tuple[Question, ...] = field(default_factory=tuple)
    references: str = "researcher"            # who sees the published reference rows
    clock_runs_when_paused: bool = True
    max_running: int | None = None            # sessions of the study running at once (None: no limit)

    @property
    def participants_see_references(self) -> bool:
        return self.references == "everyone"

    def check_profile(self, values: dict[str, Any]) -> dict[str, Any]:
        """The profile as stored (only the fields asked), or ValueError naming the field."""
        out: dict[str, Any] = {}
        for name in self.fields:
            value = values.get(name)
            if name == "role":
                if value not in self.roles:
                    raise ValueError(f"choose your role: {', '.join(self.roles)}")
                out[name] = value
            elif name in ("years_dermatology", "years_ml"):
                try:
                    years = float(str(value).strip())
                except ValueError:
                    raise ValueError(f"{FIELD_LABELS[name]}: a number of years, 0 or more") from None
                if not 0 <= years <= 80:
                    raise ValueError(f"{FIELD_LABELS[name]}: a number of years from 0 to 80")
                out[name] = years
            else:
                out[name] = str(value or "").strip()[:MAX_TEXT]
        return out


def balanced_latin_square(items: list[Any], row: int) -> list[Any]:
    """Row `row` of a balanced (Williams) Latin square over `items`: every item takes every place
    once per len(items) rows, and each item follows each other as often (with an odd number of
    items, over 2·len(items) rows, the odd rows reversed)."""
    n = len(items)
    out, left, right = [], 0, 0
    for i in range(n):
        if i < 2 or i % 2 == 1:
            value, left = left, left + 1
        else:
            value, right = n - right - 1, right + 1
        out.append(items[(value + row) % n])
    if n % 2 == 1 and row % 2 == 1:
        out.reverse()
    return out


def parse_people(value: Any, participants: list[str | None], fail: Any) -> PeopleSpec | None:
    if value is None:
        return None
    if not isinstance(value, dict) or set(value) - PEOPLE_KEYS:
        raise fail(f"[people] takes {', '.join(sorted(PEOPLE_KEYS))}")
    if participants == [None]:
        raise fail("[people] needs participants = [\"p01\", ...]: the ids the study's people sign in with")
    texts = {k: value.get(k, "") for k in ("instructions", "consent")}
    for key, text in texts.items():
        if not isinstance(text, str):
            raise fail(f"people.{key} must be text")
    fields = value.get("fields", list(FIELDS))
    if not isinstance(fields, list) or set(fields) - set(FIELDS) or len(set(fields)) != len(fields):
        raise fail(f"people.fields lists some of {', '.join(FIELDS)}")
    roles = value.get("roles", list(DEFAULT_ROLES))
    if not isinstance(roles, list) or not roles or not all(isinstance(r, str) and r.strip() for r in roles):
        raise fail("people.roles must be a list of role names")
    order = value.get("order", "latin-square")
    if order not in ORDERS:
        raise fail(f"people.order must be one of {', '.join(ORDERS)}, not {order!r}")
    budget = value.get("guidance_budget")
    if budget is not None and (isinstance(budget, bool) or not isinstance(budget, int) or budget < 0):
        raise fail(f"people.guidance_budget must be a whole number of 0 or more, not {budget!r}")
    questions = tuple(_question(q, fail) for q in value.get("questions", []))
    references = value.get("references", "researcher")
    if references not in REFERENCES:
        raise fail(f"people.references must be one of {', '.join(REFERENCES)}, not {references!r}")
    clock = value.get("clock_runs_when_paused", True)
    if not isinstance(clock, bool):
        raise fail(f"people.clock_runs_when_paused must be true or false, not {clock!r}")
    running = value.get("max_running")
    if running is not None and (isinstance(running, bool) or not isinstance(running, int) or running < 1):
        raise fail(f"people.max_running must be a whole number of 1 or more, not {running!r}")
    ids = [q.id for q in questions]
    if len(set(ids)) != len(ids):
        raise fail(f"people.questions: ids repeat ({ids})")
    return PeopleSpec(instructions=texts["instructions"], consent=texts["consent"], fields=tuple(fields),
                      roles=tuple(r.strip() for r in roles), order=str(order), guidance_budget=budget,
                      questions=questions, references=str(references), clock_runs_when_paused=clock,
                      max_running=running)


def _question(q: Any, fail: Any) -> Question:
    if not isinstance(q, dict) or set(q) - QUESTION_KEYS:
        raise fail(f"a [[people.questions]] entry takes {', '.join(sorted(QUESTION_KEYS))}")
    qid, text, kind = q.get("id"), q.get("text"), q.get("kind", "scale")
    if not isinstance(qid, str) or not QUESTION_ID.match(qid):
        raise fail(f"people.questions: id {qid!r} must be a short name (letters, digits, _)")
    if not isinstance(text, str) or not text.strip():
        raise fail(f"people.questions.{qid}: text is missing")
    if kind not in ("scale", "text"):
        raise fail(f"people.questions.{qid}: kind must be scale or text")
    required = q.get("required", kind == "scale")
    if not isinstance(required, bool):
        raise fail(f"people.questions.{qid}: required must be true or false")
    if kind == "text":
        return Question(id=qid, text=text.strip(), kind="text", required=required)
    scale = q.get("scale", [1, 7])
    if (not isinstance(scale, list) or len(scale) != 2 or not all(isinstance(x, int) and not isinstance(x, bool)
                                                                   for x in scale) or scale[0] >= scale[1]):
        raise fail(f"people.questions.{qid}: scale must be [low, high], two whole numbers")
    labels = q.get("labels")
    if labels is not None and (not isinstance(labels, list) or len(labels) != 2
                               or not all(isinstance(x, str) for x in labels)):
        raise fail(f"people.questions.{qid}: labels must be two texts (what the low and high ends mean)")
    return Question(id=qid, text=text.strip(), low=scale[0], high=scale[1],
                    labels=(labels[0], labels[1]) if labels else None, required=required)
