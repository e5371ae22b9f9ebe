"""bench/results.json: every row carries name, value, unit, reference, ratio and machine; a run of
a subset replaces that subset's rows and keeps the rest."""
from __future__ import annotations

import json

from tests.bench.run_all import machine, result_row, write_results


def test_rows_have_the_comparable_fields_and_subsets_replace_their_own_rows(tmp_path):
    path = tmp_path / "bench" / "results.json"
    where = machine()
    assert where["cpus"] and where["python"]
    a = result_row({"name": "event ingest", "value": 2.0e4, "unit": "events/s", "reference": "emit",
                    "ratio": 5.0, "note": "n"}, "bench_session", where, 1.0)
    b = result_row({"name": "session cpu", "value": 300.0, "unit": "s", "timeouts": 1}, "bench_agent", where, 1.0)
    write_results([a, b], {"bench_session", "bench_agent"}, path)
    rows = json.loads(path.read_text())
    assert [r["name"] for r in rows] == ["event ingest", "session cpu"]
    for r in rows:
        assert {"name", "value", "unit", "reference", "ratio", "machine"} <= set(r)
    assert rows[1]["timeouts"] == 1 and rows[1]["ratio"] is None
    newer = result_row({"name": "event ingest", "value": 3.0e4, "unit": "events/s"}, "bench_session", where, 2.0)
    write_results([newer], {"bench_session"}, path)
    rows = json.loads(path.read_text())
    assert sorted((r["name"], r["value"]) for r in rows) == [("event ingest", 3.0e4), ("session cpu", 300.0)]
