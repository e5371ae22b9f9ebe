"""The 1,000-node open (load + fold + tree + best, with the interval fields: bench_uncertainty's
_open_ms) of two checkouts, on the same database in the same run, the rounds taking turns, each in a
fresh process: `python scripts/compare_open.py OLD_CHECKOUT NEW_CHECKOUT [rounds]` (issue 35's
"no slower than 1.1x the previous commit"). Prints each side's times, medians and the ratio."""
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

PY = sys.executable
BUILD = r"""
import sys
from pathlib import Path
from tests.bench import bench_uncertainty as b
from tests.demo_session import demo_events
events = demo_events(n_nodes=b.N_NODES, seed=2, intervals=False)
plain, rich = b._realistic(events)
b._write(Path(sys.argv[1]), rich)
"""
OPEN = r"""
import sys, json
from pathlib import Path
from tests.bench import bench_uncertainty as b
print(json.dumps(b._open_ms(Path(sys.argv[1]), "big")))
"""

def run(tree, code, *args):
    env = {"PYTHONPATH": tree, "PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    out = subprocess.run([PY, "-c", code, *args], cwd=tree, env=env, capture_output=True, text=True, check=True)
    return out.stdout.strip().splitlines()[-1] if out.stdout.strip() else None

old, new = sys.argv[1], sys.argv[2]
rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 5
with tempfile.TemporaryDirectory() as tmp:
    db = str(Path(tmp) / "big.db")
    run(new, BUILD, db)
    a, b = [], []
    for i in range(rounds):
        for side, tree in ((a, old), (b, new)) if i % 2 == 0 else ((b, new), (a, old)):
            side.append(float(run(tree, OPEN, db)))
print(json.dumps({"old_ms": a, "new_ms": b, "old_median": statistics.median(a), "new_median": statistics.median(b),
                  "ratio": statistics.median(b) / statistics.median(a)}))
