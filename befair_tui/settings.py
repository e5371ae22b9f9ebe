"""The setup screen's choices: their defaults, their limits, and what is remembered.

The choices are the options of engine.agent.settings that the setup screen offers (`at_setup`),
under their command-line names (plus `workspace`, the folder when the data are a workspace); their
defaults are the table's, as SessionConfig resolves them (the step time limit, the feedback), and a
session starts from them through the same table (`option_values`, SessionConfig.from_options), never
through a command line built and parsed again. Limits: `LIMITS` (the synth generator's own
minimums, the real data sets' sizes as maximums), checked by `problems()` with messages a person can act on.

Remembered settings live next to the session database (`<db stem>.settings.json` in its folder),
so two studies on two databases never share them, and hold no per-person choice: the participant
id is never remembered. No secret is ever remembered either: the API key typed in the setup
screen goes to that one session's process through its environment (befair_tui.launch), and
`save_choices` drops any field that looks like one, should a key field be added later.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from engine.agent.session_config import BEST_CRITERIA, FEEDBACK, SessionConfig
from engine.agent.settings import at_setup, default
from engine.measures.operating_point import canonical as canonical_operating_point
from engine.data.synth import FULL as SYNTH_FULL
from engine.paths import cache_dir
from engine.task import CUSTOM, LEVELS

_CONFIG = SessionConfig()

# field -> (lowest, highest, what it is); whole numbers only
LIMITS: dict[str, tuple[int, int, str]] = {
    "steps": (1, 500, "the step budget"),
    "step_timeout": (10, 86_400, "the time limit per step (seconds)"),
    "seed": (0, 2**31 - 1, "the seed"),
    # the generator's minimums (engine.data.synth.generate) and the real sets' sizes
    "synth_n_train": (21, SYNTH_FULL["n_train"], "the number of training images"),
    "synth_n_test": (18, SYNTH_FULL["n_test"], "the number of test images"),
    "synth_size": (16, 512, "the image size (pixels)"),
}
PER_PERSON = ("participant",)     # never remembered: the next person starts without it


@dataclass
class SetupChoices:
    level: str = _CONFIG.level
    custom_text: str = ""
    data: str = _CONFIG.data          # synth | workspace
    workspace: str = ""
    synth_n_train: int = default("synth_n_train")
    synth_n_test: int = default("synth_n_test")
    synth_size: int = default("synth_size")
    coder: str = _CONFIG.coder        # offline | openai
    model: str = _CONFIG.model or ""  # blank: the LLM configuration's model
    base_url: str = ""                # blank: the LLM configuration's server
    scaffold: bool = False            # the LLM writes features() and train() only (small models)
    steps: int = _CONFIG.steps
    step_timeout: float = _CONFIG.step_timeout
    best: str = _CONFIG.best
    feedback: str = _CONFIG.feedback or "auc"   # what the agent is shown of befair's measurements
    blind_test: bool = _CONFIG.blind_test
    operating_point: str = _CONFIG.operating_point   # where a lesion is called malignant (per-group figures)
    participant: str = ""
    seed: int = _CONFIG.seed

    def option_values(self) -> dict[str, Any]:
        """The session options these choices give (engine.agent.settings, by command-line name; None:
        not given), for SessionConfig.from_options: what `befair run` would read from its flags."""
        llm = self.coder == "openai"
        values: dict[str, Any] = {dest: getattr(self, dest) for dest in at_setup() if hasattr(self, dest)}
        for dest, option in at_setup().items():
            if dest in values and option.section == "llm":         # the LLM coder's, given when filled in
                values[dest] = (str(values[dest]).strip() or None) if llm else None
            elif dest in values and option.stored == "extra.synth" and self.data != "synth":
                values[dest] = None
        values["scaffold"] = "on" if llm and self.scaffold else None
        values["data"] = self.workspace if self.data == "workspace" else "synth"
        values["custom_text"] = self.custom_text if self.level == CUSTOM else None
        values["participant"] = self.participant.strip() or None
        return values

    def session_config(self) -> SessionConfig:
        """The session these choices start (ValueError, or a BefairError such as no sandbox here, when
        it cannot)."""
        return SessionConfig.from_options(self.option_values())

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "SetupChoices":
        """Known fields of the right type and within their limits; anything else keeps its default."""
        known = {f.name for f in fields(cls)}
        out = cls()
        for key, value in d.items():
            if key not in known or key in PER_PERSON:
                continue
            default = getattr(out, key)
            try:
                if isinstance(default, bool):
                    if not isinstance(value, bool):
                        continue
                elif isinstance(default, (int, float)):
                    if isinstance(value, bool) or float(value) != int(float(value)):
                        continue
                    value = type(default)(value)
                    low, high, _ = LIMITS.get(key, (None, None, ""))
                    if low is not None and high is not None and not low <= value <= high:
                        continue
                else:
                    value = str(value)
            except (TypeError, ValueError, OverflowError):
                continue
            setattr(out, key, value)
        if out.level not in (*LEVELS, CUSTOM):
            out.level = cls.level
        if out.best not in BEST_CRITERIA:
            out.best = cls.best
        if out.feedback not in FEEDBACK:
            out.feedback = cls.feedback
        try:
            out.operating_point = canonical_operating_point(out.operating_point)
        except ValueError:
            out.operating_point = cls.operating_point
        if out.data not in ("synth", "workspace"):
            out.data = cls.data
        if out.coder not in ("offline", "openai"):
            out.coder = cls.coder
        return out


def parse_whole(raw: str, field: str) -> int:
    """A whole number within LIMITS[field]; ValueError with a message naming the field and the range."""
    low, high, what = LIMITS[field]
    text = raw.strip().replace("_", "")
    sign = text[:1] in "+-" and text[:1] or ""
    digits = text[len(sign):]
    if not digits.isdigit() or not digits.isascii():
        hint = " (no decimals)" if digits.replace(".", "", 1).isdigit() else ""
        raise ValueError(f"{what[0].upper()}{what[1:]} must be a whole number from {low:,} to {high:,}{hint}, "
                         f"not {raw.strip()!r}")
    value = int(text)
    if not low <= value <= high:
        raise ValueError(f"{what[0].upper()}{what[1:]} must be from {low:,} to {high:,}, not {value:,}")
    return value


def problems(choices: SetupChoices) -> list[str]:
    """Why these choices cannot start a session (empty: they can)."""
    out = []
    for name in LIMITS:
        if name.startswith("synth_") and choices.data != "synth":
            continue
        try:
            parse_whole(f"{float(getattr(choices, name)):.10g}", name)
        except ValueError as exc:
            out.append(str(exc))
    if choices.level not in (*LEVELS, CUSTOM):
        out.append(f"unknown instruction level {choices.level!r}")
    if choices.level == CUSTOM and not choices.custom_text.strip():
        out.append("A custom instruction level needs its text.")
    if choices.best not in BEST_CRITERIA:
        out.append(f"\"best\" must be one of {', '.join(BEST_CRITERIA)}")
    return out


def settings_path(db: Path | str | None = None) -> Path:
    """`<db stem>.settings.json` beside the database; without a database, the cache folder."""
    if db is None:
        return cache_dir() / "settings.json"
    db = Path(db)
    return db.parent / f"{db.stem}.settings.json"


def load_choices(path: Path | None = None) -> SetupChoices:
    path = path or settings_path()
    try:
        data = json.loads(path.read_text())
        return SetupChoices.from_dict(data if isinstance(data, dict) else {})
    except (OSError, ValueError, AttributeError):
        return SetupChoices()


SECRET_WORDS = ("key", "token", "secret", "password")


def public_choices(choices: SetupChoices) -> dict[str, Any]:
    """What may be written to disk: every choice but secrets and per-person ones."""
    return {k: v for k, v in asdict(choices).items()
            if k not in PER_PERSON and not any(w in k.lower() for w in SECRET_WORDS)}


def save_choices(choices: SetupChoices, path: Path | None = None) -> None:
    path = path or settings_path()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(public_choices(choices), indent=2))
    except OSError:
        pass  # remembering is a convenience; never fail a session start over it
