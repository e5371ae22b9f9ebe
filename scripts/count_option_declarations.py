"""How many places declare each `befair run` option (issue 35): a flag, a settings field, a study
spec key, an environment variable.

    PYTHONPATH=TREE python scripts/count_option_declarations.py TREE [--json]

TREE is a source tree (a worktree, or `git archive COMMIT | tar -x -C DIR`). The options are
those of TREE's own `befair run` parser (its argparse actions); for each, the script lists the
files of TREE (engine/, befair_tui/; never tests or docs) that spell it out:

- flag:  the flag as a string, "--steps" (never a docstring), in a file that is not another
         command's (an add_argument, an argv being built, a table, a message naming it);
         OTHER_COMMANDS lists the files left out,
         which declare flags of other commands (`befair prompts --level`, `befair data --seed`);
- field: a dataclass field or an option declaration of its stored name(s): `steps: int = ...` in
         a settings class (SessionConfig, SetupChoices, LlmConfig, StudySpec, CoderSpec; the files
         in FIELD_FILES), or a declaring call, `Option("steps", ...)` (DECLARING), anywhere;
- spec:  the stored name as a string in the study spec's parser (engine/study/spec.py);
- env:   the environment variable the option is read from, as a string, anywhere.

The count is the number of files that declare an option (one `Option(...)` that gives its flag and
its name is one file, one declaration); each file's kinds are listed. The same rules run on both
trees, so the counts compare like with like.
"""
from __future__ import annotations

import argparse
import ast
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


class Facts:
    """What one source file spells: its string constants (not docstrings), the names of its class
    fields with a default, and the first argument of each declaration call (Option("steps", ...))."""

    def __init__(self, text: str) -> None:
        tree = ast.parse(text)
        docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                      if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                      and node.body and isinstance(node.body[0], ast.Expr)
                      and isinstance(node.body[0].value, ast.Constant)}
        self.strings = {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant)
                        and isinstance(n.value, str) and id(n) not in docstrings}
        self.fields = {item.target.id for node in ast.walk(tree) if isinstance(node, ast.ClassDef)
                       for item in node.body if isinstance(item, ast.AnnAssign) and item.value is not None
                       and isinstance(item.target, ast.Name)}
        self.declared = {n.args[0].value for n in ast.walk(tree) if isinstance(n, ast.Call) and n.args
                         and isinstance(n.args[0], ast.Constant) and _callee(n.func) in DECLARING}


DECLARING = {"Option", "CoderOption", "_llm"}   # the calls that declare an option (both trees)


def _callee(func: ast.expr) -> str:
    return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""


def sources(tree: Path) -> dict[str, Facts]:
    out = {}
    for top in ("engine", "befair_tui"):
        for path in sorted((tree / top).rglob("*.py")):
            out[str(path.relative_to(tree))] = Facts(path.read_text(encoding="utf-8"))
    return out


def places(flag: str, dest: str, files: dict[str, Facts]) -> dict[str, list[str]]:
    """file -> the kinds of declaration of this option in it."""
    names = STORED.get(dest, [dest])
    found: dict[str, list[str]] = {}
    for rel, facts in files.items():
        kinds = []
        if not OTHER_COMMANDS.search(rel) and flag in facts.strings:
            kinds.append("flag")
        if any(n in facts.declared for n in names) or (rel in FIELD_FILES and any(n in facts.fields for n in names)):
            kinds.append("field")
        if rel == SPEC_FILE and any(n in facts.strings for n in names):
            kinds.append("spec")
        if any(v in facts.strings for v in ENV.get(dest, [])):
            kinds.append("env")
        if kinds:
            found[rel] = kinds
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
        print(json.dumps(table, indent=1))
        return 0
    for flag, found in table.items():
        where = ", ".join(f"{f.removeprefix('engine/').removeprefix('befair_tui/')}({'+'.join(k)})"
                          for f, k in found.items())
        print(f"{flag:20} {len(found):2}  {where}")
    total = sum(len(v) for v in table.values())
    print(f"{len(table)} options, {total} files in all, {total / max(len(table), 1):.2f} per option; "
          f"declared in more than one file: {sum(len(v) > 1 for v in table.values())}; "
          f"in more than two: {sum(len(v) > 2 for v in table.values())}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
