"""What the agent of a session is told and what its search follows, beyond the instruction: the
settings a study holds fixed between the arms it compares (engine.session.feedback, the criterion
of engine.session.selection, the LLM coder's scaffold, the task protocol). Every surface names
them from here: the console's header and summary, `befair show` (text and JSON), the report."""
from __future__ import annotations

from dataclasses import dataclass

from engine.session import feedback, selection
from engine.session.state import SessionState


@dataclass(frozen=True)
class AgentSetting:
    key: str            # the SessionConfig / study spec key
    name: str           # what it is, in words
    value: str          # as recorded
    label: str          # the value, in words
    changed_live: bool = False   # a person switched it while the session ran (a recorded steering act)

    def line(self) -> str:
        return f"{self.name}: {self.label}" + (" (switched live)" if self.changed_live else "")


def _scaffold(state: SessionState) -> AgentSetting:
    if state.simulated:
        return AgentSetting("scaffold", "scaffold", "n/a", "none (the simulated agent writes whole pipelines)")
    recorded = state.coder.get("scaffold")
    if state.config.get("protocol") == "be-fair":
        return AgentSetting("scaffold", "scaffold", "off", "off (the be-fair protocol sends AIDE's prompts)")
    if recorded is None:
        return AgentSetting("scaffold", "scaffold", "unknown", "not recorded")
    wording = state.coder.get("scaffold_wording")
    label = f"on (wording {wording})" if recorded and wording else ("on" if recorded else "off")
    return AgentSetting("scaffold", "scaffold", "on" if recorded else "off", label)


def agent_settings(state: SessionState) -> list[AgentSetting]:
    shown = feedback.current_feedback(state)
    criterion = selection.current_criterion(state)
    protocol = str(state.config.get("protocol") or "befair")
    return [
        AgentSetting("feedback", "agent is shown", shown, feedback.FEEDBACK_LABEL[shown], state.feedback is not None),
        AgentSetting("best", "search and ★ follow", criterion, selection.CRITERION_LABEL[criterion],
                     state.criterion is not None),
        _scaffold(state),
        AgentSetting("protocol", "protocol", protocol, protocol),
    ]


def settings_line(state: SessionState) -> str:
    return " · ".join(s.line() for s in agent_settings(state))


def settings_json(state: SessionState) -> dict[str, str]:
    return {s.key: s.value for s in agent_settings(state)}
