"""`befair datasette [--db]`: the session database in Datasette, with befair's metadata.

Datasette is an optional extra (`pip install 'befair[datasette]'`); without it the command says
how to install it. The metadata (engine/session/datasette.yml: descriptions that say where each
figure comes from, and canned queries) is written next to nothing: it is passed on the command
line from a temporary file.
"""
from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from typing import Any

import engine.session

from engine.errors import BefairError, DataError
from engine.paths import add_db_arg, db_from_args

METADATA = Path(engine.session.__file__).resolve().parent / "datasette.yml"


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser("datasette", help="browse the session database in Datasette (optional extra)",
                              description="Open the session database in Datasette with befair's metadata: "
                                          "table and column descriptions and canned queries.")
    p.add_argument("--port", type=int, default=8001, help="port (default 8001)")
    p.add_argument("--print-metadata", action="store_true", help="print the metadata as JSON and exit")
    p.add_argument("--researcher", action="store_true",
                   help="also show sealed (blinded) test figures and allow arbitrary SQL; the default is safe to "
                        "show a study participant: canned queries and tables only")
    add_db_arg(p)
    p.set_defaults(func=cmd_datasette)


def metadata_for(db: Path, *, researcher: bool = False) -> dict[str, Any]:
    """befair's metadata with its tables and queries placed under the database's Datasette name.
    For a participant (the default) sealed test figures are refused and arbitrary SQL is off, so a
    blinded figure cannot be read through Datasette; a researcher gets both."""
    import yaml

    base = yaml.safe_load(METADATA.read_text(encoding="utf-8"))
    database = {k: base.pop(k) for k in ("tables", "queries") if k in base}
    database["description_html"] = base.get("description_html", "")
    if researcher:
        for table in database.get("tables", {}).values():
            table.pop("allow", None)
    else:
        database["allow_sql"] = False
    return {**base, "databases": {Path(db).stem: database}}


def cmd_datasette(args: argparse.Namespace) -> int:
    db = db_from_args(args)
    meta = metadata_for(db, researcher=args.researcher)
    if args.print_metadata:
        print(json.dumps(meta, indent=2))
        return 0
    if not Path(db).is_file():
        raise DataError(f"no session database at {db}; run a session first or give --db")
    from engine.session.store import SessionStore

    _ = SessionStore(db).db  # checks and migrates it (the views and keys Datasette shows)
    exe = shutil.which("datasette") or (str(Path(sys.executable).parent / "datasette"))
    if not Path(exe).exists():
        raise BefairError("Datasette is not installed: pip install 'befair[datasette]' (or pipx install datasette)")
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as fh:
        json.dump(meta, fh)
    print(f"befair: Datasette on http://127.0.0.1:{args.port} for {db}; Ctrl+C stops", file=sys.stderr)
    try:
        return subprocess.call([exe, "serve", str(db), "--metadata", fh.name, "--port", str(args.port)])
    finally:
        Path(fh.name).unlink(missing_ok=True)
