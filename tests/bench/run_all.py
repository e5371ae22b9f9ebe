"""`make bench`: run every tests/bench/bench_*.py module's `run()` and print its figures.

Each `run()` returns a list of rows: {"name", "value", "unit", "reference"?, "ratio"?, "note"?}.
A ratio is always against a named reference measured on the same machine in the same run.
"""
from __future__ import annotations

import importlib
import pkgutil
import sys
import time
import traceback

import tests.bench as bench_pkg


def main(argv: list[str]) -> int:
    only = set(argv)
    failed = 0
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
        for row in rows:
            line = f"  {row['name']:<58} {row['value']:>12.4g} {row['unit']}"
            if row.get("ratio") is not None:
                line += f"   x{row['ratio']:.2f} vs {row.get('reference', '?')}"
            if row.get("note"):
                line += f"   ({row['note']})"
            print(line, flush=True)
        print(f"  [{time.perf_counter() - started:.1f} s]")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
