"""Setup: instruction level (full text shown, or a custom text), data, coder (for an
OpenAI-compatible server: its address, model and an API key for this session only), budget, time
limit, seed, what "best" means, blinded test metrics, the cut-off per-group figures use (the
operating point) and a participant id.

Every number is checked against befair_tui.settings.LIMITS as it is typed, with a message that
says what is allowed. The choices offered, the ranges and the defaults are the declared options'
(engine.agent.settings.at_setup: `befair run`'s); choices are remembered per database, except the
participant id and the API key, which never are."""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from rich.text import Text
from textual import events, on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import Screen
from textual.widgets import (Button, Checkbox, Input, Label, RadioSet, Select,
                             Static, TextArea)

from engine.agent.coder_registry import CODERS
from engine.agent.settings import at_setup
from engine.coders.llm import scaffold
from engine.session.feedback import FEEDBACK_LABEL
from engine.session.selection import CRITERION_LABEL
from engine.task import CUSTOM, LEVELS, METRIC_LINE

from befair_tui.navigation import navigator
from befair_tui.settings import LIMITS, SetupChoices, load_choices, parse_whole, save_choices
from befair_tui.widgets.keys_footer import KeysFooter
from befair_tui.widgets.toggles import PlainCheckbox, PlainRadioButton

if TYPE_CHECKING:
    from engine.coders.llm.config import LlmConfig

OFFERED = at_setup()   # the options the form offers: their choices, ranges (LIMITS) and defaults (SetupChoices)
LEVEL_NAMES = list(OFFERED["level"].allowed() or ())
NUMBER_FIELDS = {dest.replace("_", "-"): dest for dest in LIMITS}   # input id -> SetupChoices field


# one line under each choice: what it does, in words
WORKSPACE_HINT = ("A folder made once from your own images (Fitzpatrick17k and DDI format) by "
                  "`befair data prepare`: the agent's copy of the data and the held-out images it never sees.")
STEPS_HINT = ("Each step writes and runs one pipeline; a step that runs past the time limit is stopped. "
              "The seed fixes the random choices (data split, the simulated agent's picks): the same seed "
              "repeats a session, another seed varies it.")
BEST_HINT = ("Which node is marked ★, which one the search builds on next, and which is exported at the end (the "
             "help, ?, explains each). Blinding hides the test figures until the session ends.")
FEEDBACK_HINT = ("What the agent is told of befair's own measurements of its earlier pipelines. The same at every "
                 "instruction level, so that two levels differ in their instruction alone: turning skin-tone "
                 "groups on is itself a way of steering, and is recorded.")
CUT_OFF_HINT = ("Cut-off: where a lesion is called malignant in each skin tone's sensitivity, specificity and "
                "melanomas missed per 100. Set by sensitivity, it is chosen on each pipeline's validation images.")
# the cut-offs offered (SessionConfig.operating_point); `befair run --operating-point` takes any other
CUT_OFFS = [("catch 90 % of malignant", "sensitivity:0.90"), ("catch 95 % of malignant", "sensitivity:0.95"),
            ("catch 80 % of malignant", "sensitivity:0.80"), ("fixed probability 0.5", "probability:0.50"),
            ("fixed probability 0.3", "probability:0.30")]
PARTICIPANT_HINT = "For user studies: recorded with the session (never remembered for the next one)."
OFFLINE_NOTE = ("A simulated agent, no language model: it writes real, runnable pipelines from a set of "
                "building blocks (models, image preparation, fairness methods), led by the instruction level "
                "and your guidance. Labelled as simulated everywhere.")
LLM_NOTE = ("A language model on any OpenAI-compatible server (OpenAI, vLLM, Ollama, llama.cpp) writes "
            "the pipelines.")


def _range(field: str) -> str:
    low, high, _ = LIMITS[field]
    return f"{low:,}–{high:,}"


def _choice_column(label: str, choices: RadioSet) -> ComposeResult:
    """The narrow left column of a setup row: what is chosen, and the choices."""
    with Vertical(classes="col-narrow"):
        yield Label(label)
        yield choices


def adequacy_warnings(choices: SetupChoices) -> list[str]:
    """engine.evaluation.adequacy's warnings for the data these choices name ([] when they cannot be read)."""
    from engine.evaluation.adequacy import synth_counts, warnings, workspace_counts

    try:
        if choices.data == "synth":
            return warnings(synth_counts(int(choices.synth_n_train), int(choices.synth_n_test)))
        from engine.data.be_fair_layout import open_workspace

        return warnings(workspace_counts(open_workspace(Path(choices.workspace).expanduser())))
    except Exception:  # noqa: BLE001 - an unreadable workspace is the form's own problem, said above
        return []


def llm_problem(overrides: dict[str, str] | None = None) -> str | None:
    """Why the OpenAI-compatible coder cannot reach a model with these settings (None: it can)."""
    try:
        from engine.coders.llm.config import LlmConfig

        given = {k: v for k, v in (overrides or {}).items() if v}
        return LlmConfig.load(given).problem()
    except Exception as exc:  # noqa: BLE001 - a broken config file is a reason too
        return f"The LLM coder's configuration cannot be read: {exc}"


def llm_defaults() -> tuple[str, str]:
    """(model, server) the LLM configuration would use when the fields stay blank."""
    try:
        from engine.coders.llm.config import LlmConfig

        config = LlmConfig.load()
        return config.model, config.base_url or "OpenAI (api.openai.com)"
    except Exception:  # noqa: BLE001
        return "", ""


class SetupScreen(Screen[None]):
    BINDINGS = [
        Binding("ctrl+s", "start", "Start session", id="setup-start", priority=True),
        Binding("ctrl+o", "sessions", "Sessions", id="setup-sessions"),
        Binding("ctrl+q", "app.quit", "Quit", id="quit"),
    ]

    def __init__(self, choices: SetupChoices | None = None, settings_file: Path | None = None) -> None:
        super().__init__()
        self.settings_file = settings_file
        self.choices = choices or load_choices(settings_file)
        self.llm_problem = llm_problem()
        self.problems: list[str] = []
        self.adequacy: list[str] = []  # skin-tone groups too few to judge in the data chosen
        self._scaffold_advised = False  # the server check has turned the scaffold on once

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="setup"):
            yield Static("befair · new session", classes="setup-title")
            yield from self._compose_level()
            yield from self._compose_data()
            yield from self._compose_coder()
            yield from self._compose_budget()
            yield Static("", id="setup-adequacy")
        with Vertical(id="setup-start-bar"):  # below the scrolling form: Start stays in view however tall it grows
            yield Static("", id="setup-problems")
            yield from self._compose_start()
        yield KeysFooter()

    def _compose_level(self) -> ComposeResult:
        c = self.choices
        with Horizontal(classes="row stack"):
            yield from _choice_column("Instruction level", RadioSet(
                *[PlainRadioButton(name, value=name == c.level, id=f"level-{name}") for name in LEVEL_NAMES],
                id="level"))
            with Vertical(classes="col-wide"):
                yield Static("", id="level-text")
                yield TextArea(c.custom_text, id="custom-text", classes="hidden")

    def _compose_data(self) -> ComposeResult:
        c = self.choices
        with Horizontal(classes="row stack"):
            yield from _choice_column("Data", RadioSet(
                PlainRadioButton("SynthDerm (generated)", value=c.data == "synth", id="data-synth"),
                PlainRadioButton("prepared workspace", value=c.data == "workspace", id="data-workspace"),
                id="data"))
            with Vertical(classes="col-wide"):
                with Vertical(id="synth-sizes"):
                    with Horizontal(classes="inline"):
                        yield Label("train images")
                        yield Input(str(c.synth_n_train), id="synth-n-train", type="integer")
                        yield Label("test images")
                        yield Input(str(c.synth_n_test), id="synth-n-test", type="integer")
                        yield Label("px")
                        yield Input(str(c.synth_size), id="synth-size", type="integer")
                    yield Static(f"[dim]train {_range('synth_n_train')} · test {_range('synth_n_test')} · "
                                 f"px {_range('synth_size')}. Generated images: their numbers are not "
                                 "comparable to the published DDI figures.[/dim]", classes="hint")
                with Vertical(id="workspace-box", classes="hidden"):
                    yield Input(c.workspace, placeholder="path to a prepared workspace folder", id="workspace")
                    yield Static(f"[dim]{WORKSPACE_HINT}[/dim]", classes="hint")

    def _compose_coder(self) -> ComposeResult:
        c = self.choices
        default_model, default_server = llm_defaults()
        with Horizontal(classes="row stack"):
            yield from _choice_column("Coder", RadioSet(
                *[PlainRadioButton(kind.label, value=c.coder == kind.name, id=f"coder-{kind.name}")
                  for kind in CODERS.values()],
                id="coder"))
            with Vertical(classes="col-wide"):
                yield Static("", id="coder-note")
                with Vertical(id="llm-fields", classes="hidden"):
                    yield Input(c.base_url, placeholder=f"server address (blank: {default_server})",
                                id="base-url")
                    yield Input(c.model, placeholder=f"model (blank: {default_model})", id="model")
                    yield Input("", placeholder="API key (blank: from your environment or LLM config)",
                                id="api-key", password=True)
                    yield Static("[dim]The key is given to this session's process only, through its "
                                 "environment; it is never saved.[/dim]", classes="hint")
                    yield PlainCheckbox("Scaffold, for small local models", c.scaffold, id="scaffold")
                    yield Static("[dim]befair writes the data loading, the metric and predict(); the model "
                                 "writes only features() and train(). Check server ticks it for models "
                                 f"under 7B parameters. {scaffold.RULES_OUT}[/dim]", classes="hint")
                    with Horizontal(classes="row inline"):
                        yield Button("Check server", id="llm-check-button")
                        yield Static("", id="llm-check")

    def _compose_budget(self) -> ComposeResult:
        """Steps, time limit and seed; what "best" means and blinding."""
        c = self.choices
        with Vertical(classes="row"):
            with Horizontal(classes="inline stack"):
                yield Label(f"Steps ({_range('steps')})")
                yield Input(str(c.steps), id="steps", type="integer")
                yield Label(f"Time limit per step, s (≥ {LIMITS['step_timeout'][0]})")
                yield Input(f"{c.step_timeout:.0f}", id="step-timeout", type="integer")
                yield Label("Seed")
                yield Input(str(c.seed), id="seed", type="integer")
            yield Static(f"[dim]{STEPS_HINT}[/dim]", classes="hint")
        with Vertical(classes="row"):
            with Horizontal(classes="inline stack"):
                yield Label('★ and the search follow')
                yield Select([(CRITERION_LABEL[b], b) for b in OFFERED["best"].allowed() or ()], value=c.best,
                             allow_blank=False, id="best")
                yield PlainCheckbox("Blind test metrics until the end", c.blind_test, id="blind")
            yield Static(f"[dim]{BEST_HINT}[/dim]", classes="hint")
        with Vertical(classes="row"):
            with Horizontal(classes="inline stack"):
                yield Label("The agent is shown")
                yield Select([(FEEDBACK_LABEL[f], f) for f in OFFERED["feedback"].allowed() or ()], value=c.feedback,
                             allow_blank=False, id="feedback")
                yield Label("Cut-off")
                offered = CUT_OFFS + ([] if c.operating_point in dict(CUT_OFFS).values()
                                      else [(c.operating_point, c.operating_point)])
                yield Select(offered, value=c.operating_point, allow_blank=False, id="operating-point")
            yield Static(f"[dim]{FEEDBACK_HINT} {CUT_OFF_HINT}[/dim]", classes="hint")

    def _compose_start(self) -> ComposeResult:
        with Vertical(classes="start-row"):
            with Horizontal(classes="inline"):
                yield Label("Participant id")
                yield Input("", placeholder="not remembered", id="participant")
                yield Button("Start session", id="start", variant="primary")
            yield Static(f"[dim]{PARTICIPANT_HINT}[/dim]", classes="hint")

    def on_mount(self) -> None:
        self._update_level()
        self._update_data()
        self._update_coder()
        self.query_one("#level", RadioSet).focus()

    def on_resize(self, event: events.Resize) -> None:
        # 80 columns: the option lists go above their details instead of beside them
        self.set_class(event.size.width < 100, "-narrow")

    # -- reactions ------------------------------------------------------------------------
    def _pressed_id(self, radio_id: str) -> str | None:
        button = self.query_one(f"#{radio_id}", RadioSet).pressed_button
        return button.id if button is not None else None

    @on(RadioSet.Changed, "#level")
    def _update_level(self) -> None:
        pressed = self._pressed_id("level") or "level-base"
        level = pressed.removeprefix("level-")
        custom = self.query_one("#custom-text", TextArea)
        custom.set_class(level != CUSTOM, "hidden")
        text = self.query_one("#level-text", Static)
        if level == CUSTOM:
            text.update("Custom instruction (recorded verbatim):")
        else:
            text.update(f"[b]{level}[/b] — the instruction the agent gets:\n“{LEVELS[level]}”\n"
                        f"[dim]Metric: {METRIC_LINE}[/dim]")

    @on(RadioSet.Changed, "#data")
    def _update_data(self) -> None:
        workspace = self._pressed_id("data") == "data-workspace"
        self.query_one("#synth-sizes").set_class(workspace, "hidden")
        self.query_one("#workspace-box").set_class(not workspace, "hidden")
        self._show_problems(live=True)

    @on(RadioSet.Changed, "#coder")
    def _update_coder(self) -> None:
        llm = self._pressed_id("coder") == "coder-openai"
        note = self.query_one("#coder-note", Static)
        self.query_one("#llm-fields").set_class(not llm, "hidden")
        if not llm:
            note.update(OFFLINE_NOTE)
            return
        problem = llm_problem(self._llm_overrides())
        if problem:
            note.update(f"[red]Not configured.[/red] {problem} Or fill in the server address and/or key below.")
        else:
            note.update(LLM_NOTE)
            self.check_server()

    @on(Button.Pressed, "#llm-check-button")
    def check_server(self) -> None:
        """`befair llm check` for the server filled in (in a thread: a slow model takes seconds)."""
        from engine.coders.llm.config import LlmConfig

        box = self.query_one("#llm-check", Static)
        try:
            config = LlmConfig.load({k: v for k, v in self._llm_overrides().items() if v})
        except Exception as exc:  # noqa: BLE001 - shown, like any other setup problem
            box.update(f"[red]{exc}[/red]")
            return
        if config.problem():
            box.update("")
            return
        box.update(f"[dim]checking {config.base_url or 'OpenAI'} ({config.model}) …[/dim]")
        self.run_worker(lambda: self._check(config), thread=True, exclusive=True, group="llm-check",
                        name="llm-check")

    def _check(self, config: LlmConfig) -> None:
        from engine.coders.llm.server_check import check_server

        scaffold = False
        try:
            report = check_server(config, timeout=60)
            lines, scaffold = report.lines(), bool(report.settings.get("scaffold"))
        except Exception as exc:  # noqa: BLE001
            lines = [f"FAILED   the check itself failed: {exc}"]
        self.app.call_from_thread(self._show_check, lines, scaffold)

    def _show_check(self, lines: list[str], scaffold: bool = False) -> None:
        from rich.markup import escape

        box = self.query_one("#scaffold", Checkbox)
        if scaffold and not box.value and not self._scaffold_advised:   # recommended for this (small) model
            self._scaffold_advised = True     # once: a person who unticks it keeps it off
            box.value = True
            lines = [*lines, "scaffold turned on for this model (untick it to let the model write whole pipelines)"]
        text = "\n".join(escape(line) for line in lines)
        failed = any(line.startswith("FAILED") for line in lines)
        self.query_one("#llm-check", Static).update(f"[red]{text}[/red]" if failed else text)

    def _llm_overrides(self) -> dict[str, str]:
        return {"base_url": self.query_one("#base-url", Input).value.strip(),
                "model": self.query_one("#model", Input).value.strip(),
                "api_key": self.query_one("#api-key", Input).value.strip()}

    @on(Input.Changed)
    def _changed(self, event: Input.Changed) -> None:
        if event.input.id in ("base-url", "api-key", "model"):
            self._update_coder()
        self._show_problems(live=True)

    # -- reading the form -----------------------------------------------------------------
    def form_problems(self) -> tuple[SetupChoices, list[str]]:
        """The form's values and, for each one that cannot start a session, why."""
        c = SetupChoices(**vars(self.choices))
        problems: list[str] = []
        c.level = (self._pressed_id("level") or "level-base").removeprefix("level-")
        c.custom_text = self.query_one("#custom-text", TextArea).text
        if c.level == CUSTOM and not c.custom_text.strip():
            problems.append("A custom instruction level needs its text.")
        c.data = "workspace" if self._pressed_id("data") == "data-workspace" else "synth"
        for wid, field in NUMBER_FIELDS.items():
            if field.startswith("synth_") and c.data != "synth":
                continue
            try:
                value = parse_whole(self.query_one(f"#{wid}", Input).value, field)
            except ValueError as exc:
                problems.append(str(exc))
                continue
            setattr(c, field, float(value) if field == "step_timeout" else value)
        if c.data == "workspace":
            c.workspace = self.query_one("#workspace", Input).value.strip()
            if not c.workspace or not Path(c.workspace).expanduser().is_dir():
                problems.append(f"The workspace folder {c.workspace!r} does not exist.")
        c.coder = "openai" if self._pressed_id("coder") == "coder-openai" else "offline"
        overrides = self._llm_overrides()
        c.base_url, c.model = overrides["base_url"], overrides["model"]
        if c.coder == "openai":
            if c.base_url and not c.base_url.startswith(("http://", "https://")):
                problems.append(f"The server address must start with http:// or https://, not {c.base_url!r}.")
            problem = llm_problem(overrides)
            if problem:
                problems.append(problem)
        c.scaffold = self.query_one("#scaffold", Checkbox).value
        c.best = str(self.query_one("#best", Select).value)
        c.feedback = str(self.query_one("#feedback", Select).value)
        c.operating_point = str(self.query_one("#operating-point", Select).value)
        c.blind_test = self.query_one("#blind", Checkbox).value
        c.participant = self.query_one("#participant", Input).value.strip()
        return c, problems

    def read_choices(self) -> SetupChoices:
        """The form's values; raises ValueError with every user-facing reason."""
        choices, problems = self.form_problems()
        if problems:
            raise ValueError("\n".join(problems))
        return choices

    def _show_problems(self, *, live: bool = False) -> list[str]:
        try:
            _choices, problems = self.form_problems()
        except Exception:  # noqa: BLE001 - the form is still being built
            return []
        if live:  # while typing: the numbers only (a missing LLM server is said beside the coder)
            problems = [p for p in problems if not p.startswith(("The LLM", "A custom"))]
        self.problems = problems
        box = self.query_one("#setup-problems", Static)
        box.update("\n".join(f"[red]✗[/red] {p}" for p in problems))
        box.display = bool(problems)
        self._show_adequacy(_choices)
        return problems

    def _show_adequacy(self, choices: SetupChoices) -> None:
        """Warn where the held-out data hold too few malignant cases in a skin-tone group to judge
        fairness there (engine.evaluation.adequacy): SynthDerm's from its sizes, a workspace's from its files."""
        self.adequacy = adequacy_warnings(choices)
        box = self.query_one("#setup-adequacy", Static)
        box.update(Text("\n".join(f"⚠ {w}" for w in self.adequacy), style="yellow"))
        box.display = bool(self.adequacy)

    @on(Button.Pressed, "#start")
    def action_start(self) -> None:
        choices, problems = self.form_problems()
        self._show_problems()
        if problems:
            self.notify("\n".join(problems), title="Cannot start", severity="error", timeout=10)
            return
        save_choices(choices, self.settings_file)
        key = self.query_one("#api-key", Input).value.strip() if choices.coder == "openai" else ""
        from befair_tui.launch import key_env

        navigator(self.app).start_session(choices, secrets=key_env(key))

    def action_sessions(self) -> None:
        navigator(self.app).action_open_sessions()
