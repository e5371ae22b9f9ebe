"""Setup: instruction level (full text shown, or a custom text), data, coder, budget, time limit,
what "best" means, blinded test metrics and a participant id. Remembers the last choices."""
from __future__ import annotations

from pathlib import Path

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import Screen
from textual.widgets import (Button, Checkbox, Footer, Input, Label, RadioButton, RadioSet, Select,
                             Static, TextArea)

from engine.config import BEST_CRITERIA
from engine.task import CUSTOM, LEVELS, METRIC_LINE

from befair_tui.format import CRITERION_LABEL
from befair_tui.settings import SetupChoices, load_choices, save_choices

LEVEL_NAMES = [*LEVELS, CUSTOM]


def llm_problem() -> str | None:
    try:
        from engine.agent.llm_config import LlmConfig

        return LlmConfig.load().problem()
    except Exception as exc:  # noqa: BLE001 - a broken config file is a reason too
        return f"The LLM coder's configuration cannot be read: {exc}"


class SetupScreen(Screen):
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

    def compose(self) -> ComposeResult:
        c = self.choices
        with VerticalScroll(id="setup"):
            yield Static("befair · new session", classes="setup-title")
            with Horizontal(classes="row stack"):
                with Vertical(classes="col-narrow"):
                    yield Label("Instruction level")
                    with RadioSet(id="level"):
                        for name in LEVEL_NAMES:
                            yield RadioButton(name, value=name == c.level, id=f"level-{name}")
                with Vertical(classes="col-wide"):
                    yield Static("", id="level-text")
                    yield TextArea(c.custom_text, id="custom-text", classes="hidden")
            with Horizontal(classes="row stack"):
                with Vertical(classes="col-narrow"):
                    yield Label("Data")
                    with RadioSet(id="data"):
                        yield RadioButton("SynthDerm (generated)", value=c.data == "synth", id="data-synth")
                        yield RadioButton("prepared workspace", value=c.data == "workspace", id="data-workspace")
                with Vertical(classes="col-wide"):
                    with Horizontal(id="synth-sizes", classes="inline"):
                        yield Label("train")
                        yield Input(str(c.synth_n_train), id="synth-n-train", type="integer")
                        yield Label("test")
                        yield Input(str(c.synth_n_test), id="synth-n-test", type="integer")
                        yield Label("px")
                        yield Input(str(c.synth_size), id="synth-size", type="integer")
                    yield Input(c.workspace, placeholder="path to a prepared workspace folder",
                                id="workspace", classes="hidden")
            with Horizontal(classes="row stack"):
                with Vertical(classes="col-narrow"):
                    yield Label("Coder")
                    with RadioSet(id="coder"):
                        yield RadioButton("offline (simulated agent)", value=c.coder == "offline", id="coder-offline")
                        yield RadioButton("OpenAI-compatible model", value=c.coder == "openai", id="coder-openai")
                with Vertical(classes="col-wide"):
                    yield Static("", id="coder-note")
                    yield Input(c.model, placeholder="model name (default from your LLM config)", id="model",
                                classes="hidden")
            with Horizontal(classes="row inline"):
                yield Label("Steps")
                yield Input(str(c.steps), id="steps", type="integer")
                yield Label("Time limit per step (s)")
                yield Input(f"{c.step_timeout:g}", id="step-timeout", type="number")
            with Horizontal(classes="row inline stack"):
                yield Label('"Best" means')
                yield Select([(CRITERION_LABEL[b], b) for b in BEST_CRITERIA], value=c.best,
                             allow_blank=False, id="best")
                yield Checkbox("Blind test metrics until the end", c.blind_test, id="blind")
            with Horizontal(classes="row inline"):
                yield Label("Participant id")
                yield Input(c.participant, placeholder="optional", id="participant")
                yield Button("Start session", id="start", variant="primary")
        yield Footer()

    def on_mount(self) -> None:
        self._update_level()
        self._update_data()
        self._update_coder()
        self.query_one("#level", RadioSet).focus()

    def on_resize(self, event) -> None:
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
        self.query_one("#workspace").set_class(not workspace, "hidden")

    @on(RadioSet.Changed, "#coder")
    def _update_coder(self) -> None:
        llm = self._pressed_id("coder") == "coder-openai"
        note = self.query_one("#coder-note", Static)
        self.query_one("#model").set_class(not llm or bool(self.llm_problem), "hidden")
        if not llm:
            note.update("Writes real, runnable pipelines from a component grammar; "
                        "labelled as a simulated agent everywhere.")
        elif self.llm_problem:
            note.update(f"[red]Not configured.[/red] {self.llm_problem}")
        else:
            note.update("Uses your configured OpenAI-compatible server.")

    # -- reading the form -----------------------------------------------------------------
    def read_choices(self) -> SetupChoices:
        """The form's values; raises ValueError with a user-facing reason."""
        def integer(wid: str, what: str, low: int = 1) -> int:
            raw = self.query_one(f"#{wid}", Input).value.strip()
            try:
                value = int(raw)
            except ValueError:
                raise ValueError(f"{what} must be a whole number, not {raw!r}") from None
            if value < low:
                raise ValueError(f"{what} must be at least {low}")
            return value

        c = SetupChoices(**vars(self.choices))
        c.level = (self._pressed_id("level") or "level-base").removeprefix("level-")
        c.custom_text = self.query_one("#custom-text", TextArea).text
        if c.level == CUSTOM and not c.custom_text.strip():
            raise ValueError("a custom instruction level needs its text")
        c.data = "workspace" if self._pressed_id("data") == "data-workspace" else "synth"
        if c.data == "synth":
            c.synth_n_train = integer("synth-n-train", "training images", 60)
            c.synth_n_test = integer("synth-n-test", "test images", 30)
            c.synth_size = integer("synth-size", "image size", 16)
        else:
            c.workspace = self.query_one("#workspace", Input).value.strip()
            if not c.workspace or not Path(c.workspace).expanduser().is_dir():
                raise ValueError(f"the workspace folder {c.workspace!r} does not exist")
        c.coder = "openai" if self._pressed_id("coder") == "coder-openai" else "offline"
        if c.coder == "openai" and self.llm_problem:
            raise ValueError(self.llm_problem)
        c.model = self.query_one("#model", Input).value.strip()
        c.steps = integer("steps", "the step budget")
        raw = self.query_one("#step-timeout", Input).value.strip()
        try:
            c.step_timeout = float(raw)
        except ValueError:
            raise ValueError(f"the time limit must be a number of seconds, not {raw!r}") from None
        if c.step_timeout <= 0:
            raise ValueError("the time limit must be positive")
        c.best = str(self.query_one("#best", Select).value)
        c.blind_test = self.query_one("#blind", Checkbox).value
        c.participant = self.query_one("#participant", Input).value.strip()
        return c

    @on(Button.Pressed, "#start")
    def action_start(self) -> None:
        try:
            choices = self.read_choices()
        except ValueError as exc:
            self.notify(str(exc), title="Cannot start", severity="error", timeout=10)
            return
        save_choices(choices, self.settings_file)
        self.app.start_session(choices)

    def action_sessions(self) -> None:
        self.app.action_open_sessions()
