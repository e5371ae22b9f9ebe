"""Model choice on the worst group (the `pareto_selection` flag).

The model / epoch / configuration is chosen on the worst group: max / argmax / sort over, or an
`if ... > best` on, a worst-group value (min over per-group metrics, or a name that says worst /
minimax / pareto), or a Pareto-front call. Computing or printing the worst-group AUC alone is
monitoring, not selection. (Which node a session keeps is engine/session/selection.py's job.)
"""
from __future__ import annotations

import ast
from collections.abc import Iterator

from engine.evaluation.audit.group_rows import Analysis
from engine.evaluation.audit.syntax import name_of, number_value, str_value
from engine.evaluation.audit.vocabulary import LOGGERS, MIN_FUNCS, SELECT_FUNCS, identifier_words, worstish_identifier


class ModelChoice:
    """Pareto / worst-group selection: the names and keys that hold per-group metrics (P) and
    worst-group values (W), and the places where a model / epoch / configuration is chosen on W."""

    def __init__(self, a: Analysis, pg_calls: set[int], pg_funcs: set[str]):
        self.a = a
        self.pg_calls = pg_calls
        self.pg_funcs = pg_funcs
        self.P: set[tuple[int, str]] = set()   # names holding per-group metrics
        self.P_keys: set[str] = set()
        self.W: set[tuple[int, str]] = set()   # names holding a worst-group value
        self.W_keys: set[str] = set()
        self._fixpoint()

    def per_group(self, e: ast.AST) -> bool:
        for sub in ast.walk(e):
            if isinstance(sub, ast.Call) and (id(sub) in self.pg_calls or name_of(sub.func) in self.pg_funcs):
                return True
            if isinstance(sub, ast.Name) and (self.a.key_at(sub) in self.P or self._pg_name(sub.id)):
                return True
            if isinstance(sub, ast.Subscript) and (k := str_value(sub.slice)) is not None and (
                    k in self.P_keys or self._pg_name(k)):
                return True
            if isinstance(sub, ast.Attribute) and sub.attr in ("by_group",):
                return True
        return False

    @staticmethod
    def _pg_name(identifier: str) -> bool:
        words = identifier_words(identifier)
        return bool(words & {"group", "groups", "subgroup", "tone", "tones", "skin", "fst", "fitz", "per"}) and \
            bool(words & {"auc", "aucs", "auroc", "aurocs", "score", "scores", "metric", "metrics", "acc"})

    def worst(self, e: ast.AST | None, depth: int = 0) -> bool:
        """A worst-group value: min over per-group metrics, or a name / key that says worst."""
        if e is None or depth > 20:
            return False
        if isinstance(e, ast.Call):
            fname = name_of(e.func)
            if fname in MIN_FUNCS:
                target = list(e.args) or ([e.func.value] if isinstance(e.func, ast.Attribute) else [])
                if any(self.per_group(t) for t in target):
                    return True
            if fname == "group_min" or worstish_identifier(fname):
                return True
            if fname in SELECT_FUNCS or fname in MIN_FUNCS:
                return False
            parts = list(e.args) + [k.value for k in e.keywords]
            if isinstance(e.func, ast.Attribute):
                parts.append(e.func.value)
            return any(self.worst(p, depth + 1) for p in parts)
        if isinstance(e, ast.Name):
            return self.a.key_at(e) in self.W or worstish_identifier(e.id)
        if isinstance(e, ast.Subscript):
            k = str_value(e.slice)
            if k is not None:
                return k in self.W_keys or worstish_identifier(k)
            return self.worst(e.value, depth + 1)
        if isinstance(e, ast.Attribute):
            return worstish_identifier(e.attr) or self.worst(e.value, depth + 1)
        if isinstance(e, ast.Constant):
            return isinstance(e.value, str) and e.value.isidentifier() and worstish_identifier(e.value)
        if isinstance(e, ast.BinOp):
            # max(aucs) - min(aucs) is a gap, not a worst-group value
            if isinstance(e.op, ast.Sub) and isinstance(e.left, ast.Call) and \
                    name_of(e.left.func) in ("max", "amax", "nanmax"):
                return False
            return self.worst(e.left, depth + 1) or self.worst(e.right, depth + 1)
        if isinstance(e, ast.UnaryOp):
            return self.worst(e.operand, depth + 1)
        if isinstance(e, ast.IfExp):
            return self.worst(e.body, depth + 1) or self.worst(e.orelse, depth + 1)
        if isinstance(e, (ast.Tuple, ast.List)):
            return any(self.worst(x, depth + 1) for x in e.elts)
        if isinstance(e, ast.Lambda):
            return self.worst(e.body, depth + 1)
        if isinstance(e, (ast.ListComp, ast.GeneratorExp)):
            return self.worst(e.elt, depth + 1)
        return False

    def _fixpoint(self) -> None:
        for _ in range(20):
            before = (len(self.P), len(self.P_keys), len(self.W), len(self.W_keys))
            for kind, target, value, scope in self.a.bindings:
                if value is None or kind in ("param", "return", "attr"):
                    continue
                if kind == "item":
                    k = str_value(target.slice)
                    base = target.value
                    if k is not None:
                        if self.per_group(value):
                            self.P_keys.add(k)
                        if self.worst(value):
                            self.W_keys.add(k)
                    elif isinstance(base, ast.Name):
                        if self.per_group(value):
                            self.P.add(self.a.key_at(base))
                        if self.worst(value):
                            self.W.add(self.a.key_at(base))
                    continue
                parts = self.a.pairs(target, value) if kind == "unpack" else [(target, value)]
                for t_, v in parts:
                    keys = [self.a.key(n.id, scope) for n in ast.walk(t_) if isinstance(n, ast.Name)]
                    if self.per_group(v):
                        self.P.update(keys)
                    if kind != "iter" and self.worst(v):
                        self.W.update(keys)
            for call in self.a.calls:
                # max(scored, key=lambda s: min(s[1].values())): s ranges over a per-group sequence
                if isinstance(call, ast.Call) and call.args and self.per_group(call.args[0]):
                    for kw in call.keywords:
                        if kw.arg == "key" and isinstance(kw.value, ast.Lambda):
                            self.P.update((id(kw.value), arg.arg) for arg in kw.value.args.args)
            for d in self.a.dicts:
                if isinstance(d, ast.Dict):
                    for dk, v in zip(d.keys, d.values, strict=False):
                        if (key := str_value(dk)) is not None and v is not None:
                            if self.per_group(v):
                                self.P_keys.add(key)
                            if self.worst(v):
                                self.W_keys.add(key)
            if before == (len(self.P), len(self.P_keys), len(self.W), len(self.W_keys)):
                break

    def triggers(self) -> Iterator[ast.AST]:
        for node in self.a.nodes:
            if isinstance(node, ast.Call):
                fname = name_of(node.func)
                if "pareto" in identifier_words(fname):
                    yield node
                    continue
                if fname in SELECT_FUNCS:
                    if fname in ("sorted", "sort"):  # sorting for display is not selection: only its key counts
                        parts = [k.value for k in node.keywords if k.arg == "key"]
                    else:
                        parts = list(node.args) + [k.value for k in node.keywords]
                    if isinstance(node.func, ast.Attribute) and \
                            fname in ("sort_values", "idxmax", "nlargest", "argmax", "argsort"):
                        parts.append(node.func.value)
                    if any(self.worst(p) for p in parts):
                        yield node
            elif isinstance(node, (ast.If, ast.While)):
                test = node.test
                for cmp_ in ast.walk(test):
                    if isinstance(cmp_, ast.Compare) and \
                            any(isinstance(o, (ast.Gt, ast.GtE, ast.Lt, ast.LtE)) for o in cmp_.ops):
                        sides = [cmp_.left] + list(cmp_.comparators)
                        numeric = [s for s in sides if number_value(s) is not None]
                        if numeric:  # a threshold (worst < 0.5), not a comparison with the best so far
                            continue
                        if any(self.worst(s_) for s_ in sides) and self._acts(node.body):
                            yield node
                            break

    @staticmethod
    def _acts(body: list[ast.stmt]) -> bool:
        for stmt in body:
            for sub in ast.walk(stmt):
                if isinstance(sub, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
                    return True
                if isinstance(sub, ast.Call) and name_of(sub.func) not in LOGGERS:
                    return True
        return False
