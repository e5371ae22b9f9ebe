"""A study spec (TOML): the grid of sessions a user study runs, and each session's settings.

    name = "levels-demo"
    levels = ["base", "fairness-methods"]     # any of the four, or {label = "...", text = "..."}
    repeats = 2
    steps = 3
    seed = 1                                  # repeat r runs with seed + r (or seeds = [..])
    feedback = "auc"                          # what the agent is shown: none | auc | groups, or a list
                                              # of them to vary it (each value an arm: base.feedback-groups)
    best = "validation"                       # what ★ and the search follow (or a list, as feedback)

    [coder]                                   # or [[coders]] for several agents
    name = "offline"

    [data]
    synth = { n_train = 300, n_test = 120, size = 32 }     # or workspace = "path/to/workspace"

The grid is coders × participants × levels × repeats, in that order; a cell's index is its place
in it, and its session id is derived from the study name and the cell (stable across runs of the
same spec). docs/study.md lists every key.
"""
from __future__ import annotations

import hashlib
import json
import re
import tomllib
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from engine.agent.session_config import SessionConfig
from engine.agent.settings import problem, spec_keys
from engine.errors import DataError
from engine.options import Option
from engine.study.people_spec import PeopleSpec, parse_people
from engine.task import CUSTOM, LEVELS

NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
LABEL_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,39}$")

# A session's settings are read from the one table of options (engine.agent.settings): each
# option's `spec` is its key here ("steps", "search.num_drafts", "data.synth.n_train", "coder.model");
# the other keys are the study's own: its grid, its people, what each session asks of a cluster.
SESSION_KEYS: dict[str, Option] = spec_keys()
STUDY_KEYS = {"name", "description", "levels", "repeats", "seeds", "participants", "coders", "resources", "people"}
TOP_KEYS = STUDY_KEYS | {key.split(".")[0] for key in SESSION_KEYS}
SEARCH_KEYS = {key.removeprefix("search.") for key in SESSION_KEYS if key.startswith("search.")}
CODER_KEYS = {"label", "factory", *SEARCH_KEYS,   # and any LLM setting ("coder.base_url", ...) for openai
              *(key.removeprefix("coder.") for key, o in SESSION_KEYS.items()
                if key.startswith("coder.") and o.stored != "llm")}
SYNTH_KEYS = {key.removeprefix("data.synth.") for key in SESSION_KEYS if key.startswith("data.synth.")}
# the spec key of each setting read on its own below (the grid's seed, the arms' best and feedback,
# the data, the coders, the session's time limit): the option stored as NAME is K[NAME] here
K = {o.name: key for key, o in SESSION_KEYS.items() if o.section != "llm" and o.name in
     ("steps", "seed", "best", "feedback", "blind_test", "data", "time_limit_s")}
# the other top-level keys, read as they are declared
FLAT_KEYS = {key: o for key, o in SESSION_KEYS.items() if "." not in key and key not in K.values()}
RESOURCE_KEYS = {"num_cpus", "num_gpus", "memory_mb"}
_BEST, _FEEDBACK = SESSION_KEYS[K["best"]], SESSION_KEYS[K["feedback"]]


class SpecError(DataError):
    """A study spec that cannot be run as written (the message names the key)."""


@dataclass(frozen=True)
class Level:
    label: str                    # the "prompt" column of the report
    level: str                    # an instruction level name, or "custom"
    text: str | None = None       # the instruction of a custom level
    settings: tuple[tuple[str, str], ...] = ()   # an arm's own agent settings (feedback, best) when a
                                                 # spec varies them: the label then names them too


@dataclass(frozen=True)
class CoderSpec:
    label: str                    # the "model" column of the report (the agent's name)
    name: str                     # offline | openai (make_coder), or "factory"
    model: str | None = None
    factory: str | None = None    # "module:callable" building a coder from a SessionConfig
    search: dict[str, Any] = field(default_factory=dict)    # num_drafts, failure_rate, ...
    llm: dict[str, Any] = field(default_factory=dict)       # base_url, budget_usd, ...: extra["llm"]


@dataclass(frozen=True)
class Cell:
    """One session of the grid."""

    index: int
    coder: CoderSpec
    participant: str | None
    level: Level
    repeat: int
    seed: int
    session_id: str


@dataclass
class StudySpec:
    name: str
    levels: list[Level]
    repeats: int
    seeds: list[int]
    coders: list[CoderSpec]
    steps: int                                # the session settings below: their options' when not given
    best: str
    feedback: str | None                      # what the agent is shown (None: the protocol's default)
    blind_test: bool
    participants: list[str | None] = field(default_factory=lambda: [None])
    data: dict[str, Any] = field(default_factory=lambda: {"synth": {}})
    limits: dict[str, Any] = field(default_factory=dict)      # step_timeout, eval_timeout, memory_limit_mb, sandbox
    resources: dict[str, float] = field(default_factory=lambda: {"num_cpus": 1.0, "num_gpus": 0.0})
    description: str = ""
    raw: dict[str, Any] = field(default_factory=dict)
    time_limit: float | None = None           # seconds per session (SessionConfig.time_limit_s)
    people: PeopleSpec | None = None          # sessions steered by people (engine.study.people)

    # -- the grid -------------------------------------------------------------------------
    def cells(self) -> list[Cell]:
        out: list[Cell] = []
        for coder in self.coders:
            for participant in self.participants:
                for level in self.levels:
                    for repeat in range(self.repeats):
                        out.append(Cell(len(out), coder, participant, level, repeat, self.seeds[repeat],
                                        self._session_id(coder, participant, level, repeat)))
        return out

    def _session_id(self, coder: CoderSpec, participant: str | None, level: Level, repeat: int) -> str:
        parts = [self.name]
        if len(self.coders) > 1:
            parts.append(coder.label)
        if participant is not None:
            parts.append(participant)
        parts += [level.label, f"r{repeat}"]
        return "-".join(parts)

    def session_config(self, cell: Cell) -> SessionConfig:
        """The settings of a cell's session (recorded in its session_started event)."""
        extra: dict[str, Any] = {"study": {"cell": cell.index, "level_label": cell.level.label,
                                           "agent": cell.coder.label}}
        if "synth" in self.data:
            extra["synth"] = dict(self.data["synth"])
        if cell.coder.llm:
            extra["llm"] = dict(cell.coder.llm)
        if cell.coder.factory:
            extra["study"]["factory"] = cell.coder.factory
        if self.people is not None:
            extra["study"]["people"] = True
            if self.people.guidance_budget is not None:
                extra["study"]["guidance_budget"] = self.people.guidance_budget
        kw: dict[str, Any] = dict(
            level=cell.level.level, custom_text=cell.level.text, steps=self.steps, best=self.best,
            blind_test=self.blind_test, coder=cell.coder.name, model=cell.coder.model, seed=cell.seed,
            data="synth" if "synth" in self.data else str(self.data["workspace"]),
            participant_id=cell.participant, study_id=self.name, repeat_index=cell.repeat, extra=extra,
            time_limit_s=self.time_limit,
        )
        kw.update(self.limits)
        kw.update(cell.coder.search)
        kw.update({"feedback": self.feedback} if self.feedback else {})
        kw.update(dict(cell.level.settings))
        if kw.get("sandbox", "auto") == "auto":
            kw["sandbox"] = "bwrap"  # as `befair run --sandbox auto`: bwrap, or a refusal where it cannot run
        return SessionConfig(**kw)

    def to_json(self) -> str:
        """The spec as recorded in the database (its TOML's table, canonical JSON)."""
        return json.dumps(self.raw, sort_keys=True, separators=(",", ":"))

    @property
    def digest(self) -> str:
        return hashlib.sha256(self.to_json().encode()).hexdigest()


# --------------------------------------------------------------------------- parsing


def load_spec(path: str | Path) -> StudySpec:
    """Read and check a study spec file (SpecError naming the problem)."""
    p = Path(path)
    try:
        raw = tomllib.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise SpecError(f"no study spec at {p}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise SpecError(f"cannot read the study spec {p}: {exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise SpecError(f"{p}: not valid TOML ({exc})") from None
    return parse_spec(raw, where=str(p))


def parse_spec(raw: dict[str, Any], *, where: str = "study spec") -> StudySpec:
    def fail(message: str) -> SpecError:
        return SpecError(f"{where}: {message}")

    unknown = sorted(set(raw) - TOP_KEYS)
    if unknown:
        raise fail(f"unknown key(s) {', '.join(unknown)}; known: {', '.join(sorted(TOP_KEYS))}")
    name = raw.get("name")
    if not isinstance(name, str) or not NAME_RE.match(name):
        raise fail("name must be 1-64 letters, digits, '.', '_' or '-' (starting with a letter or digit)")
    repeats = _int(raw.get("repeats", 1), "repeats", fail, minimum=1)
    participants = _participants(raw.get("participants"), fail)
    time_limit = raw.get(K["time_limit_s"])
    if time_limit is not None and _number(time_limit, K["time_limit_s"], fail) <= 0:
        raise fail(f"{K['time_limit_s']} must be a number of seconds above 0")
    spec = StudySpec(
        name=name, levels=_arms(_levels(raw.get("levels"), fail), raw, fail), repeats=repeats,
        seeds=_seeds(raw, repeats, fail), coders=_coders(raw, fail),
        steps=_read(raw, "steps", fail), blind_test=_read(raw, "blind_test", fail),
        best=_choices(raw.get(K["best"], _BEST.default), K["best"], _BEST.allowed() or (), fail)[0],
        feedback=None if K["feedback"] not in raw else _choices(raw[K["feedback"]], K["feedback"],
                                                                _FEEDBACK.allowed() or (), fail)[0],
        participants=participants, time_limit=None if time_limit is None else float(time_limit),
        people=parse_people(raw.get("people"), participants, fail),
        data=_data(raw.get("data"), fail), limits=_limits(raw, fail),
        resources=_resources(raw.get("resources"), fail),
        description=str(raw.get("description") or ""), raw=raw,
    )
    try:  # every cell's settings must be a valid session (levels, limits, search settings)
        for cell in spec.cells():
            spec.session_config(cell)
    except ValueError as exc:
        raise fail(str(exc)) from None
    return spec


def _int(value: Any, key: str, fail: Any, *, minimum: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise fail(f"{key} must be a whole number, not {value!r}")
    if minimum is not None and value < minimum:
        raise fail(f"{key} must be at least {minimum} (got {value})")
    return value


def _number(value: Any, key: str, fail: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        raise fail(f"{key} must be a number of 0 or more, not {value!r}")
    return float(value)


def _bool(value: Any, key: str, fail: Any) -> bool:
    if not isinstance(value, bool):
        raise fail(f"{key} must be true or false, not {value!r}")
    return value


def _choice(value: Any, key: str, choices: tuple[str, ...], fail: Any) -> str:
    if value not in choices:
        raise fail(f"{key} must be one of {', '.join(choices)}, not {value!r}")
    return str(value)


def _choices(value: Any, key: str, choices: tuple[str, ...], fail: Any) -> list[str]:
    """A setting's value, or the values a study varies it over (a list)."""
    values = value if isinstance(value, list) else [value]
    if not values or len(set(map(str, values))) != len(values):
        raise fail(f"{key} must be one of {', '.join(choices)} or a list of different ones, not {value!r}")
    return [_choice(v, key, choices, fail) for v in values]


VARIED = ("feedback", "best")   # the agent settings a spec may vary (a list): each value is an arm (by name)


def _arms(levels: list[Level], raw: dict[str, Any], fail: Any) -> list[Level]:
    """Each level once per combination of the varied settings, its label naming the arm
    (`base.feedback-groups`), so that the report compares the arms as it compares levels."""
    varied = [(name, _choices(raw[K[name]], K[name], SESSION_KEYS[K[name]].allowed() or (), fail))
              for name in VARIED if isinstance(raw.get(K[name]), list) and len(raw[K[name]]) > 1]
    for key, values in varied:
        levels = [replace(lv, label=f"{lv.label}.{key}-{v}", settings=(*lv.settings, (key, v)))
                  for lv in levels for v in values]
    if any(len(lv.label) > 64 for lv in levels):
        raise fail("an arm's label (level.setting-value) is over 64 characters: shorten the level labels")
    return levels


def _levels(value: Any, fail: Any) -> list[Level]:
    if not isinstance(value, list) or not value:
        raise fail(f"levels must be a non-empty list of {', '.join(LEVELS)} or {{label, text}} tables")
    out: list[Level] = []
    for item in value:
        if isinstance(item, str):
            if item not in LEVELS:
                raise fail(f"unknown level {item!r}; one of {', '.join(LEVELS)}, or {{label = ..., text = ...}}")
            out.append(Level(label=item, level=item))
        elif isinstance(item, dict):
            label, text = item.get("label"), item.get("text")
            if set(item) - {"label", "text"} or not isinstance(label, str) or not LABEL_RE.match(label) \
                    or not isinstance(text, str) or not text.strip():
                raise fail("a custom level is {label = \"short-name\", text = \"the instruction\"} "
                           "(label: letters, digits, '.', '_', '-')")
            out.append(Level(label=label, level=CUSTOM, text=text))
        else:
            raise fail(f"a level is a name or a {{label, text}} table, not {item!r}")
    labels = [lv.label for lv in out]
    if len(set(labels)) != len(labels):
        raise fail(f"level labels repeat: {labels}")
    return out


def _seeds(raw: dict[str, Any], repeats: int, fail: Any) -> list[int]:
    if "seeds" in raw:
        seeds = raw["seeds"]
        if K["seed"] in raw:
            raise fail(f"give {K['seed']} or seeds, not both")
        if not isinstance(seeds, list) or len(seeds) != repeats:
            raise fail(f"seeds must list one seed per repeat ({repeats})")
        return [_int(s, "seeds", fail) for s in seeds]
    base = _read(raw, "seed", fail)
    return [base + r for r in range(repeats)]


def _coders(raw: dict[str, Any], fail: Any) -> list[CoderSpec]:
    if "coder" in raw and "coders" in raw:
        raise fail("give [coder] or [[coders]], not both")
    tables = raw.get("coders", [raw.get("coder", {"name": "offline"})])
    if not isinstance(tables, list) or not tables or not all(isinstance(t, dict) for t in tables):
        raise fail("coders must be a list of tables ([[coders]])")
    out = [_coder(t, fail) for t in tables]
    labels = [c.label for c in out]
    if len(set(labels)) != len(labels):
        raise fail(f"coder labels repeat ({labels}); give each a label")
    return out


def _coder(table: dict[str, Any], fail: Any) -> CoderSpec:
    factory = table.get("factory")
    name = table.get("name", "factory" if factory else None)
    if factory is not None and (not isinstance(factory, str) or ":" not in factory):
        raise fail(f"coder factory must be \"module:callable\", not {factory!r}")
    if name not in ("offline", "openai", "factory") or (name == "factory") != (factory is not None):
        raise fail(f"coder name must be offline or openai (or give factory = \"module:callable\"), not {name!r}")
    model = table.get("model")
    if name == "openai" and not model:
        raise fail("an openai coder needs its model")
    label = table.get("label") or (model if name == "openai" else name)
    if not isinstance(label, str) or not LABEL_RE.match(label.replace("/", "_").replace(":", "_")):
        raise fail(f"coder label {label!r}: letters, digits, '.', '_', '-'")
    label = label.replace("/", "_").replace(":", "_")
    search = _search({k: table[k] for k in SEARCH_KEYS if k in table}, fail)
    llm = {k: v for k, v in table.items() if k not in CODER_KEYS}
    if "api_key" in llm:
        raise fail("never put an API key in a study spec; use OPENAI_API_KEY or ~/.config/befair/llm.toml")
    if llm and name != "openai":
        raise fail(f"unknown coder key(s) {', '.join(sorted(llm))} for the {name} coder")
    return CoderSpec(label=label, name=str(name), model=model, factory=factory, search=search, llm=llm)


def _participants(value: Any, fail: Any) -> list[str | None]:
    if value is None:
        return [None]
    if not isinstance(value, list) or not value or not all(isinstance(p, str) and LABEL_RE.match(p) for p in value):
        raise fail("participants must be a list of ids (letters, digits, '.', '_', '-')")
    if len(set(value)) != len(value):
        raise fail("participant ids repeat")
    return list(value)


def _data(value: Any, fail: Any) -> dict[str, Any]:
    value = {"synth": {}} if value is None else value
    if not isinstance(value, dict) or len(value) != 1 or not set(value) <= {"synth", "workspace"}:
        raise fail("[data] takes synth = {n_train, n_test, size, seed} or workspace = \"path\"")
    if "workspace" in value:
        if not isinstance(value["workspace"], str) or not value["workspace"]:
            raise fail("data.workspace must be the path of a prepared workspace")
        return {"workspace": str(Path(value["workspace"]).expanduser().resolve())}
    synth = value["synth"]
    if not isinstance(synth, dict) or set(synth) - SYNTH_KEYS:
        raise fail(f"data.synth takes {', '.join(sorted(SYNTH_KEYS))}")
    return {"synth": {k: _value(SESSION_KEYS[f"data.synth.{k}"], v, f"data.synth.{k}", fail) for k, v in synth.items()}}


def _limits(raw: dict[str, Any], fail: Any) -> dict[str, Any]:
    """The session settings read as declared (step_timeout, memory_limit_mb, sandbox, ...) and [search]."""
    out = {option.name: _value(option, raw[key], key, fail) for key, option in FLAT_KEYS.items() if key in raw}
    search = raw.get("search") or {}
    if not isinstance(search, dict) or set(search) - SEARCH_KEYS:
        raise fail(f"[search] takes {', '.join(sorted(SEARCH_KEYS))}")
    out.update(_search(search, fail))
    return out


def _search(table: dict[str, Any], fail: Any) -> dict[str, Any]:
    """The search's settings, checked as `befair run` checks its flags."""
    return {SESSION_KEYS[f"search.{key}"].name: _value(SESSION_KEYS[f"search.{key}"], value, key, fail)
            for key, value in table.items()}


def _read(raw: dict[str, Any], name: str, fail: Any) -> Any:
    """The setting stored as `name`, read from its spec key (its declared default when not given)."""
    option = SESSION_KEYS[K[name]]
    return _value(option, raw.get(K[name], option.default), K[name], fail)


def _value(option: Option, value: Any, key: str, fail: Any) -> Any:
    """A session setting's value, of its option's type, among its choices and within its rule."""
    if option.type is bool:
        return _bool(value, key, fail)
    if option.type is int:
        value = _int(value, key, fail)
    elif option.type is float:
        value = _number(value, key, fail)
    else:
        choices = option.allowed()
        if choices is not None:
            return _choice(value, key, choices, fail)
        if not isinstance(value, str):
            raise fail(f"{key} must be text, not {value!r}")
    said = problem(option, value, key)
    if said:
        raise fail(said)
    return value


def _resources(value: Any, fail: Any) -> dict[str, float]:
    value = value or {}
    if not isinstance(value, dict) or set(value) - RESOURCE_KEYS:
        raise fail(f"[resources] takes {', '.join(sorted(RESOURCE_KEYS))}")
    out = {"num_cpus": 1.0, "num_gpus": 0.0}
    out.update({k: _number(v, f"resources.{k}", fail) for k, v in value.items()})
    return out
