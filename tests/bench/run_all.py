"""`make bench`: run every tests/bench/bench_*.py module's `run()`, print its figures and write
them to bench/results.json.

Each `run()` returns a list of rows: {"name", "value", "unit", "reference"?, "ratio"?, "note"?}
and any extra fields of its own (e.g. "timeouts"). A ratio is always against a named reference
measured on the same machine in the same run.

bench/results.json is a list of {name, value, unit, reference, ratio, machine, bench, ...}. Running
a subset (`python -m tests.bench.run_all bench_session`) replaces that subset's rows and keeps
the others, so the file always holds the latest figure of every benchmark.
"""
from __future__ import annotations

import importlib
import json
import os
import pkgutil
import platform
import shutil
import subprocess
import sys
import time
import traceback
from pathlib import Path
from typing import Any

import tests.bench as bench_pkg

RESULTS = Path(__file__).resolve().parents[2] / "bench" / "results.json"


def machine() -> dict[str, Any]:
    """What the figures were measured on, and how busy it was when the run started."""
    info: dict[str, Any] = {"host": platform.node(), "platform": platform.platform(),
                            "python": platform.python_version(), "cpus": os.cpu_count(),
                            "processor": platform.processor() or platform.machine()}
    if hasattr(os, "getloadavg"):
        info["load_1min"] = round(os.getloadavg()[0], 2)
    if shutil.which("nvidia-smi"):
        try:
            out = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True,
                                 text=True, timeout=20).stdout.strip()
            info["gpu"] = out.splitlines()[0] if out else None
        except (OSError, subprocess.SubprocessError):
            info["gpu"] = None
    return info


def result_row(row: dict[str, Any], bench: str, where: dict[str, Any], at: float) -> dict[str, Any]:
    return {"name": row["name"], "value": row["value"], "unit": row["unit"], "reference": row.get("reference"),
            "ratio": row.get("ratio"), "machine": where, "bench": bench, "measured_at": at,
            **{k: v for k, v in row.items() if k not in ("name", "value", "unit", "reference", "ratio")}}


def write_results(rows: list[dict[str, Any]], ran: set[str], path: Path = RESULTS) -> None:
    kept: list[dict[str, Any]] = []
    if path.exists():
        try:
            kept = [r for r in json.loads(path.read_text()) if r.get("bench") not in ran]
        except (ValueError, AttributeError):
            kept = []
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(kept + rows, indent=1, default=str) + "\n")
    tmp.replace(path)


def print_row(row: dict[str, Any]) -> None:
    line = f"  {row['name']:<58} {row['value']:>12.4g} {row['unit']}"
    if row.get("ratio") is not None:
        line += f"   x{row['ratio']:.2f} vs {row.get('reference', '?')}"
    if row.get("note"):
        line += f"   ({row['note']})"
    print(line, flush=True)


def main(argv: list[str]) -> int:
    only = set(argv)
    failed = 0
    where = machine()
    print(f"machine: {where}", flush=True)
    results: list[dict[str, Any]] = []
    ran: set[str] = set()
    for info in sorted(pkgutil.iter_modules(bench_pkg.__path__), key=lambda m: m.name):
        if not info.name.startswith("bench_") or (only and info.name not in only):
            continue
        print(f"\n== {info.name} ==", flush=True)
        started = time.perf_counter()
        try:
            rows = importlib.import_module(f"tests.bench.{info.name}").run()
        except Exception:
            failed += 1
            traceback.print_exc()
            continue
        ran.add(info.name)
        for row in rows:
            print_row(row)
            results.append(result_row(row, info.name, where, time.time()))
        print(f"  [{time.perf_counter() - started:.1f} s]")
        write_results(results, ran)  # after each module: an interrupted run keeps what it measured
    print(f"\nwrote {len(results)} figures to {RESULTS}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
