"""The console's controller, without Textual: the session's fold and every decision the Live,
Replay and Participant consoles share (what to redraw, the ★, the selection and auto-follow, the
runner's state, why a steering key cannot act), and the small objects that say how they differ:
where the events come from (`modes.Following`, `modes.Replaying`) and who is at the console
(`modes.Researcher`, `modes.Viewer`, `modes.Participant`). The screens (befair_tui/screens/console*.py,
replay.py, participant_console.py) only draw what it decides."""
