"""Small readers of Python syntax trees that the audit's passes share (names, constants, masks)."""
from __future__ import annotations

import ast
from collections.abc import Callable, Iterable, Iterator

from engine.evaluation.audit.vocabulary import LOSS_HINTS, identifier_words, is_skin_key

# the nodes that open a scope of names, and the comprehensions among them
SCOPES = (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ListComp, ast.SetComp,
          ast.DictComp, ast.GeneratorExp, ast.ClassDef)
COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)


def name_of(node: ast.AST | None) -> str:
    """The last dotted component of a call target / attribute / name ('' if none)."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Call):
        return name_of(node.func)
    return ""


def str_value(node: ast.AST | None) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def number_value(node: ast.AST | None) -> float | None:
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        v = number_value(node.operand)
        return None if v is None else -v
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
        return float(node.value)
    return None


def is_none(node: ast.AST | None) -> bool:
    return isinstance(node, ast.Constant) and (node.value is None or node.value in ("None", False))


def strings_in(node: ast.AST) -> Iterable[str]:
    for sub in ast.walk(node):
        if isinstance(sub, ast.Constant) and isinstance(sub.value, str):
            yield sub.value


def mentions_skin(node: ast.AST) -> bool:
    if any(is_skin_key(s) for s in strings_in(node)):
        return True
    return any(isinstance(sub, ast.Attribute) and is_skin_key(sub.attr) for sub in ast.walk(node))


def mask_atoms(cond: ast.AST) -> Iterator[ast.AST]:
    """The conjuncts / disjuncts of a mask (a & b | c, a and b)."""
    if isinstance(cond, ast.BoolOp):
        for v in cond.values:
            yield from mask_atoms(v)
    elif isinstance(cond, ast.BinOp) and isinstance(cond.op, (ast.BitAnd, ast.BitOr)):
        yield from mask_atoms(cond.left)
        yield from mask_atoms(cond.right)
    else:
        yield cond


def unwrap_chain(node: ast.AST) -> ast.AST:
    """df[mask].reset_index(drop=True).copy() -> df[mask]."""
    while isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in (
        "reset_index", "copy", "astype", "sort_values", "dropna"
    ):
        node = node.func.value
    return node


def base_name(node: ast.AST) -> str | None:
    """The frame a selection is taken from: df in df[...], df.loc[...], df.query(...)."""
    while True:
        if isinstance(node, ast.Name):
            return node.id
        if isinstance(node, ast.Attribute):
            node = node.value
        elif isinstance(node, ast.Subscript):
            node = node.value
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            node = node.func.value
        else:
            return None


def keywords_of(call: ast.Call) -> dict[str, ast.AST]:
    return {k.arg: k.value for k in call.keywords if k.arg}


def lossish(node: ast.AST, resolve: Callable[[ast.AST], list[ast.AST]] | None = None, depth: int = 0) -> bool:
    """An expression that is a training loss (a call to a loss / criterion, a name saying loss, or a
    name assigned one: per_sample = F.binary_cross_entropy_with_logits(..., reduction="none"))."""
    for sub in ast.walk(node):
        if isinstance(sub, ast.Call):
            low = name_of(sub.func).lower()
            if any(h in low for h in LOSS_HINTS) or low.startswith("binary_cross_entropy"):
                return True
        elif isinstance(sub, ast.Name):
            if {"loss", "losses", "criterion", "bce", "ce", "nll"} & identifier_words(sub.id):
                return True
            if resolve is not None and depth < 2:
                vals = resolve(sub)
                if vals and vals[0] is not sub and any(lossish(v, resolve, depth + 1) for v in vals):
                    return True
    return False
