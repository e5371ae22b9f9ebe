"""Secrets never reach the database: a second line of defence behind the sandbox's environment.

The sandbox gives agent code no API key, but a key could still reach an event (an LLM that
echoes it, an error message quoting a URL with a token). `Redactor` replaces every known secret
in an event before it is written (the session's writer calls it on the typed event).
"""
from __future__ import annotations

import dataclasses
import os
from typing import Any, TypeVar

T = TypeVar("T")

SECRET_ENV = ("OPENAI_API_KEY", "AZURE_OPENAI_API_KEY", "ANTHROPIC_API_KEY", "HF_TOKEN", "BEFAIR_API_KEY")
MIN_SECRET_LEN = 8   # shorter values (a dummy "sk-local") would redact ordinary words
MARK = "[redacted]"


class Redactor:
    def __init__(self, secrets: list[str | None] | None = None, *, from_env: bool = True):
        found = [s for s in (secrets or []) if s]
        if from_env:
            found += [os.environ.get(name) or "" for name in SECRET_ENV]
        self.secrets = sorted({s for s in found if len(s) >= MIN_SECRET_LEN}, key=len, reverse=True)

    def text(self, value: str) -> str:
        for secret in self.secrets:
            if secret in value:
                value = value.replace(secret, MARK)
        return value

    def payload(self, value: Any) -> Any:
        """`value` with every secret in its strings replaced: the same object when none is in it."""
        return self._clean(value) if self.secrets else value

    def typed(self, event: T) -> T:
        """A typed event (a frozen dataclass) with every secret in its fields replaced: the same
        event when none is in it, so the common case copies nothing."""
        return self._clean(event) if self.secrets else event

    def _clean(self, value: Any) -> Any:
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            cleaned = {k: self._clean(v) for k, v in value.items()}
            return value if all(cleaned[k] is v for k, v in value.items()) else cleaned
        if isinstance(value, list):
            items = [self._clean(v) for v in value]
            return value if all(a is b for a, b in zip(items, value, strict=True)) else items
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            changed = {f.name: clean for f in dataclasses.fields(value) if f.init
                       and (clean := self._clean(old := getattr(value, f.name))) is not old}
            return dataclasses.replace(value, **changed) if changed else value
        return value
