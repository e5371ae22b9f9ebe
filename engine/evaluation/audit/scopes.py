"""Scopes and bindings: where each name of a pipeline is bound, and to what.

The first layer of the analysis (taint.py and group_rows.py build on it): Python's scopes (a method
does not see its class body), every binding as (kind, target, value, scope), the values a name is
assigned, and the names bound by loops, comprehensions and lambdas.
"""
from __future__ import annotations

import ast
import copy
from typing import Any

from engine.evaluation.audit.syntax import COMPREHENSIONS, SCOPES, name_of, str_value
from engine.evaluation.audit.vocabulary import MUTATORS


class Scopes:
    """The scopes, bindings and assigned values of one module's syntax tree."""

    def __init__(self, tree: ast.Module, lines: list[str]):
        self.tree = tree
        self.lines = lines
        self.parent: dict[int, ast.AST] = {}
        self.nodes: list[ast.AST] = list(ast.walk(tree))
        for node in self.nodes:
            for child in ast.iter_child_nodes(node):
                self.parent[id(child)] = node
        self.calls = [n for n in self.nodes if isinstance(n, ast.Call)]
        self.dicts = [n for n in self.nodes if isinstance(n, ast.Dict)]
        self.bound: dict[int, set[str]] = {}
        self.funcs: dict[str, list[ast.FunctionDef | ast.AsyncFunctionDef]] = {}
        self.classes: dict[str, ast.ClassDef] = {}
        # (kind, target, value, scope): the target's and value's node types depend on the kind (a Name
        # for "assign", a Subscript for "item", a FunctionDef for "return", an arg for "param", ...)
        self.bindings: list[tuple[str, Any, Any, ast.AST]] = []
        self.values: dict[tuple[int, str], list[ast.AST]] = {}
        self.iter_keys: set[tuple[int, str]] = set()
        self._clones: list[ast.AST] = []
        self._collect()

    # -- scopes
    def scope_of(self, node: ast.AST) -> ast.AST:
        p = self.parent.get(id(node))
        while p is not None and not isinstance(p, SCOPES):
            p = self.parent.get(id(p))
        return p if p is not None else self.tree

    def _enclosing(self, scope: ast.AST) -> ast.AST | None:
        if isinstance(scope, ast.Module):
            return None
        p = self.scope_of(scope)
        while isinstance(p, ast.ClassDef):  # methods do not see class-body names
            p = self.scope_of(p)
        return p

    def key(self, name: str, scope: ast.AST) -> tuple[int, str]:
        s: ast.AST | None = scope
        while s is not None:
            if name in self.bound.get(id(s), ()):
                return (id(s), name)
            s = self._enclosing(s)
        return (id(self.tree), name)

    def key_at(self, node: ast.Name) -> tuple[int, str]:
        return self.key(node.id, self.scope_of(node))

    # -- bindings
    def _bind_names(self, target: ast.AST, scope: ast.AST) -> None:
        for sub in ast.walk(target):
            if isinstance(sub, ast.Name):
                self.bound.setdefault(id(scope), set()).add(sub.id)

    def _collect(self) -> None:
        for node in self.nodes:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self.funcs.setdefault(node.name, []).append(node)
                scope: ast.AST = node
                args = node.args
                for a in args.posonlyargs + args.args + args.kwonlyargs + [args.vararg, args.kwarg]:
                    if a is not None:
                        self.bound.setdefault(id(scope), set()).add(a.arg)
                        self.bindings.append(("param", a, None, scope))
            elif isinstance(node, ast.Lambda):
                for a in node.args.args:
                    self.bound.setdefault(id(node), set()).add(a.arg)
                    self.iter_keys.add((id(node), a.arg))
            elif isinstance(node, ast.ClassDef):
                self.classes[node.name] = node
            elif isinstance(node, ast.Assign):
                scope = self.scope_of(node)
                for t in node.targets:
                    self._bind_target(t, node.value, scope)
            elif isinstance(node, (ast.AugAssign, ast.AnnAssign)) and node.value is not None:
                self._bind_target(node.target, node.value, self.scope_of(node))
            elif isinstance(node, ast.NamedExpr):
                self._bind_target(node.target, node.value, self.scope_of(node))
            elif isinstance(node, (ast.For, ast.AsyncFor)):
                scope = self.scope_of(node)
                self._bind_names(node.target, scope)
                self.bindings.append(("iter", node.target, node.iter, scope))
                self.iter_keys.update((id(scope), n.id) for n in ast.walk(node.target) if isinstance(n, ast.Name))
            elif isinstance(node, COMPREHENSIONS):
                for gen in node.generators:
                    self._bind_names(gen.target, node)
                    self.bindings.append(("iter", gen.target, gen.iter, node))
                    self.iter_keys.update((id(node), n.id) for n in ast.walk(gen.target) if isinstance(n, ast.Name))
            elif isinstance(node, (ast.With, ast.AsyncWith)):
                scope = self.scope_of(node)
                for item in node.items:
                    if item.optional_vars is not None:
                        self._bind_target(item.optional_vars, item.context_expr, scope)
            elif isinstance(node, ast.Return) and node.value is not None:
                fn = self.scope_of(node)
                if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    self.bindings.append(("return", fn, node.value, fn))
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                    node.func.attr in MUTATORS and isinstance(node.func.value, ast.Name):
                scope = self.scope_of(node)
                for arg in list(node.args) + [k.value for k in node.keywords]:
                    self.bindings.append(("add", node.func.value, arg, scope))

    def _bind_target(self, target: ast.AST, value: ast.AST, scope: ast.AST) -> None:
        if isinstance(target, ast.Name):
            self.bound.setdefault(id(scope), set()).add(target.id)
            self.bindings.append(("assign", target, value, scope))
            self.values.setdefault((id(scope), target.id), []).append(value)
        elif isinstance(target, (ast.Tuple, ast.List)):
            self._bind_names(target, scope)
            self.bindings.append(("unpack", target, value, scope))
        elif isinstance(target, ast.Starred):
            self._bind_target(target.value, value, scope)
        elif isinstance(target, ast.Subscript):
            self.bindings.append(("item", target, value, scope))
        elif isinstance(target, ast.Attribute):
            self.bindings.append(("attr", target, value, scope))

    # -- names resolved to their values
    def resolve(self, node: ast.AST) -> list[ast.AST]:
        """The values a name is assigned (the node itself when it is not a name or never assigned)."""
        if isinstance(node, ast.Name):
            vals = self.values.get(self.key_at(node))
            if vals:
                return vals
        return [node]

    @staticmethod
    def pairs(target: ast.Tuple | ast.List, value: ast.AST) -> list[tuple[ast.AST, ast.AST]]:
        """(target part, value part) of an unpacking: a, b = x, y pairs element-wise;
        X_tr, X_va, g_tr, g_va = train_test_split(X, g) pairs each output with its input."""
        elts = target.elts
        if isinstance(value, (ast.Tuple, ast.List)) and len(value.elts) == len(elts) and \
                not any(isinstance(v, ast.Starred) for v in value.elts):
            return list(zip(elts, value.elts, strict=False))
        if isinstance(value, ast.Call) and name_of(value.func) == "train_test_split":
            return [(t_, value.args[i // 2]) for i, t_ in enumerate(elts) if i // 2 < len(value.args)]
        return [(target, value)]

    def inline_constants(self, expr: ast.AST) -> ast.AST:
        """A copy of expr with names bound to one string constant replaced by it
        (NON_NEO = "non-neoplastic"; df[df.label != NON_NEO])."""
        analysis = self

        class _Inline(ast.NodeTransformer):
            def visit_Name(self, n: ast.Name) -> ast.AST:
                vals = analysis.values.get(analysis.key_at(n)) if id(n) in analysis.parent else None
                if vals and len(vals) == 1 and str_value(vals[0]) is not None:
                    return ast.copy_location(ast.Constant(value=str_value(vals[0])), n)
                return n

        if not any(isinstance(n, ast.Name) for n in ast.walk(expr)):
            return expr
        clone = copy.deepcopy(expr)
        self._clones.append(clone)  # keep it alive: its node ids are in self.parent
        for orig, new in zip(ast.walk(expr), ast.walk(clone), strict=False):
            if id(orig) in self.parent:  # scope lookups keep working on the copy
                self.parent[id(new)] = self.parent[id(orig)]
        inlined: ast.AST = _Inline().visit(clone)
        return inlined
