"""What the agent is shown of befair's measurements (engine.session.feedback): in a live session
the expert may turn the skin-tone figures on (or off); the switch is a recorded steering act."""
from __future__ import annotations

from engine.session import feedback

from befair_tui.screens.criterion import ChoiceModal


class FeedbackModal(ChoiceModal):
    TITLE = "What should the agent be shown of befair's measurements?"
    VALUES = feedback.FEEDBACK
    LABELS = feedback.FEEDBACK_LABEL
    WORDS = feedback.FEEDBACK_WORDS

    def what(self) -> str:
        return "From the next step the agent's prompts show this, and the switch is recorded as your steering."
