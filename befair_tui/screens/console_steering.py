"""A console's part for the keys that steer a running session (the researcher's, a participant's):
pause or resume, guidance, expand and prune a node. Whether a key can act, and how its command is
sent, is the controller's reader's (befair_tui.console.modes): this part only asks and confirms."""
from __future__ import annotations

from typing import Any

from textual import on

from engine.session import views

from befair_tui.screens.console_view import ConsoleView
from befair_tui.widgets.guidance_input import GuidanceInput
from befair_tui.widgets.search_tree import SearchTree


class SteeringKeys(ConsoleView):
    def action_pause(self) -> None:
        if self.ctl.state.status == "paused":
            self.action_resume()
        else:
            self._command("pause", note="Pause requested: the running step finishes, no new step starts "
                                        "until you resume (p).")

    def action_resume(self) -> None:
        self._command("resume", note="Resume requested.")

    def action_guide(self) -> None:
        box = self.query_one(GuidanceInput)
        if box.disabled:
            self.notify(f"This session is {self.ctl.state.status}; guidance was not sent.", severity="warning")
            return
        box.focus()

    @on(GuidanceInput.Guide)
    def _on_guide(self, message: GuidanceInput.Guide) -> None:
        if not self.ctl.reader.steers or views.ended(self.ctl.state):
            self.notify("This session is not running; guidance was not sent.", severity="warning")
            return
        payload: dict[str, Any] = {"text": message.text}
        selected = self.ctl.selected
        if message.node_scope:
            if selected is None:
                self.notify("Select a node first (or press Enter for global guidance).", severity="warning")
                return
            payload["node_id"] = selected
            note = f"Guidance for node {selected} sent."
        else:
            note = "Guidance sent to the agent."
        if self._command("guide", payload, note=note):
            self.query_one(SearchTree).focus()

    def _need_selected(self) -> int | None:
        if self.ctl.selected is None:
            self.notify("Select a node in the search tree first.", severity="warning")
        return self.ctl.selected

    def action_expand(self) -> None:
        nid = self._need_selected()
        if nid is not None:
            self._command("expand", {"node_id": nid}, note=f"Node {nid} will be expanded next.")

    def action_prune(self) -> None:
        from befair_tui.screens.confirm import ConfirmModal

        nid = self._need_selected()
        if nid is None:
            return
        below = self.ctl.descendants(nid)
        what = f"node {nid}" + (f" and the {below} node(s) below it" if below else "")

        def done(ok: bool | None) -> None:
            if ok:
                self._command("prune", {"node_id": nid}, note=f"Node {nid} and its subtree pruned.")

        self.app.push_screen(
            ConfirmModal(f"Prune {what}? The search will never expand "
                         + ("them again. They stay" if below else "it again. It stays")
                         + " in the tree (marked ✂) with everything measured so far.", yes="Prune", no="Keep"),
            done)
