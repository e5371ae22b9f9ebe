"""`befair score` (score a predictions file against DDI-format metadata) and `befair audit`."""
from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any

from engine.errors import DataError
from engine.evaluation.scoring import score_file


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser(
        "score",
        help="score a predictions CSV against DDI-format metadata (MEDFAIR metrics)",
        description="Score predictions (columns DDI_file, predicted_probability, as the study "
        "published them) against DDI-format metadata and print every MEDFAIR metric.",
    )
    p.add_argument("--predictions", required=True, help="CSV with DDI_file,predicted_probability")
    p.add_argument("--metadata", required=True, help="DDI metadata CSV (DDI_file,skin_tone,malignant)")
    p.add_argument("--json", action="store_true", help="print JSON (MEDFAIR names, 'Test ' prefix)")
    p.set_defaults(func=cmd_score)

    a = subparsers.add_parser("audit", help="statically audit a pipeline's code for fairness interventions")
    a.add_argument("code", help="a solution.py")
    a.add_argument("--json", action="store_true")
    a.set_defaults(func=cmd_audit)


def _fmt(v: Any) -> str:
    if v is None:
        return "—"
    if isinstance(v, float):
        return "nan" if math.isnan(v) else f"{v:.6f}"
    return str(v)


def cmd_score(args: argparse.Namespace) -> int:
    values = score_file(args.predictions, args.metadata)
    if args.json:
        print(json.dumps(values, indent=2))
    else:
        width = max(len(k) for k in values)
        for k, v in values.items():
            print(f"{k:<{width}}  {_fmt(v)}")
    return 0


def cmd_audit(args: argparse.Namespace) -> int:
    """Exit 0 when the code was audited; 3 (bad input) when it could not be read, every flag then
    "not audited" (unknown, never "no") and the reason said."""
    from engine.errors import EXIT_DATA
    from engine.evaluation.audit import audit_code

    path = Path(args.code)
    if not path.is_file():
        raise DataError(f"no such file: {path}")
    result = audit_code(path.read_text(encoding="utf-8", errors="replace"))
    audited = not result.note
    if args.json:
        out = result.to_dict()
        out["audited"] = audited
        if not audited:
            out["flags"] = {flag: None for flag in result.flags}  # unknown, not false
            out.update(error=f"{path}: {result.note}", exit_code=EXIT_DATA)
        print(json.dumps(out, indent=2))
        return 0 if audited else EXIT_DATA
    for flag, on in result.flags.items():
        word = ("yes" if on else "no") if audited else "not audited"
        line = f"{flag:<18} {word}"
        if on:
            line += f"   {result.evidence.get(flag, '')}"
        print(line)
    if not audited:
        print(f"befair: {path}: {result.note}", file=sys.stderr)
        return EXIT_DATA
    return 0
