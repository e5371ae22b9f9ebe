"""Secrets never reach the database: a second line of defence behind the sandbox's environment.

The sandbox gives agent code no API key, but a key could still reach an event (an LLM that
echoes it, an error message quoting a URL with a token). `Redactor` replaces every known secret
in an event's payload before it is written.
"""
from __future__ import annotations

import os
from typing import Any

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
        if not self.secrets:
            return value
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {k: self.payload(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.payload(v) for v in value]
        return value
