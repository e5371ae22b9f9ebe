"""The code's shape: no import cycles among the product's modules, and no SQL outside the store.

The import graph is built with `ast` from every import statement (top level, inside functions,
under `if TYPE_CHECKING:`), since import-linter sees none of the in-function ones that closed the
old cycles. The SQL scan looks for `.execute(` / `.executescript(` / `.executemany(` calls, the
store's database object used directly (`store.db.conn`, `.db.query`, `.db.table`), and for
string literals that begin with an SQL statement's keyword.
"""
from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("engine", "befair_tui")
SQL_SCANNED = ("engine", "befair_tui", "baselines")

# Known cycles, each the sorted set of modules of one strongly connected component. This list may
# only shrink: a new cycle, or a known one that grows, fails the test. (The last one, llm <-> llm_check,
# went when the LLM client was split from the coder.)
KNOWN_CYCLES: list[frozenset[str]] = []

# Where SQL may be written: the store package, and the schema and its migrations.
SQL_HOMES = ("engine/session/store/", "engine/session/schema.py")

_SQL_CALL = re.compile(r"\.(execute|executescript|executemany)\(")
# The store's database object used directly (sqlite-utils' query/table/insert write SQL too).
_STORE_INSIDES = re.compile(r"\.db\.(conn|query|table|execute)\b|\.db\[|\._write\(\)")
# A string literal that is an SQL statement: a keyword and the shape that follows it (not the
# English "Update the plan" or "Insert guidance into the session").
_SQL_STATEMENT = re.compile(
    r"^\s*(select\s+(\d+\s*$|.*?\bfrom\b)|insert\s+(or\s+\w+\s+)?into\s+\[?\w+\]?\s*\(|replace\s+into\b"
    r"|update\s+\[?\w+\]?\s+set\b|delete\s+from\b|(create|drop)\s+(temp\s+)?(table|view|index|unique\s+index|trigger)\b"
    r"|alter\s+table\b|pragma\s+\w+|with\s+\w+\s+as\s*\(|(begin(\s+immediate|\s+transaction)?|commit|rollback)\s*$)",
    re.IGNORECASE | re.DOTALL)


def _modules(packages: tuple[str, ...]) -> dict[str, Path]:
    out: dict[str, Path] = {}
    for package in packages:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            out[".".join(parts)] = path
    return out


def _imported(module: str, path: Path, known: dict[str, Path]) -> Iterator[str]:
    """Every module of `known` that `module` imports, wherever the import statement is."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            # `from pkg import module` imports the submodule; `from module import name` the module
            names = [f"{base}.{alias.name}" for alias in node.names] + [base]
        else:
            continue
        for name in names:
            while name and name not in known:
                name = name.rpartition(".")[0]
            if name and name != module:
                yield name


def import_graph(packages: tuple[str, ...] = PACKAGES) -> dict[str, set[str]]:
    known = _modules(packages)
    return {module: set(_imported(module, path, known)) for module, path in known.items()}


def cycles(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[frozenset[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(frozenset(component))
    return found


def cycle_path(graph: dict[str, set[str]], component: frozenset[str]) -> list[str]:
    """One closed path through a component, to print: a -> b -> ... -> a."""
    start = min(component)
    previous: dict[str, str] = {}
    frontier = [start]
    while frontier:
        node = frontier.pop(0)
        for child in sorted(graph[node] & component):
            if child == start:
                path = [node]
                while path[-1] != start:
                    path.append(previous[path[-1]])
                return [*reversed(path), start]
            if child not in previous:
                previous[child] = node
                frontier.append(child)
    return sorted(component)


def sql_findings(source: str, where: str = "<string>") -> list[str]:
    """`file:line: what` for each SQL call and each string literal that is an SQL statement."""
    out = []
    for number, line in enumerate(source.splitlines(), 1):
        if _SQL_CALL.search(line) or _STORE_INSIDES.search(line):
            out.append(f"{where}:{number}: {line.strip()}")
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.JoinedStr):
            text = "".join(v.value for v in node.values if isinstance(v, ast.Constant) and isinstance(v.value, str))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            text = node.value
        else:
            continue
        if _SQL_STATEMENT.match(text):
            out.append(f"{where}:{node.lineno}: SQL literal {text.strip()[:60]!r}")
    return sorted(set(out))


def _in_sql_home(relative: str) -> bool:
    return any(relative.startswith(home) if home.endswith("/") else relative == home for home in SQL_HOMES)


# --------------------------------------------------------------------------- the tests


def test_no_import_cycles_beyond_the_known_ones() -> None:
    graph = import_graph()
    found = cycles(graph)
    new = [c for c in found if not any(c <= known for known in KNOWN_CYCLES)]
    assert not new, "import cycles:\n" + "\n".join(" -> ".join(cycle_path(graph, c)) for c in new)


def test_known_cycles_are_still_cycles() -> None:
    """The allow-list only shrinks: a known cycle that is gone is taken off it."""
    found = cycles(import_graph())
    gone = [sorted(k) for k in KNOWN_CYCLES if not any(c & k for c in found)]
    assert not gone, f"no longer cycles, remove them from KNOWN_CYCLES: {gone}"


def test_the_graph_sees_imports_in_functions_and_type_checking_blocks(tmp_path: Path) -> None:
    """The cycle finder can fail: a cycle closed only by an in-function import and one closed
    under TYPE_CHECKING, through a relative `from . import module`, are both found."""
    sample = {"a": "from .b import thing\n",
              "b": "def f():\n    from pkg import c\n",
              "c": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from . import a\n",
              "d": "import pkg.a\n"}
    known = {f"pkg.{name}": tmp_path / f"{name}.py" for name in sample}
    for name, text in sample.items():
        (tmp_path / f"{name}.py").write_text(text)
    graph = {module: set(_imported(module, path, known)) for module, path in known.items()}
    assert graph["pkg.b"] == {"pkg.c"} and graph["pkg.c"] == {"pkg.a"}
    assert cycles(graph) == [frozenset({"pkg.a", "pkg.b", "pkg.c"})]
    assert cycle_path(graph, cycles(graph)[0]) == ["pkg.a", "pkg.b", "pkg.c", "pkg.a"]


def test_no_sql_outside_the_store() -> None:
    findings = []
    for package in SQL_SCANNED:
        for path in sorted((ROOT / package).rglob("*.py")):
            relative = path.relative_to(ROOT).as_posix()
            if not _in_sql_home(relative):
                findings += sql_findings(path.read_text(), relative)
    assert not findings, "SQL outside engine/session/store/ and the schema:\n" + "\n".join(findings)


def test_the_sql_scanner_finds_sql() -> None:
    sample = '''
def f(store, name):
    store.db.conn.execute("select 1")
    rows = store.query(f"SELECT spec FROM studies WHERE name = {name!r}")
    store.db.table("sessions").insert({"id": name})
    sql = """
        update sessions set pid = ? where id = ?"""
    return "Update the plan", "select a node", "delete it?", rows, sql
'''
    found = sql_findings(sample)
    assert [f.split(":")[1] for f in found] == ["3", "3", "4", "5", "6"], found
    assert sql_findings('label = "Insert guidance into the running session"\n') == []
    assert _in_sql_home("engine/session/store/writer.py") and _in_sql_home("engine/session/schema.py")
    assert not _in_sql_home("engine/session/sealed.py")
