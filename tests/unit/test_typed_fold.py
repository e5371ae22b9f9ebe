"""The typed reducer folds every session exactly as the reducer of payload dicts did (kept as the
benchmarks' reference in tests/bench/reference_dict_fold.py): the demo session with every event
kind, events typed by the store or parsed in the fold, and the published AIDE and MLZero runs
imported (../shared/data; skipped when absent)."""
from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from engine.session.state import NodeState, SessionState, fold
from engine.session.store import SessionStore
from tests.bench import reference_dict_fold
from tests.demo_session import all_event_kinds_session, write_demo_session

DATA = Path(__file__).resolve().parents[3] / "shared" / "data"
METADATA = DATA / "ddi_metadata.csv"


def _same(typed: SessionState, reference: SessionState) -> None:
    """Equal, the typed state's evaluation summaries read as the payloads the dict reducer kept."""
    typed = dataclasses.replace(typed, nodes={i: _as_stored(n) for i, n in typed.nodes.items()})
    assert typed.nodes == reference.nodes
    assert dataclasses.asdict(typed) == dataclasses.asdict(reference)


def _as_stored(node: NodeState) -> NodeState:
    return dataclasses.replace(node, validation=node.validation and node.validation.to_payload(),  # type: ignore
                               test=node.test and node.test.to_payload())


@pytest.fixture
def store(tmp_path):
    s = SessionStore(tmp_path / "befair.db")
    yield s
    s.close()


def test_every_kind_folds_as_the_dict_reducer_did(store):
    sid = all_event_kinds_session(store)
    loaded = store.events(sid)
    assert all(e.typed is not None for e in loaded)  # the store types what it loads
    bare = [dataclasses.replace(e, typed=None) for e in loaded]
    reference = reference_dict_fold.fold(loaded, sid)
    _same(fold(loaded, sid), reference)
    _same(fold(bare, sid), reference)  # parsed in the fold
    _same(store.state(sid), reference)


def test_a_long_demo_session_folds_as_the_dict_reducer_did(store):
    sid = write_demo_session(store, n_nodes=40, seed=3)
    _same(store.state(sid), reference_dict_fold.fold(store.events(sid), sid))


@pytest.mark.skipif(not (DATA / "aide_journal_example" / "journal.json").is_file() or not METADATA.is_file(),
                    reason="../shared/data (the published AIDE run and the DDI metadata) is not present")
def test_the_published_aide_run_folds_as_the_dict_reducer_did(store):
    from engine.imports.aide import import_aide

    predictions = DATA / "befair_run_example" / "5-basic_prompt_DDI_predictions.csv"
    sid = import_aide(store, DATA / "aide_journal_example", predictions=predictions, metadata=METADATA)
    _same(store.state(sid), reference_dict_fold.fold(store.events(sid), sid))


@pytest.mark.skipif(not (DATA / "mlzero_run_example" / "info_logs.txt").is_file() or not METADATA.is_file(),
                    reason="../shared/data (the published MLZero run and the DDI metadata) is not present")
def test_the_published_mlzero_run_folds_as_the_dict_reducer_did(store):
    from engine.imports.mlzero import import_mlzero

    run = DATA / "mlzero_run_example"
    sid = import_mlzero(store, run, predictions=run / "30-basic_prompt_DDI_predictions.csv", metadata=METADATA)
    _same(store.state(sid), reference_dict_fold.fold(store.events(sid), sid))
