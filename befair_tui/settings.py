"""The setup screen's remembered choices: engine.paths.cache_dir()/settings.json.

No secret is ever remembered: the LLM key comes from the environment (OPENAI_API_KEY) or the
LLM config file, and `save_choices` drops any field that looks like one, should a key field be
added to SetupChoices later."""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, fields
from pathlib import Path

from engine.paths import cache_dir


@dataclass
class SetupChoices:
    level: str = "fairness-metric"
    custom_text: str = ""
    data: str = "synth"               # synth | workspace
    workspace: str = ""
    synth_n_train: int = 1200
    synth_n_test: int = 400
    synth_size: int = 48
    coder: str = "offline"            # offline | openai
    model: str = ""
    steps: int = 12
    step_timeout: float = 300.0
    best: str = "validation"
    blind_test: bool = False
    participant: str = ""
    seed: int = 0

    @classmethod
    def from_dict(cls, d: dict) -> "SetupChoices":
        known = {f.name: f.type for f in fields(cls)}
        out = cls()
        for key, value in d.items():
            if key in known:
                try:
                    default = getattr(out, key)
                    setattr(out, key, type(default)(value) if default is not None else value)
                except (TypeError, ValueError):
                    pass
        return out


def settings_path() -> Path:
    return cache_dir() / "settings.json"


def load_choices(path: Path | None = None) -> SetupChoices:
    path = path or settings_path()
    try:
        return SetupChoices.from_dict(json.loads(path.read_text()))
    except (OSError, ValueError, AttributeError):
        return SetupChoices()


SECRET_WORDS = ("key", "token", "secret", "password")


def public_choices(choices: SetupChoices) -> dict:
    """What may be written to disk: every choice but secrets."""
    return {k: v for k, v in asdict(choices).items() if not any(w in k.lower() for w in SECRET_WORDS)}


def save_choices(choices: SetupChoices, path: Path | None = None) -> None:
    path = path or settings_path()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(public_choices(choices), indent=2))
    except OSError:
        pass  # remembering is a convenience; never fail a session start over it
