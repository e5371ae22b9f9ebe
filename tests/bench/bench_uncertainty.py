"""What the intervals cost (issue 20):

- the intervals of one node's evaluation (656 DDI-format test images, three skin-tone groups): the
  first evaluation of a split (its resamples drawn) and every later one (the same resamples, drawn
  once per split); references: fairlearn's MetricFrame bootstrap of the per-group AUC on the same
  predictions (200 resamples, scaled to the 2000 used here) and the MEDFAIR metric set without
  intervals;
- opening a 1,000-node session (load its events from SQLite, fold them, lay out its tree and
  choose its best nodes) with the new fields (intervals in every summary, a `compared` event per
  node, predictions kept) against the same database without them, in the same run; both with the
  full MEDFAIR metric set in every evaluation, as the harness records it;
- the per-node statistics issue 34 added (the gap's interval from the pairwise max-t intervals, the
  signed differences and the test of equal group AUCs) against the v1 interval fields without
  them (percentile gap), on the same predictions and resamples, in the same run (target ratio
  <= 1.5).
"""
from __future__ import annotations

import copy
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from engine.session.event_types import parse

N_NODES = 1000


def _ddi_like(seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    labels, scores, groups = [], [], []
    for (n, positives), group, shift in zip(((208, 49), (241, 74), (207, 48)), ("group_0", "group_1", "group_2"),
                                            (1.0, 0.8, 0.4), strict=True):
        raw = np.concatenate([rng.normal(shift, 1, positives), rng.normal(0, 1, n - positives)])
        labels += [1] * positives + [0] * (n - positives)
        scores += list(1 / (1 + np.exp(-raw)))
        groups += [group] * n
    return np.array(labels), np.array(scores), np.array(groups, dtype=object)


def _median_ms(fn: Any, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1000


def _interval_rows() -> list[dict[str, Any]]:
    from fairlearn.metrics import MetricFrame
    from sklearn.metrics import roc_auc_score

    from engine.evaluation.metrics import compute_metrics
    from engine.measures.uncertainty import N_RESAMPLES, Strata, interval_fields, shared_counts

    y, s, g = _ddi_like()
    point = compute_metrics(y, s, g)
    strata = Strata.of(y, g, ("group_0", "group_1", "group_2"))
    first = _median_ms(lambda: interval_fields(s, strata, point, counts=strata.counts()), 7)
    shared_counts(strata)
    later = _median_ms(lambda: interval_fields(s, strata, point), 15)
    metric_set = _median_ms(lambda: compute_metrics(y, s, g), 7)
    boots = 200

    def fairlearn() -> None:
        MetricFrame(metrics=roc_auc_score, y_true=y, y_pred=s, sensitive_features=g, n_boot=boots,
                    ci_quantiles=[0.025, 0.975], random_state=0)

    fl = _median_ms(fairlearn, 3) * N_RESAMPLES / boots
    return [
        {"name": "intervals of one node: 656 test images, 3 groups, first evaluation of a split", "value": first,
         "unit": "ms", "reference": f"fairlearn MetricFrame(n_boot) per-group AUC, scaled to {N_RESAMPLES}",
         "ratio": fl / first, "note": f"target < 50 ms; {N_RESAMPLES} stratified resamples drawn and used; "
                                    f"fairlearn (unstratified, {boots} resamples measured) ~{fl:,.0f} ms"},
        {"name": "intervals of one node: 656 test images, 3 groups, later evaluations (resamples kept)",
         "value": later, "unit": "ms", "reference": "MEDFAIR metric set without intervals",
         "ratio": later / metric_set, "note": f"the metric set itself: {metric_set:.1f} ms"},
    ]


def _v1_fields(s: np.ndarray, strata: Any, point: Any) -> dict[str, Any]:
    """The interval fields as METHOD_ID v1 computed them: a percentile interval of max − min for the
    gap, no signed differences and no test (the reference for what issue 34's statistics cost)."""
    from engine.measures.uncertainty import logit_interval, percentile, replicates, shared_counts

    rep = replicates(s, strata, shared_counts(strata))
    ci = [*logit_interval(rep.auc, float(point.auc)), *percentile(rep.worst), *percentile(rep.gap)]
    for name in strata.names:
        ci += logit_interval(rep.group_auc[name], float(point.group_auc[name]))
    return {"ci": ci}


def _group_statistics_rows() -> list[dict[str, Any]]:
    from engine.evaluation.metrics import compute_metrics
    from engine.measures.uncertainty import Strata, interval_fields, shared_counts

    y, s, g = _ddi_like()
    point = compute_metrics(y, s, g)
    strata = Strata.of(y, g, ("group_0", "group_1", "group_2"))
    shared_counts(strata)
    # alternate, so that a busy moment of the machine does not favour one side
    before, after = [], []
    for _ in range(5):
        before.append(_median_ms(lambda: _v1_fields(s, strata, point), 5))
        after.append(_median_ms(lambda: interval_fields(s, strata, point), 5))
    v1, v2 = statistics.median(before), statistics.median(after)
    return [{"name": "interval fields of one node with the gap's pairwise interval, signed differences and "
                     "the test of equal group AUCs (656 test images, resamples kept)",
             "value": v2, "unit": "ms", "reference": "the v1 interval fields (percentile gap, no pairwise "
                                                     "statistics), same predictions and resamples",
             "ratio": v2 / v1, "note": f"target ratio <= 1.5; v1: {v1:.1f} ms"}]


def _realistic(events: list[Any]) -> tuple[list[Any], list[Any]]:
    """The demo session as a real one records it, (without, with) the new fields: every evaluation
    carries the full MEDFAIR metric set (45 figures, as the harness writes it; the demo keeps a
    few), and with them its intervals (a real computation's fields, so the payloads have their
    real size), predictions kept, and a `compared` event after each node's evaluations."""
    from engine.evaluation.metrics import compute_metrics
    from engine.session import events as ev
    from tests.demo_session import demo_labels

    labels = demo_labels(656)
    rng = np.random.default_rng(0)
    scores = rng.random(len(labels))
    metrics = compute_metrics(labels["label"].to_numpy(), scores, labels["group"].to_numpy(), intervals=True)
    point = ("auc", "worst_auc", "best_auc", "auc_gap", "group_auc", "group_auc_reason", "n")
    fields = {k: v for k, v in metrics.summary().items() if k not in point}
    medfair = metrics.medfair()
    predictions = dict(zip(labels["file"], scores.tolist(), strict=True))
    without, with_fields = [], []
    for e in events:
        if e.kind != ev.EVALUATED or not e.payload.get("ok"):
            without.append((e.kind, e.payload, e.ts, None))
            with_fields.append((e.kind, e.payload, e.ts, None))
            continue
        plain = {**copy.deepcopy(e.payload), "medfair": dict(medfair)}
        rich = copy.deepcopy(plain)
        rich["summary"].update(copy.deepcopy(fields))
        without.append((e.kind, plain, e.ts, None))
        with_fields.append((e.kind, rich, e.ts, predictions))
        if rich.get("split") == "test":
            node = int(rich["node_id"])
            with_fields.append((ev.COMPARED, {"split": "validation", "method": "paired-bootstrap-2000-v1", "by": {
                c: {"leader": node, "statistic": "auc", "ties": [max(1, node - 1)],
                    "differences": [{"node_id": max(1, node - 1), "ci": [-0.01, 0.02]}]}
                for c in ("validation", "minimax", "robust")}}, e.ts, None))
    return without, with_fields


def _write(path: Path, items: list[Any]) -> str:
    from engine.session.store import SessionStore

    store = SessionStore(path)
    kind, first, ts, _ = items[0]
    writer = store.create_session(first["config"], instruction=first["instruction"], coder=first["coder"],
                                  data=first["data"], session_id="big", ts=ts)
    with writer.batch():
        for kind, payload, ts, predictions in items[1:]:
            writer.emit(parse(kind, payload), ts=ts, predictions=predictions)
    store.close()
    return "big"


def _open_ms(path: Path, sid: str) -> float:
    from engine.session import views
    from engine.session.state import memoised
    from engine.session.store import SessionStore

    def open_session() -> None:
        store = SessionStore(path)
        state = store.state(sid)
        with memoised(state):
            views.tree_lines(state)
            views.best_by_criterion(state)
        store.close()

    open_session()
    return _median_ms(open_session, 5)


def _open_rows() -> list[dict[str, Any]]:
    from tests.demo_session import demo_events

    events = demo_events(n_nodes=N_NODES, seed=2, intervals=False)
    plain, rich = _realistic(events)
    with tempfile.TemporaryDirectory(prefix="befair-bench-open-") as tmp:
        before, after = Path(tmp) / "before.db", Path(tmp) / "after.db"
        _write(before, plain)
        _write(after, rich)
        sizes = before.stat().st_size, after.stat().st_size
        # alternate, so that a busy moment of the machine does not favour one side
        a, b = [], []
        for _ in range(3):
            a.append(_open_ms(before, "big"))
            b.append(_open_ms(after, "big"))
    without, with_fields = statistics.median(a), statistics.median(b)
    return [{"name": f"open a {N_NODES:,}-node session (load + fold + tree + best) with the interval fields",
             "value": with_fields, "unit": "ms", "reference": "the same session without the new fields",
             "ratio": with_fields / without,
             "note": f"target ratio <= 1.1; without: {without:.0f} ms; {len(rich):,} vs {len(plain):,} events; "
                     f"database {sizes[1] / 1e6:.1f} MB (predictions kept) vs {sizes[0] / 1e6:.1f} MB"}]


def run() -> list[dict[str, Any]]:
    return _interval_rows() + _group_statistics_rows() + _open_rows()
