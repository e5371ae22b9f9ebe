"""`befair study links SPEC|NAME`: each participant's link to a study with people, to hand out
(engine.study.links). The link's code is the participant's key: their id alone opens nothing."""
from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path
from typing import Any

from engine.errors import UsageError
from engine.paths import add_db_arg, db_from_args
from engine.study.links import DEFAULT_BASE_URL


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `links` to `befair study`'s actions."""
    k = sub.add_parser("links", help="a study with people: each participant's link to hand out (id and secret code)",
                       description="Print (or export as CSV: participant,link,code) each participant's link to a "
                       "study with people. A link carries the participant's secret code: `befair serve --study` "
                       "opens a participant's sessions only with it. Hand each participant their own link, and "
                       "keep the list to yourself.")
    k.add_argument("study", metavar="SPEC|NAME", help="the study's spec (TOML; recorded on first use) or its name")
    k.add_argument("--base-url", default=DEFAULT_BASE_URL, metavar="URL",
                   help=f"the address participants reach `befair serve` at (default {DEFAULT_BASE_URL})")
    k.add_argument("--csv", type=Path, default=None, metavar="FILE", help="write participant,link,code to FILE")
    add_db_arg(k)
    k.set_defaults(func=cmd_links)


def cmd_links(args: argparse.Namespace) -> int:
    from engine.study import links

    if not args.base_url.startswith(("http://", "https://")):
        raise UsageError(f"--base-url must start with http:// or https://, not {args.base_url!r}")
    store, spec = _study(args)
    try:
        made = links.participant_links(store, spec, args.base_url)
        tabs = _tabs_opened(store, spec.name)
    finally:
        store.close()
    if args.csv is not None:
        _write_csv(args.csv, made)
        print(f"study {spec.name}: {len(made)} participant links written to {args.csv}", file=sys.stderr)
        return 0
    print(f"study {spec.name}: {len(made)} participant links. Hand each participant their own; its code is their "
          "key to their sessions (keep this list to yourself).")
    width = max((len(m.participant) for m in made), default=0)
    for m in made:
        print(f"  {m.participant:<{width}}  {m.link}{tabs.get(m.participant, '')}")
    if args.base_url == DEFAULT_BASE_URL:
        print("(addresses on this machine only; give --base-url with the address participants reach, "
              "e.g. --base-url http://HOST:8000)", file=sys.stderr)
    return 0


def _study(args: argparse.Namespace) -> tuple[Any, Any]:
    """The store and the study's spec: a spec file is recorded first (as `befair serve --study` does)."""
    from engine.session.runner_control import open_store
    from engine.session.store import SessionStore
    from engine.study import grid, people
    from engine.study.spec import load_spec

    db = db_from_args(args)
    from_spec = Path(args.study).suffix == ".toml" or Path(args.study).is_file()
    store = SessionStore(db) if from_spec else open_store(db)
    try:
        if from_spec:
            spec = load_spec(args.study)
            people.people_of(spec)
            grid.ensure_study(store, spec, source=str(Path(args.study).resolve()))
        else:
            spec = grid.stored_spec(store, args.study)
            people.people_of(spec)
    except BaseException:
        store.close()
        raise
    return store, spec


def _tabs_opened(store: Any, study: str) -> dict[str, str]:
    """Per participant: how many tabs became their live one, and how many of those took over an open
    one (engine.session.participants: `tab_opened` events); a link forwarded to someone shows here."""
    from engine.session import participants as log

    counts: dict[str, list[int]] = {}
    for event in log.events(store, study, kinds=(log.TAB_OPENED,)):
        seen = counts.setdefault(str(event.participant_id), [0, 0])
        seen[0] += 1
        seen[1] += bool(event.payload.get("previous_online"))
    return {p: f"   ({n} tab{'s' if n != 1 else ''} opened, {t} took over an open one)" for p, (n, t) in counts.items()}


def _write_csv(path: Path, made: list[Any]) -> None:
    try:
        with path.open("w", newline="", encoding="utf-8") as out:
            writer = csv.writer(out)
            writer.writerow(["participant", "link", "code"])
            for m in made:
                writer.writerow([m.participant, m.link, m.code])
    except OSError as exc:
        raise UsageError(f"cannot write {path}: {exc.strerror or exc}") from None
