"""The session database in Datasette: readable views, the parent foreign key, befair's metadata
and every canned query run through Datasette's own Python API (skipped when not installed)."""
from __future__ import annotations

import asyncio
import sqlite3

import pytest

from befair_tui.cli.datasette import metadata_for
from tests.demo_session import write_demo_session
from engine.session.store import SessionStore


@pytest.fixture()
def db(tmp_path):
    path = tmp_path / "befair.db"
    store = SessionStore(path)
    write_demo_session(store, session_id="demo")
    store.close()
    return path


def test_views_iso_times_and_parent_foreign_key(db):
    con = sqlite3.connect(db)
    created = con.execute("select created from session_overview").fetchone()[0]
    assert created[:4].isdigit() and created[10] == "T" and created.endswith("Z")
    cols = [r[1] for r in con.execute("pragma table_info(session_overview)")]
    assert "best_val_auc" in cols and "best_val_gap" in cols and "sandbox" in cols
    fks = {(r[2], r[3], r[4]) for r in con.execute("pragma foreign_key_list(nodes)")}
    assert ("nodes", "parent_id", "node_id") in fks
    con.execute("pragma foreign_keys = on")
    assert con.execute("pragma foreign_key_check(nodes)").fetchall() == []
    with pytest.raises(sqlite3.IntegrityError):
        con.execute("insert into nodes (session_id, node_id, parent_id) values ('demo', 999, 998)")
        con.commit()


def test_metadata_describes_where_figures_come_from(db):
    meta = metadata_for(db)
    database = meta["databases"]["befair"]
    assert "VALIDATION" in database["tables"]["sessions"]["columns"]["best_auc"]
    assert "PUBLISHED" in database["tables"]["reference_rows"]["description"]
    assert set(database["queries"]) == {"final_choices", "level_aggregates", "conversation"}


def test_every_canned_query_runs_in_datasette(db):
    datasette_app = pytest.importorskip("datasette.app", reason="datasette is not installed (befair[datasette])")
    meta = metadata_for(db)
    ds = datasette_app.Datasette([str(db)], metadata=meta)

    async def fetch(path):
        response = await ds.client.get(path)
        assert response.status_code == 200, (path, response.text[:500])
        return response.json()

    async def run_all():
        out = {}
        for name in meta["databases"]["befair"]["queries"]:
            out[name] = await fetch(f"/befair/{name}.json?_shape=objects&session_id=demo")
        out["view"] = await fetch("/befair/session_overview.json?_shape=objects")
        return out

    results = asyncio.run(run_all())
    choices = results["final_choices"]["rows"]
    assert choices and choices[0]["session_id"] == "demo" and choices[0]["by_validation"] is not None
    assert results["level_aggregates"]["rows"][0]["sessions"] == 1
    assert results["view"]["rows"][0]["id"] == "demo"
    assert "rows" in results["conversation"]


def test_sealed_test_figures_are_refused_to_a_participant_and_shown_to_a_researcher(db):
    datasette_app = pytest.importorskip("datasette.app", reason="datasette is not installed (befair[datasette])")
    con = sqlite3.connect(db)
    con.execute("insert into sealed_metrics (session_id, seq, node_id, split, payload, sealed_at) "
                "values ('demo', 1, 1, 'test', '{\"auc\": 0.9}', 0)")
    con.commit()
    con.close()

    async def status(meta, path):
        return (await datasette_app.Datasette([str(db)], metadata=meta).client.get(path)).status_code

    sql = "/befair.json?sql=select+payload+from+sealed_metrics"
    participant, researcher = metadata_for(db), metadata_for(db, researcher=True)
    assert asyncio.run(status(participant, "/befair/sealed_metrics.json")) == 403
    assert asyncio.run(status(participant, sql)) == 403
    assert asyncio.run(status(participant, "/befair/final_choices.json?session_id=demo")) == 200
    assert asyncio.run(status(researcher, "/befair/sealed_metrics.json")) == 200
    assert asyncio.run(status(researcher, sql)) == 200
