"""Per-group evaluation: the metric calls computed on one skin-tone group.

A metric (roc_auc_score, a user function that computes one, ...) is per-group when its inputs are a
group's rows or are selected by a skin-tone mask, when it runs in a loop / comprehension /
groupby-apply over skin-tone groups, or when it is fairlearn's MetricFrame.
"""
from __future__ import annotations

import ast
from collections.abc import Sequence

from engine.evaluation.audit.group_rows import Analysis
from engine.evaluation.audit.syntax import name_of
from engine.evaluation.audit.vocabulary import METRIC_FUNCS


def group_apply_of(call: ast.Call, a: Analysis) -> ast.Call | None:
    """The groupby call of df.groupby(<skin tone>).apply / agg / transform(...) (also with [cols])."""
    if name_of(call.func) not in ("apply", "agg", "aggregate", "transform") or not isinstance(call.func, ast.Attribute):
        return None
    owner = call.func.value
    if isinstance(owner, ast.Subscript):
        owner = owner.value
    if isinstance(owner, ast.Call) and name_of(owner.func) == "groupby" and a.t(owner):
        return owner
    return None


class GroupLoops(ast.NodeVisitor):
    """A visitor that knows whether it is inside a loop / comprehension over skin-tone groups
    (and in which function)."""

    def __init__(self, a: Analysis):
        self.a = a
        self.group_loops = 0
        self.fn_stack: list[str] = []

    def _function_body(self, node: ast.AST) -> None:
        self.generic_visit(node)

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        self.fn_stack.append(node.name)
        saved, self.group_loops = self.group_loops, 0
        self._function_body(node)
        self.group_loops = saved
        self.fn_stack.pop()

    visit_AsyncFunctionDef = visit_FunctionDef  # type: ignore[assignment]

    def visit_For(self, node: ast.For) -> None:
        self.visit(node.iter)
        over = self.a.over_groups(node.iter)
        self.group_loops += over
        for stmt in node.body + node.orelse:
            self.visit(stmt)
        self.group_loops -= over

    visit_AsyncFor = visit_For  # type: ignore[assignment]

    def _comp(self, node: ast.ListComp | ast.SetComp | ast.DictComp | ast.GeneratorExp) -> None:
        over = any(self.a.over_groups(g.iter) for g in node.generators)
        for g in node.generators:
            self.visit(g.iter)
        self.group_loops += over
        for g in node.generators:
            for cond in g.ifs:
                self.visit(cond)
        for name in ("elt", "key", "value"):
            v = getattr(node, name, None)
            if v is not None:
                self.visit(v)
        self.group_loops -= over

    visit_ListComp = _comp
    visit_SetComp = _comp
    visit_DictComp = _comp
    visit_GeneratorExp = _comp

    def visit_call_parts(self, node: ast.Call, group_apply: bool) -> None:
        """Visit a call's function and arguments, counting the arguments as inside a per-group
        apply when `group_apply` says the call is one (groupby(...).apply(f), a map over groups)."""
        self.visit(node.func)
        self.group_loops += group_apply
        for arg in node.args:
            self.visit(arg)
        for k in node.keywords:
            self.visit(k.value)
        self.group_loops -= group_apply


class PerGroup(GroupLoops):
    """Which metric calls are computed on one skin-tone group (and which user functions do so)."""

    def __init__(self, a: Analysis, pg_funcs: set[str]):
        super().__init__(a)
        self.pg_funcs = pg_funcs
        self.calls: set[int] = set()
        self.funcs_with: set[str] = set()

    def _group_input(self, args: Sequence[ast.AST]) -> bool:
        for arg in args:
            for sub in ast.walk(arg):
                if isinstance(sub, ast.Subscript):
                    mask = self.a.mask_of(sub)
                    if mask is not None and self.a.group_mask(mask):
                        return True
                if isinstance(sub, ast.Name) and self.a.key_at(sub) in self.a.S:
                    return True
        return False

    def visit_Call(self, node: ast.Call) -> None:
        fname = name_of(node.func)
        is_metric = fname in METRIC_FUNCS or fname in self.a.metric_funcs
        group_apply = group_apply_of(node, self.a) is not None
        if group_apply and (any(isinstance(s, ast.Call) and name_of(s.func) in METRIC_FUNCS | self.a.metric_funcs
                                for arg in node.args for s in ast.walk(arg))
                            or any(isinstance(arg, ast.Name) and arg.id in self.a.metric_funcs for arg in node.args)):
            self._mark(node)  # df.groupby("skin_tone").apply(lambda d: roc_auc_score(d.y, d.p))
        if fname == "MetricFrame" or fname in self.pg_funcs:
            self._mark(node)
        elif is_metric and (self.group_loops or self._group_input(list(node.args) + [k.value for k in node.keywords])):
            self._mark(node)
        self.visit_call_parts(node, group_apply)

    def _mark(self, node: ast.Call) -> None:
        self.calls.add(id(node))
        if self.fn_stack:
            self.funcs_with.add(self.fn_stack[-1])


def per_group_calls(analysis: Analysis) -> tuple[set[int], set[str]]:
    """The ids of the per-group metric calls, and the user functions that compute a per-group
    metric (a user function that computes one makes its callers per-group too)."""
    pg_funcs: set[str] = set()
    for _ in range(6):
        pg = PerGroup(analysis, set(pg_funcs))
        pg.visit(analysis.tree)
        if pg.funcs_with <= pg_funcs:
            break
        pg_funcs |= pg.funcs_with
    return pg.calls, pg_funcs
