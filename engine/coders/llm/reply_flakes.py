"""The reply checks that pyflakes makes (engine.coders.llm.reply_rules), pyflakes run as a library:
code that does not parse or does not compile, and names that running code reads and nothing binds.

pyflakes reads the code without running or importing it. What it cannot know (whether a module is
installed here, which names a module has, which keywords a class takes) engine.coders.llm.reply_flaws
checks by importing the checked modules.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Any

from pyflakes import api, messages

# pyflakes' findings that Python's compiler refuses although the code parses: the file stops with a
# SyntaxError before any of it runs, wherever the statement is
NOT_COMPILED = (messages.ReturnOutsideFunction, messages.YieldOutsideFunction, messages.ContinueOutsideLoop,
                messages.BreakOutsideLoop, messages.DefaultExceptNotLast, messages.TwoStarredExpressions,
                messages.TooManyExpressionsInStarredAssignment, messages.DuplicateArgument,
                messages.ImportStarNotPermitted, messages.LateFutureImport, messages.FutureFeatureNotDefined)
# a name read where nothing binds it: a NameError (UndefinedName) or an UnboundLocalError (UndefinedLocal)
# once the code reading it runs. Not UndefinedExport (a script's __all__ is never read) nor ImportStarUsage
# (a star import may bind the name).
UNDEFINED = (messages.UndefinedName, messages.UndefinedLocal)


@dataclass(frozen=True)
class Flakes:
    """What pyflakes found in a piece of code."""
    syntax: str | None           # it does not parse: why, as "<what>, line <n>"
    found: tuple[Any, ...]       # pyflakes.messages.Message, in the order of the code's lines


class _Kept:
    """A pyflakes reporter (pyflakes.reporter.Reporter's three methods) that keeps what it is told."""

    def __init__(self) -> None:
        self.syntax: str | None = None
        self.found: list[Any] = []

    def unexpectedError(self, filename: str, msg: str) -> None:  # noqa: N802 - pyflakes' name
        self.syntax = msg

    def syntaxError(self, filename: str, msg: str, lineno: int | None, offset: int | None,  # noqa: N802
                    text: str | None) -> None:
        self.syntax = f"{msg}, line {lineno}"

    def flake(self, message: Any) -> None:
        self.found.append(message)


def check(code: str) -> Flakes:
    """pyflakes' findings in `code`."""
    kept = _Kept()
    api.check(code, "<pipeline>", kept)
    return Flakes(kept.syntax, tuple(kept.found))


def does_not_parse(reply_code: str) -> str | None:
    """The rule `syntax`, for the reply as written: why it does not parse, as a sentence, or None."""
    why = check(reply_code).syntax
    return None if why is None else f"the reply's code does not parse ({why} of its code)"


def does_not_compile(found: tuple[Any, ...], tree: ast.Module) -> str | None:
    """The rule `syntax`, for the pipeline: the first statement that parses and that Python's
    compiler refuses ('break' outside a loop, a repeated argument), as a sentence, or None."""
    for message in found:
        if isinstance(message, NOT_COMPILED):
            return (f"the reply's code does not compile ({message.message % message.message_args}, "
                    f"{_where(tree, message.lineno)})")
    return None


def undefined_names(found: tuple[Any, ...], tree: ast.Module, live: set[str]) -> str | None:
    """The rule `undefined-name`: the names that code which runs reads and nothing binds (pyflakes'
    UndefinedName), or else a name a function reads before it assigns it (UndefinedLocal), as a
    sentence. The bodies of the functions that nothing running reaches (outside `live`) do not count,
    nor do quoted annotations, which Python never evaluates."""
    dead, quoted = _dead_spans(tree, live), _quoted_annotations(tree)
    hits = sorted((m for m in found if isinstance(m, UNDEFINED) and (m.lineno, m.col) not in quoted
                   and not any(start <= (m.lineno, m.col) <= end for start, end in dead)),
                  key=lambda m: (m.lineno, m.col))
    names = list(dict.fromkeys(m.message_args[0] for m in hits if isinstance(m, messages.UndefinedName)))
    if names:
        shown = ", ".join(names[:4]) + (" …" if len(names) > 4 else "")
        return f"the reply uses {shown}, which it neither imports nor defines"
    for m in hits:
        name = m.message_args if isinstance(m.message_args, str) else m.message_args[0]
        return (f"the reply reads {name} {_where(tree, m.lineno)} before assigning it there: a name a function "
                f"assigns is that function's own throughout it, so reading it first raises UnboundLocalError "
                f"(assign it first, or give one of the two another name)")
    return None


def _where(tree: ast.Module, lineno: int) -> str:
    """Where line `lineno` is, as the reply names it: in features(), in class Stats, at module level."""
    for node in tree.body:
        if node.lineno <= lineno <= (node.end_lineno or node.lineno):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                return f"in {node.name}()"
            if isinstance(node, ast.ClassDef):
                return f"in class {node.name}"
    return "at module level"


def _dead_spans(tree: ast.Module, live: set[str]) -> list[tuple[tuple[int, int], tuple[int, int]]]:
    """(start, end) as (line, column) of what never runs: the bodies of the functions, methods and
    lambdas inside the module's functions and classes that nothing running reaches. A class's own
    body, a function's defaults and decorators run when the module does."""
    spans = []
    for top in tree.body:
        if not isinstance(top, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) or top.name in live:
            continue
        for fn in ast.walk(top):
            if isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
                first: ast.stmt | ast.expr = fn.body[0]
            elif isinstance(fn, ast.Lambda):
                first = fn.body
            else:
                continue
            spans.append(((first.lineno, first.col_offset), (fn.end_lineno or fn.lineno, fn.end_col_offset or 0)))
    return spans


def _quoted_annotations(tree: ast.Module) -> set[tuple[int, int]]:
    """(line, column) of each string inside an annotation (`-> "Model"`): pyflakes reads the names in
    it, where Python keeps it as a string."""
    notes = [n.annotation for n in ast.walk(tree) if isinstance(n, ast.arg | ast.AnnAssign) and n.annotation]
    notes += [n.returns for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) and n.returns]
    return {(c.lineno, c.col_offset) for note in notes for c in ast.walk(note)
            if isinstance(c, ast.Constant) and isinstance(c.value, str)}
