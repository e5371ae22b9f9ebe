"""The setup screen's choices: their defaults, their limits, and what is remembered.

The choices are generated from the options of engine.agent.settings that the setup screen offers
(`at_setup`): a field each, under its command-line name, of its type, its default as a session
resolves it (the step time limit, the feedback; the LLM coder's blank: its configuration's), plus
`workspace`, the folder when the data are a workspace; the API key is typed, never kept. A session
starts from them through the same table (`option_values`, SessionConfig.from_options), never
through a command line built and parsed again. Limits: `LIMITS`, the declared `bounds` of the whole
numbers (the synth generator's own minimums, the real data sets' sizes as maximums), checked by
`problems()` with messages a person can act on.

Remembered settings live next to the session database (`<db stem>.settings.json` in its folder),
so two studies on two databases never share them, and hold no per-person choice: the participant
id is never remembered. No secret is ever remembered either: the API key typed in the setup
screen goes to that one session's process through its environment (befair_tui.launch), and
`save_choices` drops any field that looks like one, should a key field be added later.
"""
from __future__ import annotations

import json
from dataclasses import Field, asdict, dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

import engine.agent.coder_registry  # noqa: F401  the coder kinds: the coder option's choices
from engine.agent.session_config import SessionConfig
from engine.agent.settings import at_setup
from engine.measures.operating_point import canonical as canonical_operating_point
from engine.options import Option
from engine.paths import cache_dir
from engine.task import CUSTOM

_CONFIG = SessionConfig()
SECRET_WORDS = ("key", "token", "secret", "password")
PER_PERSON = ("participant",)     # never remembered: the next person starts without it
DATA_KINDS = ("synth", "workspace")   # the data choice: SynthDerm, or the `workspace` folder
# field -> (lowest, highest, what it is); whole numbers only
LIMITS: dict[str, tuple[int, int, str]] = {dest: (*o.bounds, o.what) for dest, o in at_setup().items() if o.bounds}
_Choices = TypeVar("_Choices")


def _secret(name: str) -> bool:
    return any(w in name.lower() for w in SECRET_WORDS)


def _default(option: Option) -> Any:
    """A choice's default: the session's, as it resolves it; an LLM setting's blank (its configuration's)."""
    if option.section == "llm":
        return option.default if isinstance(option.default, bool) else ""
    value = getattr(_CONFIG, option.name, option.default)
    return "" if value is None else value


def _offered(cls: type[_Choices]) -> type[_Choices]:
    """`cls` made a dataclass with a field per option the setup screen offers (a secret excepted), then
    `workspace`."""
    offered = {dest: _default(o) for dest, o in at_setup().items() if not _secret(dest)}
    offered["workspace"] = ""
    cls.__annotations__ = {name: type(value) for name, value in offered.items()}
    for name, value in offered.items():
        setattr(cls, name, value)
    return dataclass(cls)


@_offered
class SetupChoices:
    if TYPE_CHECKING:   # the fields are generated (_offered): each choice is its option's type
        __dataclass_fields__: ClassVar[dict[str, Field[Any]]]

        def __init__(self, **choices: Any) -> None: ...
        def __getattr__(self, name: str) -> Any: ...
        def __setattr__(self, name: str, value: Any) -> None: ...

    def option_values(self) -> dict[str, Any]:
        """The session options these choices give (engine.agent.settings, by command-line name; None:
        not given), for SessionConfig.from_options: what `befair run` would read from its flags."""
        return {dest: self._given(dest, o) for dest, o in at_setup().items() if hasattr(self, dest)} | {
            "data": self.workspace if self.data == "workspace" else "synth",
            "custom_text": self.custom_text if self.level == CUSTOM else None,
            "participant": self.participant.strip() or None}

    def _given(self, dest: str, option: Option) -> Any:
        """A choice as its option's value: the LLM coder's when it is chosen and filled in (a switch: "on"),
        SynthDerm's when the data are generated."""
        value = getattr(self, dest)
        if option.section == "llm":
            if self.coder != "openai":
                return None
            return ("on" if value else None) if isinstance(value, bool) else (str(value).strip() or None)
        return None if option.stored == "extra.synth" and self.data != "synth" else value

    def session_config(self) -> SessionConfig:
        """The session these choices start (ValueError, or a BefairError such as no sandbox here, when
        it cannot)."""
        return SessionConfig.from_options(self.option_values())

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "SetupChoices":
        """Known fields of the right type, within their limits and among their choices; anything else
        keeps its default."""
        out, defaults = cls(), cls()
        known = {f.name for f in fields(out)} - set(PER_PERSON)
        for key, value in d.items():
            kept = _kept(key, value, getattr(out, key)) if key in known else None
            if kept is not None:
                setattr(out, key, kept)
        for dest, option in at_setup().items():
            allowed = option.allowed()
            if allowed is not None and getattr(out, dest) not in allowed:
                setattr(out, dest, getattr(defaults, dest))
        try:
            out.operating_point = canonical_operating_point(out.operating_point)
        except ValueError:
            out.operating_point = defaults.operating_point
        if out.data not in DATA_KINDS:
            out.data = defaults.data
        return out


def _kept(key: str, value: Any, default: Any) -> Any:
    """`value` as the choice `key` keeps it (the type of its default, within LIMITS); None: not kept."""
    try:
        if isinstance(default, bool):
            return value if isinstance(value, bool) else None
        if isinstance(default, (int, float)):
            if isinstance(value, bool) or float(value) != int(float(value)):
                return None
            value = type(default)(value)
            low, high, _ = LIMITS.get(key, (None, None, ""))
            return None if low is not None and high is not None and not low <= value <= high else value
        return str(value)
    except (TypeError, ValueError, OverflowError):
        return None


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
    offered = at_setup()
    if choices.level not in (offered["level"].allowed() or ()):
        out.append(f"unknown instruction level {choices.level!r}")
    if choices.level == CUSTOM and not choices.custom_text.strip():
        out.append("A custom instruction level needs its text.")
    criteria = offered["best"].allowed() or ()
    if choices.best not in criteria:
        out.append(f"\"best\" must be one of {', '.join(criteria)}")
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


def public_choices(choices: SetupChoices) -> dict[str, Any]:
    """What may be written to disk: every choice but secrets and per-person ones."""
    return {k: v for k, v in asdict(choices).items() if k not in PER_PERSON and not _secret(k)}


def save_choices(choices: SetupChoices, path: Path | None = None) -> None:
    path = path or settings_path()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(public_choices(choices), indent=2))
    except OSError:
        pass  # remembering is a convenience; never fail a session start over it
