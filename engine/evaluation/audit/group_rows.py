"""The rows of one skin-tone group: the masks that select them, and the names that hold them.

A mask that only separates unknown tone (-1, missing) from the rest is data hygiene, not a group. The
complete analysis (`Analysis`) is this layer on top of the taint and the scopes.
"""
from __future__ import annotations

import ast

from engine.evaluation.audit.syntax import (
    base_name, is_none, mask_atoms, name_of, number_value, str_value, unwrap_chain,
)
from engine.evaluation.audit.taint import Taint
from engine.evaluation.audit.vocabulary import METRIC_FUNCS, ROW_METHODS, SPLIT_FUNCS


class Analysis(Taint):
    """Scopes, bindings, the skin-tone taint, S (names holding a group's rows) and the user functions
    that compute a metric (directly or through other user functions)."""

    def __init__(self, tree: ast.Module, lines: list[str]):
        super().__init__(tree, lines)
        self.S: set[tuple[int, str]] = set()
        self._subset_fixpoint()
        self.metric_funcs = self._metric_functions()

    # -- masks that only separate unknown tone
    def only_unknown(self, cond: ast.AST, depth: int = 0) -> bool:
        """A skin-tone condition that only separates unknown tone (-1 / missing) from the rest:
        data hygiene (MEDFAIR's preprocessing does it), not a fairness filter."""
        skin_atoms = 0
        for atom in mask_atoms(cond):
            if isinstance(atom, ast.Name) and depth < 3:
                vals = self.resolve(atom)
                if vals and vals[0] is not atom:
                    if any(self.t(v) for v in vals):
                        skin_atoms += 1
                        if not all(self.only_unknown(v, depth + 1) for v in vals):
                            return False
                    continue
            if not self.t(atom):
                continue
            skin_atoms += 1
            if not self._unknown_check(atom):
                return False
        return skin_atoms > 0

    def _unknown_check(self, atom: ast.AST) -> bool:
        if isinstance(atom, ast.UnaryOp) and isinstance(atom.op, (ast.Invert, ast.Not)):
            inner = atom.operand
            if isinstance(inner, ast.Call) and name_of(inner.func) == "isin" and inner.args and \
                    isinstance(inner.args[0], (ast.List, ast.Tuple, ast.Set)) and inner.args[0].elts and \
                    all(self._is_unknown_value(x) or is_none(x) for x in inner.args[0].elts):
                return True
            return isinstance(inner, ast.Call) and name_of(inner.func) in ("isna", "isnull") or (
                isinstance(inner, ast.Compare) and len(inner.ops) == 1 and isinstance(inner.ops[0], ast.Eq)
                and self._is_unknown_value(inner.comparators[0]))
        if isinstance(atom, ast.Call):
            fname = name_of(atom.func)
            if fname in ("notna", "notnull"):
                return True
            if fname in ("ne",) and atom.args:
                return self._is_unknown_value(atom.args[0])
            if fname in ("gt", "ge") and atom.args:
                n = number_value(atom.args[0])
                return n is not None and ((fname == "gt" and n in (-1, 0)) or (fname == "ge" and n in (0, 1)))
            if fname == "isin" and atom.args:
                vals = self._literal_numbers(atom.args[0])
                return vals is not None and set(range(1, 7)) <= vals
            if fname == "between" and len(atom.args) >= 2:
                lo, hi = number_value(atom.args[0]), number_value(atom.args[1])
                return lo is not None and hi is not None and lo <= 1 and hi >= 6
            return False
        if isinstance(atom, ast.Compare) and len(atom.ops) == 1:
            op, left, right = atom.ops[0], atom.left, atom.comparators[0]
            if number_value(left) is not None or str_value(left) is not None:  # -1 != tone
                left, right = right, left
                op = {ast.Gt: ast.Lt(), ast.Lt: ast.Gt(), ast.GtE: ast.LtE(), ast.LtE: ast.GtE()}.get(type(op), op)
            n = number_value(right)
            if isinstance(op, ast.NotEq) and (self._is_unknown_value(right)):
                return True
            if n is not None and (isinstance(op, ast.Gt) and n in (-1, 0) or isinstance(op, ast.GtE) and n in (0, 1)):
                return True
            if isinstance(op, (ast.IsNot,)) and is_none(right):
                return True
        if isinstance(atom, ast.Compare) and len(atom.ops) == 2:  # 1 <= tone <= 6
            lo, hi = number_value(atom.left), number_value(atom.comparators[1])
            return lo is not None and hi is not None and lo <= 1 and hi >= 6
        return False

    @staticmethod
    def _is_unknown_value(node: ast.AST) -> bool:
        n = number_value(node)
        s = str_value(node)
        return n == -1 or (s is not None and s.strip().lower() in ("unknown", "", "-1", "nan", "none"))

    @staticmethod
    def _literal_numbers(node: ast.AST) -> set[int] | None:
        if isinstance(node, ast.Call) and name_of(node.func) == "range":
            nums = [number_value(a) for a in node.args]
            known = [n for n in nums if n is not None]
            if len(known) == len(nums) and nums:
                r = range(*[int(n) for n in known])
                return set(r)
        if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
            nums = [number_value(x) for x in node.elts]
            known = [n for n in nums if n is not None]
            if len(known) == len(nums):
                return {int(n) for n in known}
        return None

    # -- subsets: the rows of one skin-tone group
    def mask_of(self, sub: ast.Subscript) -> ast.AST | None:
        s: ast.expr | None = sub.slice
        if str_value(s) is not None or isinstance(s, ast.Slice):
            return None
        if isinstance(s, ast.Tuple):
            s = s.elts[0] if s.elts else None
            if s is None or isinstance(s, ast.Slice):
                return None
        if isinstance(s, ast.List) and all(str_value(x) is not None for x in s.elts):
            return None  # a column list
        return s

    def group_mask(self, mask: ast.AST | None) -> bool:
        return mask is not None and self.t(mask) and not self.only_unknown(mask)

    def sub(self, e: ast.AST | None, depth: int = 0) -> bool:
        if e is None or depth > 12:
            return False
        if isinstance(e, ast.Name):
            return self.key_at(e) in self.S
        if isinstance(e, ast.Subscript):
            mask = self.mask_of(e)
            if mask is not None and self.group_mask(mask):
                return True
            return self.sub(e.value, depth + 1)
        if isinstance(e, ast.Attribute):
            return self.sub(e.value, depth + 1)
        if isinstance(e, ast.Call):
            fname = name_of(e.func)
            receiver = e.func.value if isinstance(e.func, ast.Attribute) else None
            if fname in ROW_METHODS and receiver is not None:
                return self.sub(receiver, depth + 1)
            if fname == "get_group" and receiver is not None and self.t(receiver):
                return True
            if fname == "query" and e.args and receiver is not None:
                q = self.query_expr(e.args[0])
                return q is not None and self.group_mask(q)
            if fname in ("resample",) and e.args:
                return self.sub(e.args[0], depth + 1)
            if fname in ("where", "flatnonzero", "nonzero", "argwhere") and e.args:
                return self.group_mask(e.args[0])
            return False
        if isinstance(e, (ast.ListComp, ast.GeneratorExp, ast.SetComp)):
            return self.sub(e.elt, depth + 1)
        if isinstance(e, (ast.List, ast.Tuple)):
            return any(self.sub(x, depth + 1) for x in e.elts)
        return False

    def query_expr(self, node: ast.AST) -> ast.AST | None:
        """A df.query string parsed as a Python expression, its bare names turned into column keys
        (skin_tone != -1  ->  __query__["skin_tone"] != -1)."""
        text = str_value(node)
        if text is None:
            return None
        try:
            expr = ast.parse(text.replace("`", ""), mode="eval").body
        except SyntaxError:
            return None

        class _Columns(ast.NodeTransformer):
            def visit_Name(self, n: ast.Name) -> ast.AST:
                if n.id in ("True", "False", "None"):
                    return n
                return ast.Subscript(value=ast.Name(id="__query__", ctx=ast.Load()),
                                     slice=ast.Constant(value=n.id), ctx=ast.Load())

        columns: ast.AST | None = _Columns().visit(expr)
        return columns

    def _subset_fixpoint(self) -> None:
        for _ in range(20):
            before = len(self.S)
            for kind, target, value, scope in self.bindings:
                if kind == "assign":
                    if self.sub(value) and not self.is_filter_assign(target.id, value):
                        self.S.add((id(scope), target.id))
                elif kind == "iter":
                    it = value
                    if isinstance(it, ast.Call) and name_of(it.func) == "groupby" and self.t(it) and \
                            isinstance(target, (ast.Tuple, ast.List)) and len(target.elts) == 2:
                        for n in ast.walk(target.elts[1]):
                            if isinstance(n, ast.Name):
                                self.S.add(self.key(n.id, scope))
                    elif self.sub(it):
                        for n in ast.walk(target):
                            if isinstance(n, ast.Name):
                                self.S.add(self.key(n.id, scope))
                elif kind == "add":
                    if self.sub(value):
                        self.S.add(self.key(target.id, scope))
            if len(self.S) == before:
                break

    def over_groups(self, it: ast.AST) -> bool:
        """A loop's iterable yields skin-tone groups (their values, or their rows): not a CV split."""
        if isinstance(it, ast.Call) and name_of(it.func) in SPLIT_FUNCS:
            return False
        if isinstance(it, ast.Call) and name_of(it.func) in ("enumerate", "zip"):
            return any(self.over_groups(x) for x in it.args)
        return self.t(it) or self.sub(it)

    def is_filter_assign(self, target: str, value: ast.AST) -> bool:
        """df = df[mask]: the frame itself is narrowed (a filter), not a group's rows taken out."""
        sel = unwrap_chain(value)
        return base_name(sel) == target

    # -- functions that compute a metric (directly or through other user functions)
    def _metric_functions(self) -> set[str]:
        out: set[str] = set()
        for _ in range(10):
            before = len(out)
            for name, defs in self.funcs.items():
                for fn in defs:
                    for sub in ast.walk(fn):
                        called = name_of(sub.func) if isinstance(sub, ast.Call) else None
                        if called is not None and (called in METRIC_FUNCS or called in out) and called != name:
                            out.add(name)
                            break
            if len(out) == before:
                break
        return out
