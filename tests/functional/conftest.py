"""Pilot helpers: a tmp session database, isolated settings, and waiting on the app."""
from __future__ import annotations

import time

import pytest

from engine.session.store import SessionStore


@pytest.fixture(autouse=True)
def _isolated(tmp_path, monkeypatch):
    monkeypatch.setenv("BEFAIR_HOME", str(tmp_path / "home"))
    for var in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "BEFAIR_LLM_MODEL"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.delenv("BEFAIR_LLM_CONFIG", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))  # no ~/.config/befair/llm.toml


@pytest.fixture
def db(tmp_path):
    return tmp_path / "sessions" / "befair.db"


@pytest.fixture
def store(db):
    s = SessionStore(db)
    yield s
    s.close()


async def wait_for(pilot, predicate, timeout: float = 20.0, what: str = "condition"):
    """Let the app run until predicate() is true (polling every 50 ms)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        await pilot.pause(0.05)
        if predicate():
            return
    raise AssertionError(f"timed out waiting for {what}")


def tree_text(app) -> str:
    from befair_tui.widgets.search_tree import SearchTree

    tree = app.screen.query_one(SearchTree)
    lines = []

    def walk(node):
        for child in node.children:
            lines.append(str(child.label))
            walk(child)

    walk(tree.root)
    return "\n".join(lines)


def screen_text(app) -> str:
    return "\n".join("".join(seg.text for seg in strip) for strip in app.screen._compositor.render_strips())


def region_text(app, widget) -> str:
    """What the screen shows inside one widget's region (its border included)."""
    region = widget.region
    lines = screen_text(app).split("\n")[region.y: region.y + region.height]
    return "\n".join(line[region.x: region.x + region.width] for line in lines)


from pathlib import Path as _Path  # noqa: E402

from tests.conftest import SHARED_DATA  # noqa: E402

SHARED_AIDE: _Path = SHARED_DATA / "aide_journal_example"
