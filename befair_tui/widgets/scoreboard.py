"""Scoreboard: the best nodes by each criterion next to expert baselines trained here and the
study's published rows, each labelled by where its number comes from."""
from __future__ import annotations

from typing import Any

from rich.table import Table
from rich.text import Text
from textual.widgets import Static

from engine.session.state import SessionState, best_node

from befair_tui.format import UNSANDBOXED, num

TITLE = "Scoreboard (test: DDI format)"
SOURCE_STYLE = {"measured here": "bold green", "baseline (trained here)": "cyan", "published": "dim"}


def _mean_std(values: list[float]) -> tuple[float | None, float | None]:
    values = [v for v in values if v is not None]
    if not values:
        return None, None
    mean = sum(values) / len(values)
    std = (sum((v - mean) ** 2 for v in values) / (len(values) - 1)) ** 0.5 if len(values) > 1 else 0.0
    return mean, std


def baseline_points(baselines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Mean test AUC / gap per baseline variant trained here."""
    by_variant: dict[str, list[dict]] = {}
    for row in baselines:
        by_variant.setdefault(row.get("variant") or "baseline", []).append(row)
    out = []
    for variant, rows in sorted(by_variant.items()):
        auc, auc_std = _mean_std([r.get("test_auc") for r in rows])
        gap, gap_std = _mean_std([r.get("test_gap") for r in rows])
        out.append({"name": variant, "auc": auc, "auc_std": auc_std, "gap": gap, "gap_std": gap_std,
                    "n": len(rows)})
    return out


def published_points(reference: list[dict[str, Any]], level: str) -> list[dict[str, Any]]:
    """Expert rows plus the agents' rows at this instruction level."""
    out = []
    for row in reference:
        agent = row.get("agent")
        if agent and row.get("level") not in (level, None, ""):
            continue
        name = row.get("name") or row.get("id")
        out.append({"name": name, "auc": row.get("auc_mean"), "auc_std": row.get("auc_std"),
                    "gap": row.get("gap_mean"), "gap_std": row.get("gap_std")})
    return out


class Scoreboard(Static):
    DEFAULT_CSS = """
    Scoreboard { border: round $primary-darken-1; padding: 0 1; height: 1fr; overflow-y: auto; }
    """

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.border_title = TITLE
        self.baselines: list[dict[str, Any]] = []
        self.published: list[dict[str, Any]] = []
        self._last_key: tuple | None = None

    def set_unsandboxed(self, unsandboxed: bool) -> None:
        """The trust marker on the title: the figures below come from code run without the sandbox."""
        title = TITLE + (f" · [bold black on $warning] {UNSANDBOXED} [/]" if unsandboxed else "")
        if self.border_title != title:
            self.border_title = title

    def set_references(self, baselines: list[dict], published: list[dict]) -> None:
        self.baselines, self.published = baselines, published
        self._last_key = None

    def sync(self, state: SessionState) -> None:
        criteria = ("claimed", "validation", "minimax")
        bests = {c: best_node(state, c) for c in criteria}
        blinded = bool(state.config.get("blind_test")) and state.status in ("running", "paused", "new")
        key = (tuple((c, n.node_id if n else None, n.val_auc if n else None,
                      (n.test or {}).get("auc") if n else None) for c, n in bests.items()), blinded,
               len(self.baselines), len(self.published), state.config.get("best"))
        if key == self._last_key:
            return
        self._last_key = key
        table = Table(box=None, pad_edge=False, expand=True)
        table.add_column("", ratio=1, no_wrap=True, overflow="ellipsis")
        table.add_column("AUC", justify="right")
        table.add_column("gap", justify="right")
        table.add_column("source", no_wrap=True)
        chosen = state.config.get("best", "validation")
        by_node: dict[int, list[str]] = {}
        for criterion, node in bests.items():
            if node is not None:
                by_node.setdefault(node.node_id, []).append(criterion)
        for node_id, crits in by_node.items():
            node = state.nodes[node_id]
            star = "★ " if chosen in crits else ""
            test = node.test or {}
            if test.get("auc") is not None and not blinded and not node.test_blinded:
                auc, gap, split = test.get("auc"), test.get("auc_gap"), "test"
            else:
                auc, gap, split = node.val_auc, node.val_gap, "val"
            names = "/".join({"claimed": "claim", "validation": "val", "minimax": "minimax"}[c] for c in crits)
            table.add_row(f"{star}node {node_id} · {split} · best {names}", num(auc), num(gap),
                          Text("measured here", style=SOURCE_STYLE["measured here"]))
        if not by_node:
            table.add_row(Text("no measured node yet", style="dim"), "", "", "")
        for row in self.baselines:
            table.add_row(f"{row['name']} (n={row['n']})", num(row["auc"]), num(row["gap"]),
                          Text("baseline (trained here)", style=SOURCE_STYLE["baseline (trained here)"]))
        for row in self.published:
            table.add_row(row["name"], num(row["auc"]), num(row["gap"]),
                          Text("published", style=SOURCE_STYLE["published"]))
        if not self.baselines and not self.published:
            table.add_row(Text("baselines: none in this database", style="dim"), "", "", "")
        self.update(table)
