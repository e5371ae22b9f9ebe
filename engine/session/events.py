"""Event kinds and their payloads: the one contract between the engine, the store and the console.

A session is an append-only list of events. Each event has a session-wide `seq` (1, 2, ...), a
wall-clock `ts` (unix seconds, float), a `kind` from below and a JSON `payload`. Everything shown
anywhere (live console, replay, `befair show`, the nodes table) is `fold(events)`; nothing on
screen comes from anywhere else.

Each kind has a frozen dataclass in engine.session.event_types (EVENT_TYPES maps kind -> class,
with `to_payload` / `from_payload`); emit sites build those, and the classes load every payload
stored by earlier versions.

Payload keys per kind (all keys listed are present; values may be null where marked `?`):

session_started   config: dict (SessionConfig.to_dict()), instruction: str (verbatim text),
                  coder: {name, label, simulated: bool, model?, server?: {models: [str],
                  context?: int, model_path?: str, gguf_sha256?: str, error?: str} (LLM coder:
                  what the server said it serves)}, data: {kind: "synth"|"workspace",
                  path, summary?, label_sha256?: {split: {path, sha256}}}
node_created      node_id: int, parent_id: int?, step: int, stage: draft|improve|debug|human,
                  plan: str, guidance_ids: [int] (guidance in force for this node),
                  components: dict? (offline coder's grammar choice), origin: "agent"|"human"|"import"
code              node_id, code: str
exec_started      node_id, workdir: str, sandbox: "bwrap"|"none"? (absent before the sandbox)
output            node_id, text: str (a chunk, newline-terminated lines), stream: "stdout"|"stderr"
exec_finished     node_id, status: ok|buggy|timeout|interrupted, exit_code: int?, exec_time: float,
                  exc_type: str?, output_head: str, output_tail: str, truncated: bool, and since the
                  sandbox: cut_chars: int, output_chars: int, peak_mem_mb: float?,
                  out_of_memory: bool, sandboxed: bool
review            node_id, is_bug: bool, summary: str, claimed_metric: float?
evaluated         node_id, split: validation|test, ok: bool, verdict: str ("ok" or a short code
                  like "no_predict", "exception", "timeout", "missing_files", "nan", "out_of_range",
                  "wrong_type"), reason: str?, summary: {auc?, worst_auc?, best_auc?, auc_gap?,
                  group_auc: {group_0?, group_1?, group_2?}, group_auc_reason: {group: str},
                  n: int, and since 007_predictions the intervals (ci, cases, ci_groups?,
                  ci_method; a first version spelled them out: auc_ci, group_auc_ci, group_n …),
                  then signed and groups_apart, and the operating point's block
                  (operating_point)}: engine.measures.summary.EvaluationSummary, the one reader of
                  every version, says what each holds,
                  medfair: dict (MEDFAIR-named metrics, no
                  split prefix), blinded: bool, predictions_kept: bool (each image's prediction is
                  in the predictions table, keyed by this event's seq),
                  and since 006_sealed: sealed: bool (the figures were moved to sealed_metrics
                  until the session ends), revealed: bool (a re-sent evaluation that reveals
                  sealed figures); for imported runs source: str ("published predictions,
                  scored here"), predictions: str, predictions_sha256: str
audited           node_id, flags: {reads_skin_tone, per_group_metric, reweighting, upsampling,
                  filtering, pareto_selection: bool}, evidence: {flag: str}, claim: {claimed?,
                  measured?, difference?, unsupported: bool, reason?}, note: str? ("not audited:
                  <why>" when the code could not be read: its flags are unknown, not false)
policy_decision   action: draft|improve|debug|expand|idle|finish, node_id: int? (parent to expand),
                  reason: str, forced: bool (true when a human command chose it)
guidance          guidance_id: int, text: str, scope: global|node, node_id: int?, by: str,
                  command_id: int?
paused            by: str, command_id: int?, reason: str?
resumed           by: str, command_id: int?
pruned            node_id, by: str, command_id: int?
budget_set        steps: int, by: str, command_id: int?
expand_requested  node_id, by: str, command_id: int?
                  Since 008_participants every event a command caused (these six and
                  stop_requested) also has participant_id: str when a study's participant issued it
stop_requested    by: str, command_id: int?, interrupt: bool; by "time limit" (no command) when a
                  study session's time limit (config time_limit_s) is reached, with reason: str
llm_call          node_id?, role: draft|improve|debug|review, model: str, tokens_in: int,
                  tokens_out: int, latency_s: float, cost: float, ok: bool, error: str?,
                  tokens_estimated: bool, messages: [{role, content}] (what the agent was told),
                  reply: str (the raw reply); the last three absent in sessions recorded earlier;
                  first_token_s: float?, tokens_per_s: float? (streamed: prompt reading time,
                  writing speed), server_model: str? (the model id the server's reply named),
                  check: {rule, attempt, message}? (the reply rule its reply hit,
                  engine.agent.reply_rules; absent when none did, and in sessions recorded earlier)
llm_stream        role: str, step: int, chars: int, tokens: int, elapsed_s: float,
                  first_token_s: float?, tokens_per_s: float? (since the first token),
                  recent_tokens_per_s: float? (the last 15 s): how far a streaming reply has got
                  (offsets and times only, at most one every 2 s or a fifth of the time streamed so
                  far, whichever is longer, and the last of each call); the
                  text is never stored here: it is stored once, whole, in the llm_call that
                  follows (the live text travels through engine.session.live_reply). Sessions recorded
                  earlier hold `delta: str` (the text written since the last llm_stream) instead
node_interrupted  node_id, reason: str (e.g. "process ended while running" on resume)
session_resumed   by: str, interrupted: [int]
criterion_set     criterion: claimed|validation|minimax|robust, by: str, command_id: int?: what ★ and
                  the search's improve step follow from now on (engine.session.selection)
feedback_set      feedback: none|auc|groups, by: str, command_id: int?: what the agent is shown of
                  befair's measurements from now on (engine.session.feedback)
compared          split: str, method: str, by: {criterion: {leader: int?, statistic: str,
                  ties: [int] (nodes whose paired difference from the leader contains 0),
                  differences: [{node_id, ci: [lo, hi]}] (leader minus each tied node)}}
final_choice      by_claimed: int?, by_validation: int?, by_minimax: int?, by_robust: int?,
                  reasons: {criterion: str}, criterion: str? (the one in force at the end),
                  ties: {criterion: [int]}?
session_finished  status: finished|stopped|failed, reason: str?
error             message: str, node_id: int?, where: str?
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

SESSION_STARTED = "session_started"
NODE_CREATED = "node_created"
CODE = "code"
EXEC_STARTED = "exec_started"
OUTPUT = "output"
EXEC_FINISHED = "exec_finished"
REVIEW = "review"
EVALUATED = "evaluated"
AUDITED = "audited"
POLICY_DECISION = "policy_decision"
GUIDANCE = "guidance"
PAUSED = "paused"
RESUMED = "resumed"
PRUNED = "pruned"
BUDGET_SET = "budget_set"
EXPAND_REQUESTED = "expand_requested"
STOP_REQUESTED = "stop_requested"
LLM_CALL = "llm_call"
LLM_STREAM = "llm_stream"
NODE_INTERRUPTED = "node_interrupted"
SESSION_RESUMED = "session_resumed"
FINAL_CHOICE = "final_choice"
CRITERION_SET = "criterion_set"
FEEDBACK_SET = "feedback_set"
COMPARED = "compared"
SESSION_FINISHED = "session_finished"
ERROR = "error"

KINDS = frozenset(
    {
        SESSION_STARTED, NODE_CREATED, CODE, EXEC_STARTED, OUTPUT, EXEC_FINISHED, REVIEW,
        EVALUATED, AUDITED, POLICY_DECISION, GUIDANCE, PAUSED, RESUMED, PRUNED, BUDGET_SET,
        EXPAND_REQUESTED, STOP_REQUESTED, LLM_CALL, LLM_STREAM, NODE_INTERRUPTED, SESSION_RESUMED,
        FINAL_CHOICE, SESSION_FINISHED, ERROR, CRITERION_SET, FEEDBACK_SET, COMPARED,
    }
)

# Steering commands (the commands table's `kind` column).
COMMAND_KINDS = frozenset({"pause", "resume", "stop", "guide", "expand", "prune", "set_budget", "set_criterion",
                           "set_feedback"})


@dataclass(frozen=True)
class Event:
    seq: int
    kind: str
    payload: dict[str, Any] = field(default_factory=dict)
    ts: float = 0.0
    session_id: str = ""
    # its typed payload (engine.session.event_types), when whoever made the event parsed it already
    # (the store does, as it loads); the reducer parses it otherwise
    typed: object = field(default=None, compare=False, repr=False)

    def to_row(self) -> dict[str, Any]:
        return {
            "session_id": self.session_id,
            "seq": self.seq,
            "ts": self.ts,
            "kind": self.kind,
            "payload": json.dumps(self.payload, sort_keys=True),
        }
