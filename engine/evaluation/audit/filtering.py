"""Filtering: training rows dropped on a fairness-relevant condition.

Non-neoplastic lesions dropped (malignant vs benign only), or the rows of a skin-tone group dropped
from the data (df = df[mask], .query, .drop). Dropping only unknown tone is preprocessing; selecting
a group's rows to evaluate it is not filtering; keeping all three diagnosis classes is not filtering.
"""
from __future__ import annotations

import ast

from engine.evaluation.audit.group_rows import Analysis
from engine.evaluation.audit.syntax import base_name, keywords_of, mask_atoms, name_of, strings_in, unwrap_chain
from engine.evaluation.audit.vocabulary import CONDITION_CALLS, NON_NEOPLASTIC, identifier_words

# the words of a name that holds the training data (train_df, training_set, df_tr, ...)
_TRAINING_DATA_WORDS = frozenset({"train", "training", "df", "data", "set", "frame", "dataset", "tr", "rows"})


def filters_rows(a: Analysis, target: str, value: ast.AST, in_group_loop: bool) -> bool:
    """`target = value` (or an in-place drop / query on `target`) drops training rows on a
    fairness-relevant condition."""
    sel = _row_selection(a, value)
    if sel is None:
        return False
    kind, mask = sel
    if mask is None:
        return False
    masks = a.resolve(mask) if isinstance(mask, ast.Name) else [mask]
    masks = [a.inline_constants(m) for m in masks if is_condition(m)]
    for m in masks:
        if (kind == "keep" and excludes_non_neoplastic(m)) or (kind == "drop" and selects_non_neoplastic(m)):
            return True
    base = base_name(unwrap_chain(value))
    # the frame itself is narrowed (df = df[m]) or the training data is taken as a part of it
    words = identifier_words(target)
    narrows = base == target or ("train" in words or "training" in words) and words <= _TRAINING_DATA_WORDS
    return narrows and not in_group_loop and any(a.group_mask(m) for m in masks)


def _row_selection(a: Analysis, value: ast.AST) -> tuple[str, ast.AST | None] | None:
    """(kind, mask) when value selects rows: keep (df[m], df.loc[m], query) or drop (df.drop)."""
    sel = unwrap_chain(value)
    if isinstance(sel, ast.Subscript):
        mask = a.mask_of(sel)
        if mask is None or (isinstance(mask, ast.Name) and a.resolve(mask)[0] is mask):
            return None  # a column, a slice, or an index array we cannot read
        return ("keep", mask)
    if isinstance(sel, ast.Call) and isinstance(sel.func, ast.Attribute):
        if sel.func.attr == "query" and sel.args:
            q = a.query_expr(sel.args[0])
            return ("keep", q) if q is not None else None
        if sel.func.attr == "drop":
            return _drop_selection(a, sel)
    return None


def _drop_selection(a: Analysis, drop: ast.Call) -> tuple[str, ast.AST | None] | None:
    """("drop", mask) of df.drop(df[mask].index) / df.drop(index=df.index[mask])."""
    kw = keywords_of(drop)
    target = drop.args[0] if drop.args else kw.get("index")
    if target is None:
        return None
    for sub in ast.walk(target):
        if isinstance(sub, ast.Subscript):
            mask = a.mask_of(sub)
            if mask is not None:
                return ("drop", mask)
    return None


def is_condition(node: ast.AST) -> bool:
    """A boolean row mask (a comparison, isin, notna, ~, &, |), not an index array from resampling."""
    if isinstance(node, (ast.Compare, ast.BoolOp)):
        return True
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.BitAnd, ast.BitOr)):
        return True
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.Invert, ast.Not)):
        return True
    if isinstance(node, ast.Call):
        fname = name_of(node.func)
        if fname in CONDITION_CALLS:
            return True
        if fname in ("to_numpy", "values", "astype") and isinstance(node.func, ast.Attribute):
            return is_condition(node.func.value)
    if isinstance(node, ast.Attribute) and node.attr == "values":
        return is_condition(node.value)
    return False


def _class_values(cond: ast.AST) -> tuple[set[str], bool]:
    """The diagnosis strings an atom compares with, and whether it is negated."""
    negated = False
    while isinstance(cond, ast.UnaryOp) and isinstance(cond.op, (ast.Invert, ast.Not)):
        negated = not negated
        cond = cond.operand
    values = {s.strip().lower() for s in strings_in(cond)}
    return values, negated


def excludes_non_neoplastic(mask: ast.AST) -> bool:
    """A keep-mask that drops non-neoplastic lesions (label != 'non-neoplastic', isin(benign, malignant))."""
    atoms = list(mask_atoms(mask))
    or_two = isinstance(mask, (ast.BoolOp, ast.BinOp)) and (
        isinstance(mask, ast.BoolOp) and isinstance(mask.op, ast.Or) or
        isinstance(mask, ast.BinOp) and isinstance(mask.op, ast.BitOr))
    if or_two:
        seen = set()
        for atom in atoms:
            vals, neg = _class_values(atom)
            if not neg and isinstance(atom, ast.Compare) and isinstance(atom.ops[0], ast.Eq):
                seen |= vals
        if {"benign", "malignant"} <= seen and NON_NEOPLASTIC not in seen:
            return True
    for atom in atoms:
        vals, neg = _class_values(atom)
        inner = atom
        while isinstance(inner, ast.UnaryOp):
            inner = inner.operand
        if isinstance(inner, ast.Compare) and len(inner.ops) == 1 and NON_NEOPLASTIC in vals:
            op = inner.ops[0]
            if isinstance(op, (ast.NotEq, ast.NotIn)) != neg:
                return True
        if isinstance(inner, ast.Call):
            fname = name_of(inner.func)
            if fname == "isin":
                if NON_NEOPLASTIC in vals and neg:
                    return True
                if not neg and {"benign", "malignant"} <= vals and NON_NEOPLASTIC not in vals:
                    return True
            if fname == "ne" and NON_NEOPLASTIC in vals and not neg:
                return True
            if fname in ("eq", "contains") and NON_NEOPLASTIC in vals and neg:
                return True
    return False


def selects_non_neoplastic(mask: ast.AST) -> bool:
    """A drop-mask that selects the non-neoplastic rows (df.drop(df[df.label == 'non-neoplastic'].index))."""
    for atom in mask_atoms(mask):
        vals, neg = _class_values(atom)
        inner = atom
        while isinstance(inner, ast.UnaryOp):
            inner = inner.operand
        if NON_NEOPLASTIC not in vals or neg:
            continue
        if isinstance(inner, ast.Compare) and len(inner.ops) == 1 and isinstance(inner.ops[0], (ast.Eq, ast.In)):
            return True
        if isinstance(inner, ast.Call) and name_of(inner.func) in ("isin", "eq", "contains"):
            return True
    return False
