"""The references a study report and its figure are drawn against: the expert baselines trained
here on the study's data, and the published rows (experts, dermatologists, agents), each with its
source. Shared by `befair study report` (befair_tui.cli.study) and the report by expertise
(befair_tui.cli.people)."""
from __future__ import annotations

from typing import Any


def study_references(store: Any, report: Any, *, published_agents: bool = False) -> list[dict[str, Any]]:
    """Expert baselines trained here on the study's data, and the published rows (experts,
    dermatologists; the published agents at the study's levels when asked), each with its source."""
    from baselines.reference import load_reference_rows
    from engine.session.views import baseline_points

    out: list[dict[str, Any]] = []
    state = next((store.state(s["session_id"]) for s in report.sessions if s.get("session_id")), None)
    for b in baseline_points(store.baselines(), state):
        if b.get("same_data") is False:
            continue
        out.append({"name": b["name"], "auc": b["auc"], "auc_std": b["auc_std"], "gap": b["gap"],
                    "gap_std": b["gap_std"], "kind": "baseline",
                    "source": f"expert baselines trained here ({b['dataset'] or 'data unknown'})"})
    levels = {s["prompt"] for s in report.sessions}
    for row in load_reference_rows():
        agent = row.get("agent")
        if agent not in ("expert", "dermatologists") and not (published_agents and row.get("level") in levels):
            continue
        kind = {"dermatologists": "human", "expert": "expert"}.get(str(agent), "published")
        source = row["source"] if "DDI" in row["source"] else f"{row['source']}, DDI"
        what = {"expert": "expert pipelines (MEDFAIR)", "published": "agents"}.get(kind)
        out.append({"name": row["name"], "auc": row["auc_mean"], "auc_std": row["auc_std"], "gap": row["gap_mean"],
                    "gap_std": row["gap_std"], "kind": kind, "source": f"{what}; {source}" if what else source})
    return out
