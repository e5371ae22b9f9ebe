"""How many places declare each `befair run` option (issue 35): a flag, a settings field, a study
spec key, an environment variable.

    PYTHONPATH=TREE python scripts/count_option_declarations.py TREE [--json]

TREE is a source tree (a worktree, or `git archive COMMIT | tar -x -C DIR`). The options are
those of TREE's own `befair run` parser (its argparse actions); for each, the script lists the
files of TREE (engine/, befair_tui/; never tests or docs) that spell it out:

- flag:  the quoted flag, "--steps", in a file that is not another command's (an add_argument, an
         argv being built, a table, a message naming it); OTHER_COMMANDS lists the files left out,
         which declare flags of other commands (`befair prompts --level`, `befair data --seed`);
- field: a dataclass field or an option declaration of its stored name(s): `steps: int = ...` in
         a settings class (SessionConfig, SetupChoices, LlmConfig, StudySpec, CoderSpec; the files
         in FIELD_FILES), or `Option("steps"` / `CoderOption("steps"` anywhere;
- spec:  the quoted stored name in the study spec's parser (engine/study/spec.py);
- env:   the quoted environment variable the option is read from, anywhere.

A file counts once per kind; the total is the number of (file, kind) places. The same rules run
on both trees, so the counts compare like with like.
"""
from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

# the stored names of a flag's dest, where they differ from it (the same map for both trees)
STORED = {
    "memory_limit": ["memory_limit_mb"], "participant": ["participant_id", "participant"],
    "study": ["study_id"], "repeat": ["repeat_index"], "llm_timeout": ["timeout"], "llm_retries": ["max_retries"],
    "llm_seed": [], "budget": ["budget_usd"], "llm_call_budget": ["call_budget_s"],
    "synth_n_train": ["synth_n_train", "n_train"], "synth_n_test": ["synth_n_test", "n_test"],
    "synth_size": ["synth_size", "size"], "operating_point": ["operating_point"],
}
ENV = {
    "model": ["BEFAIR_LLM_MODEL"], "review_model": ["BEFAIR_LLM_REVIEW_MODEL"], "base_url": ["OPENAI_BASE_URL"],
    "api_key": ["OPENAI_API_KEY"], "budget": ["BEFAIR_LLM_BUDGET"], "llm_config": ["BEFAIR_LLM_CONFIG"],
    "db": ["BEFAIR_DB"],
}
FIELD_FILES = ("engine/agent/session_config.py", "befair_tui/settings.py", "engine/coders/llm/config.py",
               "engine/study/spec.py", "engine/agent/settings.py", "engine/options.py", "engine/coders/options.py")
SPEC_FILE = "engine/study/spec.py"
OTHER_COMMANDS = re.compile(r"^befair_tui/cli/(?!run\.py|console\.py)|^engine/study/(pool|worker)\.py$"
                            r"|^baselines/")


def run_options(tree: Path) -> list[tuple[str, str]]:
    """(flag, dest) of each option of TREE's `befair run` parser."""
    sys.path.insert(0, str(tree))
    from befair_tui.cli import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    run = sub.choices["run"]
    return [(a.option_strings[-1], a.dest) for a in run._actions if a.option_strings and a.dest != "help"]


def sources(tree: Path) -> dict[str, str]:
    out = {}
    for top in ("engine", "befair_tui"):
        for path in sorted((tree / top).rglob("*.py")):
            out[str(path.relative_to(tree))] = path.read_text(encoding="utf-8")
    return out


def places(flag: str, dest: str, files: dict[str, str]) -> list[tuple[str, str]]:
    names = STORED.get(dest, [dest])
    found: list[tuple[str, str]] = []
    for rel, text in files.items():
        if not OTHER_COMMANDS.search(rel) and re.search(rf"""["']{re.escape(flag)}["']""", text):
            found.append((rel, "flag"))
        declared = any(re.search(rf"""(?:Coder)?Option\(\s*["']{re.escape(n)}["']""", text) for n in names)
        if not declared and rel in FIELD_FILES:
            declared = any(re.search(rf"^\s+{re.escape(n)}\s*:\s*[^=\n]+=", text, re.M) for n in names)
        if declared:
            found.append((rel, "field"))
        if rel == SPEC_FILE and any(re.search(rf"""["']{re.escape(n)}["']""", text) for n in names):
            found.append((rel, "spec"))
        if any(re.search(rf"""["']{v}["']""", text) for v in ENV.get(dest, [])):
            found.append((rel, "env"))
    return found


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("tree", type=Path)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    tree = args.tree.resolve()
    files = sources(tree)
    table = {flag: places(flag, dest, files) for flag, dest in run_options(tree)}
    if args.json:
        print(json.dumps({k: [f"{f}:{kind}" for f, kind in v] for k, v in table.items()}, indent=1))
        return 0
    for flag, found in table.items():
        where = ", ".join(f"{Path(f).name}:{kind}" for f, kind in found)
        print(f"{flag:22} {len(found):2}  {where}")
    total = sum(len(v) for v in table.values())
    print(f"{len(table)} options, {total} places, {total / max(len(table), 1):.2f} per option; "
          f"options declared in more than one place: {sum(len(v) > 1 for v in table.values())}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
