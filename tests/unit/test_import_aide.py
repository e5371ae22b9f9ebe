"""Importing AIDE runs: the published example (when present) and generated odd journals."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.errors import BefairError
from engine.session import events as ev
from engine.imports.aide import CODER, _TolerantLoader, find_journal, import_aide, load_aide_config
from engine.session.state import fold
from engine.session.store import SessionStore, node_row
from engine.task import LEVELS

EXAMPLE = Path(__file__).resolve().parents[3] / "shared" / "data" / "aide_journal_example"


@pytest.fixture
def store(tmp_path):
    s = SessionStore(tmp_path / "imp.db")
    yield s
    s.close()


def _same_as_fold(store, sid):
    state = fold(store.events(sid), sid)
    assert store.nodes(sid) == [node_row(sid, state.nodes[k]) for k in sorted(state.nodes)]
    return state


def _audit_available() -> bool:
    try:
        from engine.evaluation.audit import audit_code  # noqa: F401
    except ImportError:
        return False
    return True


def test_published_example(store):
    if not (EXAMPLE / "journal.json").is_file():
        pytest.skip("../shared/data/aide_journal_example is not present")
    sid = import_aide(store, EXAMPLE)
    state = _same_as_fold(store, sid)
    journal = json.loads((EXAMPLE / "journal.json").read_text())
    assert len(state.nodes) == 20
    assert sum(n.stage == "draft" for n in state.nodes.values()) == 5
    assert state.level == "base" and state.instruction == LEVELS["base"]
    assert state.coder["name"] == CODER["name"] and state.coder["label"] == "imported AIDE run"
    assert state.coder["simulated"] is False and state.coder.get("model") == "o4-mini"
    assert state.config["num_drafts"] == 5 and state.config["best"] == "claimed"
    assert state.status == "finished"
    # edges follow node2parent
    by_aide = {e.payload["aide_id"]: e.payload["node_id"] for e in store.events(sid) if e.kind == ev.NODE_CREATED}
    for child, parent in journal["node2parent"].items():
        assert state.nodes[by_aide[child]].parent_id == by_aide[parent]
    # statuses and stages from the tree
    for raw in journal["nodes"]:
        node = state.nodes[by_aide[raw["id"]]]
        assert node.status == ("buggy" if raw["is_buggy"] else "ok")
        assert node.code == raw["code"] and node.exec_time == raw["exec_time"]
        assert node.claimed_metric == raw["metric"]["value"]
        assert node.created_ts == raw["ctime"]
        if node.parent_id is not None:
            expected = "debug" if state.nodes[node.parent_id].status == "buggy" else "improve"
            assert node.stage == expected
    assert sum(n.stage == "debug" for n in state.nodes.values()) == 2
    best_raw = max((r for r in journal["nodes"] if not r["is_buggy"]), key=lambda r: r["metric"]["value"])
    assert state.nodes[state.final_choice["by_claimed"]].claimed_metric == best_raw["metric"]["value"]
    ts = [e.ts for e in store.events(sid)]
    assert ts == sorted(ts)
    if _audit_available():
        audited = [e for e in store.events(sid) if e.kind == ev.AUDITED]
        assert len(audited) == 20
        assert not any(n.audit_flags.get("reads_skin_tone") for n in state.nodes.values())
    assert store.session(sid)["origin"] == "import"


def _node(nid, step, **kw):
    base = {"id": nid, "step": step, "ctime": 1000.0 + 10 * step, "code": f"print('Validation AUC: 0.{step + 5}')\n",
            "plan": f"plan {step}", "_term_out": [f"Validation AUC: 0.{step + 5}\n"], "exec_time": 2.0,
            "exc_type": None, "is_buggy": False, "metric": {"value": 0.5 + step / 100, "maximize": True},
            "analysis": "fine"}
    base.update(kw)
    return {k: v for k, v in base.items() if v != "__drop__"}


CONFIG_YAML = """\
data_dir: !!python/object/apply:pathlib.PosixPath
- /
- home
- someone
- data
goal: {goal}
eval: Area under the receiver operator curve (AUROC)
log_dir: !!python/object/apply:pathlib.PosixPath
- /
- logs
exp_name: odd-run
exec:
  timeout: 1200
agent:
  steps: 9
  code:
    model: some-llm
  search:
    num_drafts: 2
    debug_prob: 0.3
    max_debug_depth: 2
"""


def _write_run(root: Path, nodes, node2parent, goal="Be nice to all skin tones.", nested=True) -> Path:
    run = root / "logs" / "odd-run" if nested else root
    run.mkdir(parents=True, exist_ok=True)
    (run / "journal.json").write_text(json.dumps({"nodes": nodes, "node2parent": node2parent, "__version": "2",
                                                  "unknown_top_level": [1, 2]}))
    if goal is not None:
        (run / "config.yaml").write_text(CONFIG_YAML.format(goal=json.dumps(goal)))
    return root


def test_odd_journal_shapes(store, tmp_path):
    nodes = [
        _node("a", 0, _term_out="<OMITTED>"),
        _node("b", 1, is_buggy=True, exc_type="KeyError", metric=None, _term_out="Traceback...\nKeyError: 'x'\n"),
        _node("c", 2, metric={"value": None, "maximize": None}, _term_out="__drop__", exec_time="__drop__",
              ctime="__drop__", extra_key={"nested": True}),
        _node("d", 3, is_buggy="__drop__", exc_type="TimeoutError", metric=0.9, analysis="__drop__"),
        _node("e", 4, metric="MetricValue(value=0.77, maximize=True)", is_buggy="False"),
        _node("f", 5, plan=None, code=None, metric={"value": 0.99, "maximize": True}, is_buggy=True,
              exc_type="ValueError"),
    ]
    root = _write_run(tmp_path / "run", nodes, {"b": "a", "c": "b", "e": "c", "f": "e", "d": "zzz-unknown"})
    sid = import_aide(store, root)
    s = _same_as_fold(store, sid)
    n = {e.payload["aide_id"]: s.nodes[e.payload["node_id"]] for e in store.events(sid) if e.kind == ev.NODE_CREATED}
    assert n["a"].stage == "draft" and n["a"].output_head == "<OMITTED>" and n["a"].status == "ok"
    assert n["b"].stage == "improve" and n["b"].status == "buggy" and n["b"].claimed_metric is None
    assert n["c"].stage == "debug" and n["c"].exec_time is None and n["c"].claimed_metric is None
    assert n["d"].parent_id is None and n["d"].status == "timeout" and n["d"].claimed_metric == 0.9
    assert n["e"].claimed_metric == 0.77 and n["e"].status == "ok"
    assert n["f"].code == "" and n["f"].plan == "" and n["f"].stage == "improve" and n["f"].status == "buggy"
    assert s.level == "custom" and s.instruction == "Be nice to all skin tones."
    assert s.config["num_drafts"] == 2 and s.config["step_timeout"] == 1200 and s.budget == 9
    # the claimed winner is an ok node (f claims .99 but crashed)
    assert s.nodes[s.final_choice["by_claimed"]].node_id == n["e"].node_id
    ts = [e.ts for e in store.events(sid)]
    assert ts == sorted(ts)
    if _audit_available():
        assert n["f"].claim["unsupported"] is True
        assert n["a"].claim["unsupported"] is False


def test_level_matched_and_yaml_python_tags(store, tmp_path):
    root = _write_run(tmp_path / "r", [_node("a", 0)], {}, goal=LEVELS["fairness-methods"], nested=False)
    sid = import_aide(store, root / "journal.json")
    s = fold(store.events(sid))
    assert s.level == "fairness-methods" and s.instruction == LEVELS["fairness-methods"]
    cfg = load_aide_config(root / "config.yaml")
    assert cfg["data_dir"] == "/home/someone/data" and cfg["log_dir"] == "/logs"
    import yaml

    assert yaml.load("x: !!python/tuple [1, 2]", Loader=_TolerantLoader) == {"x": "1 2"}


def test_journal_alone_and_list_form(store, tmp_path):
    path = tmp_path / "j.json"
    path.write_text(json.dumps([_node("a", 0), _node("b", 1, parent="a")]))
    sid = import_aide(store, path)
    s = fold(store.events(sid))
    assert s.level == "custom" and "no instruction" in s.instruction
    assert s.nodes[2].parent_id == 1 and s.nodes[2].stage == "improve"


def test_import_errors(store, tmp_path):
    with pytest.raises(BefairError, match="does not exist"):
        import_aide(store, tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(BefairError, match="no journal.json"):
        import_aide(store, tmp_path / "empty")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(BefairError, match="cannot read"):
        import_aide(store, bad)
    none = tmp_path / "none.json"
    none.write_text(json.dumps({"nodes": [], "node2parent": {}}))
    with pytest.raises(BefairError, match="no nodes"):
        import_aide(store, none)
    for name in ("one", "two"):
        d = tmp_path / "many" / "logs" / name
        d.mkdir(parents=True)
        (d / "journal.json").write_text(json.dumps({"nodes": [_node("a", 0)]}))
    with pytest.raises(BefairError, match="several"):
        find_journal(tmp_path / "many")
    assert store.sessions() == []


def test_large_output_is_capped(store, tmp_path):
    path = tmp_path / "big.json"
    path.write_text(json.dumps({"nodes": [_node("a", 0, _term_out=["x" * 100 + "\n"] * 2000)]}))
    s = fold(store.events(import_aide(store, path)))
    node = s.nodes[1]
    assert node.truncated and len(node.output_head) + len(node.output_tail) <= 16_000
