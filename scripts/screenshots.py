"""Regenerate the README screenshots from the app itself: `python scripts/screenshots.py [OUT]`
(console.svg, replay.svg, test-vs-test.svg, console-80x24.svg, help.svg).

Uses the deterministic recorded demo session (tests/demo_session.py) in a temporary database,
a frozen clock, and App.save_screenshot in a headless Pilot run.
"""
from __future__ import annotations

import asyncio
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from textual.app import App

TS0 = 1_700_000_000.0
ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "screenshots"
# the demo session lives with the tests (tests/demo_session.py), outside the installed packages
sys.path.insert(0, str(ROOT))


async def _shoot(app: App[None], path: Path, size: tuple[int, int], ready: Callable[[App[None]], bool]) -> None:
    async with app.run_test(size=size) as pilot:
        for _ in range(300):
            await pilot.pause(0.02)
            if ready(app):
                break
        await pilot.pause(0.2)
        app.save_screenshot(filename=path.name, path=str(path.parent))


def _read_up_to(seq: int) -> Callable[[App[None]], bool]:
    """Ready when the app's screen has read its session up to event `seq`."""
    return lambda a: getattr(getattr(a.screen, "state", None), "last_seq", None) == seq


async def main(out: Path) -> list[Path]:
    from tests.demo_session import write_demo_session
    from engine.session.store import SessionStore

    from befair_tui.app import create_app, frozen_clock
    from befair_tui.screens.replay import ReplayScreen

    out.mkdir(parents=True, exist_ok=True)
    written = []
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "befair.db"
        store = SessionStore(db)
        sid = write_demo_session(store, n_nodes=12, ts0=TS0, finished=False)
        last = store.last_seq(sid)
        app = create_app(db, start="console", session_id=sid, clock=frozen_clock(TS0 + 400), poll_interval=0.02)
        path = out / "console.svg"
        await _shoot(app, path, (140, 42), _read_up_to(last))
        written.append(path)
        done = write_demo_session(store, n_nodes=12, ts0=TS0 + 7200, finished=True, seed=1)
        app = create_app(db, start="replay", session_id=done, clock=frozen_clock(TS0))

        def at_node_9(a: App[None]) -> bool:
            screen = a.screen
            if not isinstance(screen, ReplayScreen):
                return False
            if 9 not in screen.state.nodes:
                screen._move_to(screen.timeline._node_pos[9] + 6)
            return 9 in screen.state.nodes

        path = out / "replay.svg"
        await _shoot(app, path, (140, 42), at_node_9)
        written.append(path)

        # the finished session: the scoreboard and the plot compare test with test
        app = create_app(db, start="console", session_id=done, clock=frozen_clock(TS0 + 7600), poll_interval=0.02)
        last_done = store.last_seq(done)
        path = out / "test-vs-test.svg"
        await _shoot(app, path, (140, 42), _read_up_to(last_done))
        written.append(path)

        # the same finished session at the smallest supported terminal
        app = create_app(db, start="console", session_id=done, clock=frozen_clock(TS0 + 7600), poll_interval=0.02)
        path = out / "console-80x24.svg"
        await _shoot(app, path, (80, 24), _read_up_to(last_done))
        written.append(path)

        # the help (F1 or ?) at the smallest supported terminal
        app = create_app(db, settings_file=Path(tmp) / "settings.json")
        path = out / "help.svg"

        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.press("f1")
            for _ in range(100):
                await pilot.pause(0.02)
                if app.screen.__class__.__name__ == "HelpScreen":
                    break
            await pilot.pause(0.2)
            app.save_screenshot(filename=path.name, path=str(path.parent))
        written.append(path)
        store.close()
    return written


if __name__ == "__main__":
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else OUT
    for p in asyncio.run(main(target)):
        print(f"wrote {p}")
