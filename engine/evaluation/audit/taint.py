"""The skin-tone taint: which names, columns, attributes and return values derive from skin tone.

A flow-insensitive taint analysis with Python's scopes: through assignments, loop targets, dataframe
columns, object attributes, function parameters and return values, to a fixpoint.
"""
from __future__ import annotations

import ast

from engine.evaluation.audit.scopes import Scopes
from engine.evaluation.audit.syntax import keywords_of, name_of, str_value
from engine.evaluation.audit.vocabulary import (
    FRAME_METHODS, METRIC_FUNCS, NON_PROPAGATING, SPLIT_FUNCS, groupish_identifier, is_skin_key,
)


class Taint(Scopes):
    """Scopes plus the taint: T (names), T_cols (column keys), T_attrs (attributes), T_ret (functions
    whose return value is tainted)."""

    def __init__(self, tree: ast.Module, lines: list[str]):
        super().__init__(tree, lines)
        self.T: set[tuple[int, str]] = set()
        self.T_cols: set[str] = set()
        self.T_attrs: set[str] = set()
        self.T_ret: set[str] = set()
        self._taint_fixpoint()

    # -- taint: is this expression derived from skin tone?
    def t(self, e: ast.AST | None) -> bool:
        """The expression's value derives from skin tone."""
        if e is None:
            return False
        if isinstance(e, ast.Constant):
            return isinstance(e.value, str) and is_skin_key(e.value)
        if isinstance(e, ast.Name):
            return self.key_at(e) in self.T or groupish_identifier(e.id)
        if isinstance(e, ast.Attribute):
            if is_skin_key(e.attr) or e.attr in self.T_cols or e.attr in self.T_attrs or groupish_identifier(e.attr):
                return True
            return self.t(e.value)
        if isinstance(e, ast.Subscript):
            return self._t_subscript(e)
        if isinstance(e, ast.Call):
            return self._t_call(e)
        if isinstance(e, (ast.BinOp,)):
            return self.t(e.left) or self.t(e.right)
        if isinstance(e, ast.UnaryOp):
            return self.t(e.operand)
        if isinstance(e, ast.BoolOp):
            return any(self.t(v) for v in e.values)
        if isinstance(e, ast.Compare):
            return self.t(e.left) or any(self.t(c) for c in e.comparators)
        if isinstance(e, ast.IfExp):
            return self.t(e.body) or self.t(e.orelse)
        if isinstance(e, (ast.List, ast.Tuple, ast.Set)):
            return any(self.t(v) for v in e.elts)
        if isinstance(e, ast.Dict):
            return any(self.t(v) for v in e.values if v is not None)
        if isinstance(e, (ast.ListComp, ast.SetComp, ast.GeneratorExp)):
            return self.t(e.elt) or any(self.t(g.iter) for g in e.generators)
        if isinstance(e, ast.DictComp):
            return self.t(e.value) or self.t(e.key) or any(self.t(g.iter) for g in e.generators)
        if isinstance(e, ast.Lambda):
            return self.t(e.body)
        if isinstance(e, ast.Starred):
            return self.t(e.value)
        if isinstance(e, ast.NamedExpr):
            return self.t(e.value)
        return False

    def _column_key(self, key: str) -> bool:
        return is_skin_key(key) or key in self.T_cols or groupish_identifier(key)

    def _iteration_bound(self, name: ast.Name) -> bool:
        """A loop / comprehension / lambda variable (an element, not an index array)."""
        return self.key_at(name) in self.iter_keys

    def _t_subscript(self, e: ast.Subscript) -> bool:
        s = e.slice
        key = str_value(s)
        if key is not None:
            if self._column_key(key):
                return True
            inner = e.value
            return isinstance(inner, ast.Call) and name_of(inner.func) == "groupby" and self.t(inner)
        if isinstance(s, ast.Tuple):
            cols = [k for x in s.elts if (k := str_value(x)) is not None]
            if cols:  # df.loc[mask, "w"]: the column decides
                return any(self._column_key(c) for c in cols)
        if isinstance(s, ast.List) and all(str_value(x) is not None for x in s.elts):
            return any(self._column_key(k) for x in s.elts if (k := str_value(x)) is not None) or (
                isinstance(e.value, ast.Call) and name_of(e.value.func) == "groupby" and self.t(e.value))
        # a value of a tainted container, or an element looked up by a group value
        # (freq[t] for t in tones, w[(row.skin_tone, row.label)]); a mask or an index array
        # (y[tones == 5], X[train_idx]) selects rows and passes nothing on
        return self.t(e.value) or self._group_key(s)

    def _group_key(self, s: ast.AST) -> bool:
        if isinstance(s, ast.Tuple):
            return any(self._group_key(x) for x in s.elts)
        if isinstance(s, ast.Name):
            return self._iteration_bound(s) and self.t(s)
        if isinstance(s, (ast.Attribute, ast.Subscript)):
            return self.t(s)
        return False

    def _t_call(self, e: ast.Call) -> bool:
        fname = name_of(e.func)
        if fname == "groupby":  # its string arguments are column keys
            for arg in list(e.args) + [k.value for k in e.keywords if k.arg == "by"]:
                for sub in ast.walk(arg):
                    if (col := str_value(sub)) is not None and self._column_key(col):
                        return True
        if fname in NON_PROPAGATING or fname in METRIC_FUNCS or fname in self.classes:
            return False
        if fname in self.funcs and isinstance(e.func, (ast.Name, ast.Attribute)):
            return fname in self.T_ret
        receiver = e.func.value if isinstance(e.func, ast.Attribute) else None
        if receiver is not None and self.t(receiver):
            return True
        if fname in FRAME_METHODS:
            return False
        skip = {"stratify", "sample_weight", "weight", "groups", "random_state"}
        return any(self.t(a) for a in e.args) or any(self.t(k.value) for k in e.keywords if k.arg not in skip)

    def _taint_fixpoint(self) -> None:
        for _ in range(30):
            before = (len(self.T), len(self.T_cols), len(self.T_attrs), len(self.T_ret))
            for kind, target, value, scope in self.bindings:
                if kind == "assign":
                    if self.t(value):
                        self.T.add((id(scope), target.id))
                elif kind == "unpack":
                    self._taint_unpack(target, value, scope)
                elif kind == "iter":
                    self._taint_iter(target, value, scope)
                elif kind == "add":
                    if self.t(value):
                        self.T.add(self.key(target.id, scope))
                elif kind == "item":
                    self._taint_item(target, value)
                elif kind == "attr":
                    if self.t(value):
                        self.T_attrs.add(target.attr)
                elif kind == "return":
                    if self.t(value):
                        self.T_ret.add(target.name)
                elif kind == "param":
                    if groupish_identifier(target.arg):
                        self.T.add((id(scope), target.arg))
            self._taint_params()
            if before == (len(self.T), len(self.T_cols), len(self.T_attrs), len(self.T_ret)):
                break

    def _taint_names(self, target: ast.AST, scope: ast.AST) -> None:
        for n in ast.walk(target):
            if isinstance(n, ast.Name):
                self.T.add(self.key(n.id, scope))

    def _taint_unpack(self, target: ast.Tuple | ast.List, value: ast.AST, scope: ast.AST) -> None:
        for t_, v in self.pairs(target, value):
            if self.t(v):
                self._taint_names(t_, scope)

    def loader_items(self, it: ast.AST, depth: int = 0) -> list[bool] | None:
        """Which elements of a DataLoader's batches come from skin tone: the loader's Dataset is a
        user class whose __getitem__ returns a tuple; element i is tainted when its value is."""
        if depth > 4:
            return None
        if isinstance(it, ast.Name):
            for v in self.resolve(it):
                if v is not it:
                    got = self.loader_items(v, depth + 1)
                    if got is not None:
                        return got
            return None
        if isinstance(it, ast.Call) and name_of(it.func) == "DataLoader":
            ds = it.args[0] if it.args else keywords_of(it).get("dataset")
            return self.loader_items(ds, depth + 1) if ds is not None else None
        if isinstance(it, ast.Call) and name_of(it.func) in self.classes:
            cls = self.classes[name_of(it.func)]
            for item in cls.body:
                if isinstance(item, ast.FunctionDef) and item.name == "__getitem__":
                    for ret in ast.walk(item):
                        if isinstance(ret, ast.Return) and isinstance(ret.value, ast.Tuple):
                            return [self.t(e) for e in ret.value.elts]
        return None

    def _taint_iter(self, target: ast.AST, it: ast.AST, scope: ast.AST) -> None:
        if isinstance(target, (ast.Tuple, ast.List)):
            base, tgt = it, target
            if isinstance(it, ast.Call) and name_of(it.func) == "enumerate" and it.args and len(target.elts) == 2 and \
                    isinstance(target.elts[1], (ast.Tuple, ast.List)):
                base, tgt = it.args[0], target.elts[1]
            items = self.loader_items(base)
            if items is not None and len(items) == len(tgt.elts):
                for t_, flag in zip(tgt.elts, items, strict=False):
                    if flag:
                        self._taint_names(t_, scope)
                return
        if isinstance(it, ast.Call) and isinstance(target, (ast.Tuple, ast.List)):
            fname = name_of(it.func)
            if fname in SPLIT_FUNCS:
                return
            if fname == "enumerate" and it.args and len(target.elts) == 2:
                if self.t(it.args[0]):
                    self._taint_names(target.elts[1], scope)
                return
            if fname == "zip" and len(it.args) == len(target.elts):
                for t_, a in zip(target.elts, it.args, strict=False):
                    if self.t(a):
                        self._taint_names(t_, scope)
                return
            if fname == "groupby":
                if self.t(it) and target.elts:
                    self._taint_names(target.elts[0], scope)
                return
        if isinstance(it, ast.Call) and name_of(it.func) in SPLIT_FUNCS:
            return
        if self.t(it):
            self._taint_names(target, scope)

    def _taint_item(self, target: ast.Subscript, value: ast.AST) -> None:
        s = target.slice
        key = str_value(s)
        if key is not None:
            if self.t(value):
                self.T_cols.add(key)
            return
        if isinstance(s, ast.Tuple):
            cols = [k for x in s.elts if (k := str_value(x)) is not None]
            if cols:
                mask_tainted = any(self.t(x) for x in s.elts if str_value(x) is None)
                if self.t(value) or mask_tainted:
                    self.T_cols.update(cols)
                return
        base = target.value
        if isinstance(base, ast.Attribute) and base.attr in ("loc", "iloc", "at", "iat"):
            base = base.value
        if isinstance(base, ast.Name) and (self.t(value) or self.t(s)):
            self.T.add(self.key_at(base))

    def _taint_params(self) -> None:
        """A user function's parameter is tainted when a call site passes a tainted argument."""
        for node in self.calls:
            fname = name_of(node.func)
            targets: list[tuple[ast.FunctionDef | ast.AsyncFunctionDef, int]] = []
            for fn in self.funcs.get(fname, []):
                params = [a.arg for a in fn.args.posonlyargs + fn.args.args]
                offset = 1 if params and params[0] in ("self", "cls") and isinstance(node.func, ast.Attribute) else 0
                targets.append((fn, offset))
            cls = self.classes.get(fname)
            if cls is not None:
                for item in cls.body:
                    if isinstance(item, ast.FunctionDef) and item.name == "__init__":
                        targets.append((item, 1))
            for fn, offset in targets:
                params = [a.arg for a in fn.args.posonlyargs + fn.args.args]
                for i, a in enumerate(node.args):
                    j = i + offset
                    if j < len(params) and self.t(a):
                        self.T.add((id(fn), params[j]))
                for k in node.keywords:
                    if k.arg is not None and k.arg in params and self.t(k.value):
                        self.T.add((id(fn), k.arg))
