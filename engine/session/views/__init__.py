"""The presentation model: what a folded session means for a reader, on every surface.

The console (tree, node panel, scoreboard, plot), `befair show` (text and --json), the headless
progress lines and the exports all render from here, so they agree on:

- trust: whether agent code ran sandboxed, whether the runner still lives (`trust`);
- the badges: one spelling, one legend, each with the evidence it came from (`badges`);
- who may see test metrics: a participant sees a blinded session's test metrics when the session
  ends, unless the session belongs to a study (`study_id` set), which keeps them blind for good;
  a researcher sees them with `unblind=True` (`--unblind`) (`blinding`);
- which node is best by each criterion, and why (pruned and failed nodes are never chosen) (`best`);
- each node's one-line summary, the tree as text, the console's words about a node (`nodes`);
- what may be compared with what: test against test (the DDI-format test set next to the
  published DDI rows), validation apart, with a note whenever the data is generated
  (`like_with_like`);
- a session and its nodes as JSON (`as_json`); times, token counts and the coder (`words`);
- the step count, one meaning everywhere: the steps taken (`steps`).

Everything is computed from a `SessionState` (the fold of a session's events) and, for the
comparison, the baselines and published rows the caller passes in; nothing else is read. The
console only styles what these modules word (befair_tui/format.py).
"""
from __future__ import annotations

from engine.session.figure_text import fmt
from engine.session.state import ENDED
from engine.session.views.trust import (
    UNSANDBOXED, UNSANDBOXED_MEANING, SANDBOX_VALUES, RUNNER_STOPPED, sandbox_mode, trust_fields, row_state,
)
from engine.session.views.badges import (
    AUDIT_BADGES, BADGE_HELP, NOT_AUDITED, Badge, node_badges, audit_badges,
    simulated_failure,
)
from engine.session.views.blinding import (
    BLINDED_NOTE, STUDY_BLINDED_NOTE, ended, kept_blind, blinds_test, test_revealed, test_visible, test_hidden,
    blinded_note, visible_test, test_withheld, visibility,
)
from engine.session.views.best import (
    CRITERIA, CRITERION_WORDS, BestChoice, NO_INTERVAL_CLAIM, tie_sentence, session_criterion, best_choice,
    best_by_criterion, best_id, final_choices, best_nodes,
)
from engine.session.views.words import clock, tokens, date, elapsed, coder_label, paused_clock_words
from engine.session.views.steps import STEPS_HELP, StepCount, step_count, row_step_count
from engine.session.views.nodes import (
    STATUS_ICONS, STATUS_WORD, IMPORTED_UNMEASURED, SHORT_REASON, LINE_MARKS, short, NodeSummary, node_summary,
    node_line, tree_order, guidance_by_node, tree_lines, tree_figures, running_clock, latest_output_line,
    running_words, components_words, node_tooltip, guidance_where,
)
from engine.session.views.like_with_like import (
    SPLITS, CRITERION_SHORT, SYNTH_NOTE, IMPORTED_NOTE, PUBLISHED_NOTE, SOURCE_MEASURED, SOURCE_TRAINED,
    SOURCE_PUBLISHED, SOURCE_HELP, SPLIT_TITLE, SPLIT_WORDS, AXIS, data_kind, synth, same_data, node_metrics, Row,
    INTERVAL_MEASURED, INTERVAL_PUBLISHED, INTERVAL_SEEDS, baseline_points, published_points, published_label,
    node_rows, comparison_rows, notes, plot_points, reference_points, Comparison, comparison, BASELINE_TAGS,
    PUBLISHED_TAGS, reference_tags,
)
from engine.session.views.as_json import node_json, session_json
from engine.session.views.agent_settings import AgentSetting, agent_settings, settings_json, settings_line

__all__ = [
    "AgentSetting", "agent_settings", "settings_json", "settings_line",
    "AUDIT_BADGES", "audit_badges", "AXIS", "Badge", "BADGE_HELP", "baseline_points", "BASELINE_TAGS",
    "best_by_criterion", "best_choice", "best_id", "best_nodes", "BestChoice", "BLINDED_NOTE", "blinded_note",
    "blinds_test", "clock", "coder_label", "Comparison", "comparison", "comparison_rows",
    "components_words", "CRITERIA", "CRITERION_SHORT", "CRITERION_WORDS", "data_kind", "date", "elapsed", "ENDED",
    "ended", "final_choices", "fmt", "guidance_by_node", "guidance_where", "IMPORTED_NOTE", "IMPORTED_UNMEASURED",
    "INTERVAL_MEASURED", "INTERVAL_PUBLISHED", "INTERVAL_SEEDS", "kept_blind", "latest_output_line", "LINE_MARKS",
    "NO_INTERVAL_CLAIM", "node_badges", "node_json", "node_line", "node_metrics", "node_rows", "node_summary",
    "node_tooltip", "NodeSummary", "NOT_AUDITED", "notes", "paused_clock_words", "row_step_count", "step_count",
    "StepCount", "STEPS_HELP", "plot_points", "published_label", "PUBLISHED_NOTE",
    "published_points", "PUBLISHED_TAGS", "reference_points", "reference_tags", "Row", "row_state",
    "RUNNER_STOPPED", "running_clock", "running_words", "same_data", "sandbox_mode", "SANDBOX_VALUES",
    "session_criterion", "session_json", "short", "SHORT_REASON", "simulated_failure", "SOURCE_HELP",
    "SOURCE_MEASURED", "SOURCE_PUBLISHED", "SOURCE_TRAINED", "SPLIT_TITLE", "SPLIT_WORDS", "SPLITS", "STATUS_ICONS",
    "STATUS_WORD", "STUDY_BLINDED_NOTE", "synth", "SYNTH_NOTE", "test_hidden", "test_revealed", "test_visible",
    "test_withheld", "tie_sentence", "tokens", "tree_figures", "tree_lines", "tree_order", "trust_fields",
    "UNSANDBOXED", "UNSANDBOXED_MEANING", "visibility", "visible_test",
]
