"""Help (`?` or F1 anywhere): the keys, every marker and badge, and the words on screen in plain
language (AUC, skin-tone AUC gap, intervals, validation and test, blinded, the four meanings of "best",
where each number comes from). Scrolls at 80x24; Esc, q, ? or F1 closes it."""
from __future__ import annotations

from collections.abc import Sequence

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from engine.session import selection, views

from engine.session import figure_text
from befair_tui.format import STATUS_GLYPH
from befair_tui.widgets.comparison_plot import LEGEND_WORDS
from befair_tui.widgets.keys_footer import KeysFooter
from befair_tui.widgets.scatter import MARKERS

# (keys, what they do) per screen; tests check every console binding is listed here
KEYS: list[tuple[str, list[tuple[str, str]]]] = [
    ("Console (a running or finished session)", [
        ("p", "pause the search (the running step finishes, no new step starts); p again resumes"),
        ("g", "write guidance for the agent: Enter sends it to every later step, Ctrl+N only to the "
              "selected node"),
        ("e", "expand the selected node next (improve it, or debug it if it failed)"),
        ("x", "prune the selected node: the search never expands it or its subtree (asks first)"),
        ("+", "add steps to the budget (asks how many)"),
        ("s", "stop the session (asks first; the running step is interrupted, everything is kept)"),
        ("v", "switch the scoreboard and the plot between test and validation figures"),
        ("c", "choose what “★ best” means (below). Live, the search improves the best node by it from "
              "the next step and the switch is recorded; in a replay or a finished session it changes only "
              "what you see here"),
        ("a", "choose what the agent is shown of befair's measurements of its earlier pipelines: nothing, "
              "the AUC (the default), or the AUC with each skin-tone group's AUC and the gap. Live only; the "
              "switch is recorded as your steering"),
        ("u", "resume a session whose runner process stopped (shown only then)"),
        ("b", "train the expert baselines on this session's data, in the background (shown only when none "
              "were trained for it; progress in the scoreboard, results in the database)"),
        ("1–7", "node tabs: Plan, Code, Output, Groups (per skin tone), Audit, Diff, Conversation (the LLM "
                "calls; \u201cChat\u201d in a narrow terminal)"),
        ("Tab", "move between the tree, the node panel and the scoreboard; ↑ ↓ scroll the scoreboard when "
                "its subtitle says \u201c↓ N more\u201d"),
        ("↑ ↓ Enter", "move in the search tree; Enter keeps the chosen node in view"),
        ("l", "the sessions screen"),
        ("q", "quit; during a live session it asks whether to stop it or leave it running"),
        ("", "The footer shows only the keys that can act now (after the end: no pause, expand, prune or "
             "steps); another steering key says why it cannot act."),
    ]),
    ("Replay (a recorded session)", [
        ("space", "play / pause"),
        ("f", "speed: 1x (real time), 10x, 100x, max"),
        ("→ ←  . ,", "one event forward / back"),
        ("n b", "next / previous node"),
        ("j", "jump to where the selected node was created"),
        ("Ctrl+A Ctrl+E", "start / end of the session"),
    ]),
    ("Sessions", [
        ("Enter o", "open the session"), ("r", "replay it"), ("u", "resume it"),
        ("x", "export it (best pipeline, tree, metrics, events)"), ("d", "delete it (asks first)"),
        ("/", "filter"), ("t", "sort by the next column"), ("n", "set up a new session"),
        ("s", "the Study screen: the selected session's study (its grid, the aggregate, Figure 2)"),
    ]),
    ("Study", [
        ("Enter o", "open the selected session"), ("r", "replay it"), ("n", "the next study"),
        ("Esc", "back to the sessions"),
    ]),
    ("Everywhere", [
        ("? F1", "this help"),
        ("Ctrl+P", "the command palette: every action of the screen by name"),
        ("Ctrl+S", "start the session (setup screen)"),
        ("Ctrl+Q", "quit"),
    ]),
]

TERMS: list[tuple[str, str]] = [
    ("AUC", "Area under the ROC curve: how well the model's malignancy scores rank malignant lesions "
            "above benign ones. 1.0 is perfect ranking, 0.5 is a coin toss. Shown as .712 for 0.712."),
    ("skin-tone AUC gap", "The AUC is also measured separately for light (Fitzpatrick I–II), medium "
                          "(III–IV) and dark (V–VI) skin. The gap is the best group's AUC minus the worst "
                          "group's: 0 means the model ranks lesions equally well on every skin tone. "
                          "Lower is fairer. Each node's Groups tab (key 4) shows the three AUCs."),
    ("validation", "Images split off the training data before the agent starts. The agent never sees "
                   "them; befair runs each pipeline's predict() on them and scores it. The search tree's "
                   "numbers (val AUC / gap) and the choice of the best node use validation only."),
    ("test", "A separate set of images in the format of DDI (Diverse Dermatology Images, a clinical "
             "set with balanced skin tones), used only to report results, never to choose. The "
             "scoreboard and the plot compare test with test: nodes, baselines and published rows on "
             "test images. Key v shows the validation figures apart."),
    ("blinded", "A study can hide test metrics while the session runs, so that nobody steers by them: "
                f"the scoreboard and plot then say \u201c{views.BLINDED_NOTE}\u201d. They appear when the "
                "session ends, unless the study keeps them blind."),
    ("± and 95 % interval", figure_text.INTERVAL_HELP + " A figure reads .81 ±.05: the AUC is likely between "
                            ".76 and .86 (± is half the interval; the node's Groups tab gives the interval "
                            "itself). With few malignant images in a skin-tone group the gap's interval is "
                            "often as wide as the difference between two pipelines."),
    ("too few to judge", figure_text.TOO_FEW_HELP + " The setup screen warns when the data hold so few, and "
                         "an AUC there is shown with that warning instead of as a plain number."),
    ("cannot be told apart", "The scoreboard says when the best node cannot be told apart from others: the "
                             "95 % interval of their difference, on the same validation images resampled "
                             "the same way, contains 0. Any of them could be the better one."),
    ("operating point", "A dermatologist triaging lesions picks a cut-off by how many melanomas it must catch. "
                        "befair sets the cut-off where the model would catch 9 of 10 melanomas on the "
                        "validation images (all skin tones together), then shows, in the Groups tab and the "
                        "report, what that same cut-off means for each skin tone, on validation and on test: "
                        "sensitivity (melanomas caught), specificity (benign lesions rightly left alone) and "
                        "melanomas missed per 100, each with its 95 % interval and the counts behind it. A model "
                        "that catches 9 of 10 overall may catch 7 of 10 on dark skin: that is the difference to "
                        "look for. Setup's Cut-off (or befair run --operating-point) asks for 95 % instead, or a "
                        "fixed probability."),
    ("calibration", "Whether a model's probability can be read as a risk: of lesions scored 0.3, about 3 in 10 "
                    "malignant. Brier score: the mean squared difference between probability and outcome (0 is "
                    "perfect; always saying 0.5 scores .25). Calibration slope: 1 when the probabilities can be "
                    "taken at their word, below 1 when they are too sure, above 1 when too timid (a logistic "
                    "regression of the outcome on the probability's logit, Cox's method, Wald interval). Shown "
                    "per skin tone: a model can be calibrated on light skin and not on dark."),
    ("missed malignant (at 0.5)", "Sessions recorded before the operating point count, in the Groups tab, the "
                                  "malignant images scored below 0.5, with an interval: a cut-off that means "
                                  "little for a model whose probabilities are not calibrated."),
    ("best: " + selection.CRITERION_LABEL["claimed"], "The node whose own printed metric is highest, as the "
                                                      "AIDE agent chooses. It is the agent's report, not a "
                                                      "measurement (see badges ! and ≠); it has no interval."),
    ("best: " + selection.CRITERION_LABEL["validation"], "The node with the highest AUC measured here on the "
                                                         "validation images. The default for new sessions, at "
                                                         "every instruction level: the search builds on the "
                                                         "most accurate node unless you ask it to follow a "
                                                         "skin-tone criterion."),
    ("best: " + selection.CRITERION_LABEL["minimax"], "Among the nodes no other node beats on every skin-tone "
                                                      "group, the one whose worst group has the highest "
                                                      "validation AUC: the best worst case."),
    ("best: " + selection.CRITERION_LABEL["robust"], "The node whose worst skin-tone group is good with "
                                                     "confidence: the highest low end of the worst group's "
                                                     "95 % interval. A node cannot win by a lucky draw of a few "
                                                     "dark-skin images."),
    ("★", "The best node by the criterion the header names (“★/search …”): the search improves that "
          "node next; key c changes it. The scoreboard lists the best node by each of the four criteria."),
    ("agent sees", "What the agent is told of befair's own measurements of its earlier pipelines (header: "
                   "“agent sees …”). By default the AUC only, at every instruction level, so that levels differ "
                   "in their instruction alone; key a changes it, and the change is recorded."),
]

SOURCES: list[tuple[str, str]] = [
    (views.SOURCE_MEASURED, views.SOURCE_HELP[views.SOURCE_MEASURED]),
    (views.SOURCE_TRAINED, views.SOURCE_HELP[views.SOURCE_TRAINED]),
    (f"{views.SOURCE_PUBLISHED}, \u201c(published)\u201d", views.SOURCE_HELP[views.SOURCE_PUBLISHED]),
    ("claimed", "what the agent printed about its own pipeline; never used as a measurement"),
    ("SynthDerm", "generated images in the Fitzpatrick17k and DDI formats (the built-in demo data). "
                  f"Its numbers carry the note \u201c{views.SYNTH_NOTE}\u201d."),
    ("simulated agent", "the offline coder: writes real, runnable pipelines from building blocks, without a "
                        "language model. Now and then it makes a node fail on purpose (a wrong column, a slow "
                        "loop…) so that the repair path runs: that node's plan says \u201csimulated agent: this "
                        "node was made to …\u201d"),
    ("not audited", "the node's code could not be read (it does not parse): what it does about skin tone is "
                    "unknown, shown as [?], never as \u201cno\u201d"),
    (views.UNSANDBOXED, views.UNSANDBOXED_MEANING),
    (views.RUNNER_STOPPED, "the process running the session is gone (killed or crashed); u resumes it"),
    (views.IMPORTED_UNMEASURED, "a node of an imported AIDE run: it ran elsewhere; befair did not measure it"),
]

STATUS_MEANING = {
    "queued": "waiting to run", "running": "running now", "ok": "ran without error",
    "buggy": "failed (the reason follows)", "timeout": "stopped at the time limit",
    "interrupted": "interrupted (stop, or a crash)",
}


def _pairs(rows: Sequence[tuple[str | Text, str]], key_style: str = "bold") -> Table:
    table = Table(box=None, show_header=False, pad_edge=False, expand=True, padding=(0, 1, 0, 0))
    table.add_column(no_wrap=True, style=key_style, max_width=32)
    table.add_column(ratio=1, overflow="fold")
    for key, meaning in rows:
        table.add_row(key, meaning)
    return table


def _heading(text: str) -> Text:
    return Text(f"\n{text}", style="bold underline")


def help_content() -> Group:
    parts: list[RenderableType] = [Text("befair help · Esc, q, ? or F1 closes · ↑ ↓ PgUp PgDn scroll", style="dim")]
    parts.append(_heading("Keys"))
    for title, rows in KEYS:
        parts.append(Text(title, style="italic"))
        parts.append(_pairs(rows, "bold yellow"))
    parts.append(_heading("Search tree"))
    tree = [(glyph, STATUS_MEANING[status]) for status, (glyph, _style) in STATUS_GLYPH.items()]
    tree += [(".712 / .094", "validation AUC / skin-tone AUC gap, measured here"),
             ("running 01:32/10:00", "the running node: how long it has run, against the time limit per step "
                                     "(the node panel shows its latest output line)"),
             ("★ best", "the best node by the session's criterion"),
             ("✎", "guidance a person gave, placed where it took effect"),
             ("⇢ next", "will be expanded next (key e)"), ("✂ pruned", "pruned (key x)"),
             ("ST·PG…", "in a narrow tree the badges lose their brackets, then give way from the end (…): "
                        "the node's Audit tab (key 5) lists them all; the figures are never cut")]
    parts.append(_pairs(tree))
    parts.append(_heading("Badges (what the code of a node does, read from its code)"))
    parts.append(_pairs([(f"[{code}]", meaning) for code, meaning in views.BADGE_HELP.items()], "bold cyan"))
    parts.append(_heading("Plot markers"))
    meaning = {"node": "a node measured here", "best": "the best node (★ in the tree)",
               "baseline": "an expert baseline trained here (mean over seeds), drawn as its letter A, B, …",
               "published": "a published figure of the Be Fair! study (real DDI images), drawn as its number "
                            "1, 2, …"}
    shown = {"node": "●", "best": "★", "baseline": "A B", "published": "1 2"}
    plot = [(Text(shown[k], style=f"bold {MARKERS[k][1]}"), f"{LEGEND_WORDS[k]}: {meaning[k]}")
            for k in ("node", "best", "baseline", "published")]
    parts.append(_pairs(plot))
    parts.append(Text("Across: the AUC (right is better); up: the skin-tone AUC gap (down is fairer): the best "
                      "pipelines sit bottom right. The Study screen's figure uses the same axes. The scoreboard "
                      "names each numbered or lettered point (its rows carry the same number or letter). The "
                      "plot shows test figures (key v: validation); published rows exist for test only."))
    parts.append(_heading("Words on screen"))
    parts.append(_pairs(TERMS))
    parts.append(_heading("Where a number comes from"))
    parts.append(_pairs(SOURCES))
    return Group(*parts)


class HelpScreen(ModalScreen[None]):
    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen #help-box { width: 100%; max-width: 110; height: 100%; border: round $primary;
                           background: $surface; padding: 0 1; }
    """
    BINDINGS = [
        Binding("escape,q,question_mark,f1", "close", "Close help", id="help-close"),
        Binding("down,j", "scroll('down')", "Down", id="help-down", show=False),
        Binding("up,k", "scroll('up')", "Up", id="help-up", show=False),
        Binding("pagedown,space", "scroll('page_down')", "Page down", id="help-page-down", show=False),
        Binding("pageup", "scroll('page_up')", "Page up", id="help-page-up", show=False),
    ]

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="help-box") as box:
            box.border_title = "Help"
            yield Static(help_content(), id="help-text")
        yield KeysFooter()

    def on_mount(self) -> None:
        self.query_one("#help-box").focus()

    def action_scroll(self, where: str) -> None:
        box = self.query_one("#help-box", VerticalScroll)
        {"down": box.scroll_down, "up": box.scroll_up, "page_down": box.scroll_page_down,
         "page_up": box.scroll_page_up}[where](animate=False)

    def action_close(self) -> None:
        self.dismiss(None)
