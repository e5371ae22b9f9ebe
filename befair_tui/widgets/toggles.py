"""Radio buttons and check boxes whose state shows without colour: a selected radio button reads
"▐●▌", another "▐ ▌"; a ticked box "▐✓▌", an empty one "▐ ▌" (Textual's draw the same mark for
both and tell them apart by colour only: unreadable for a colour-blind reader or in a monochrome
terminal)."""
from __future__ import annotations

from textual.widgets import Checkbox, RadioButton


class PlainRadioButton(RadioButton):
    @property
    # Textual declares BUTTON_INNER a class attribute; a property reads the state
    def BUTTON_INNER(self) -> str:  # type: ignore[override]  # noqa: N802 - Textual's name for the mark
        return "●" if self.value else " "


class PlainCheckbox(Checkbox):
    @property
    # Textual declares BUTTON_INNER a class attribute; a property reads the state
    def BUTTON_INNER(self) -> str:  # type: ignore[override]  # noqa: N802 - Textual's name for the mark
        return "✓" if self.value else " "
