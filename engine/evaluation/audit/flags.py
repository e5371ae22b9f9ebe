"""The flags the audit raises on a pipeline's code, each with its evidence; `audit_code`.

reads_skin_tone    a skin-tone column key ("skin_tone", "fitzpatrick_scale", ...) used as a string
                   constant (a subscript, attribute, groupby/column list, keyword, assignment, a
                   df.query string) or as an attribute (df.skin_tone); docstrings and print/log
                   messages do not count.
per_group_metric   a model metric computed on one skin-tone group (per_group.py).
reweighting        per-sample weights derived from skin tone (by group, or group x label) used in
                   training: sample_weight=, a loss's weight=, a loss multiplied by them, or handed
                   to the model by a Dataset. Class balancing (class_weight, pos_weight, weights
                   from label counts) is not a fairness intervention and is not flagged.
upsampling         rows of a skin-tone group drawn more than once: a WeightedRandomSampler (or
                   torch.multinomial) over skin-tone weights, resample / .sample(replace=True) of a
                   group's rows, an over-sampler fitted on skin-tone strata, repeats of a group's
                   rows in a concat / np.repeat / index.repeat. Upsampling a class (malignant) is
                   not flagged, nor is resampling validation rows (a bootstrap of a metric).
filtering          training rows dropped on a fairness-relevant condition (filtering.py).
pareto_selection   the model / epoch / configuration is chosen on the worst group (model_choice.py).

Each flag carries evidence "line N: <the source line that triggered it>".
"""
from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Any

from engine.evaluation.audit.filtering import filters_rows
from engine.evaluation.audit.group_rows import Analysis
from engine.evaluation.audit.model_choice import ModelChoice
from engine.evaluation.audit.per_group import GroupLoops, group_apply_of, per_group_calls
from engine.evaluation.audit.syntax import (
    base_name, is_none, keywords_of, lossish, mentions_skin, name_of, number_value, str_value,
)
from engine.evaluation.audit.vocabulary import (
    CONCAT_FUNCS, EVAL_WORDS, LOGGERS, LOSS_HINTS, METRIC_FUNCS, identifier_words, is_skin_key,
    weightish_identifier,
)


FLAGS = ("reads_skin_tone", "per_group_metric", "reweighting", "upsampling", "filtering", "pareto_selection")


@dataclass
class AuditResult:
    """The flags raised on one pipeline's code and their evidence, or a note when it was not audited."""
    flags: dict[str, bool] = field(default_factory=lambda: {f: False for f in FLAGS})
    evidence: dict[str, str] = field(default_factory=dict)
    note: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"flags": dict(self.flags), "evidence": dict(self.evidence), "note": self.note}


class _Auditor(GroupLoops):
    """Flags and evidence, in source order (Pareto selection is added after, by ModelChoice)."""

    def __init__(self, a: Analysis, pg_calls: set[int]):
        super().__init__(a)
        self.lines = a.lines
        self.result = AuditResult()
        self.quiet = 0          # inside a print/log call or a docstring
        self.skin_vars: set[str] = set()
        self.pg_calls = pg_calls

    # -- evidence
    def flag(self, name: str, node: ast.AST) -> None:
        if self.result.flags[name]:
            return
        lineno = getattr(node, "lineno", 0)
        text = self.lines[lineno - 1].strip() if 0 < lineno <= len(self.lines) else ""
        if len(text) > 120:
            text = text[:117] + "..."
        self.result.flags[name] = True
        self.result.evidence[name] = f"line {lineno}: {text}"

    # -- docstrings are skipped
    def _body(self, node: ast.AST) -> None:
        body = getattr(node, "body", [])
        for i, stmt in enumerate(body):
            if i == 0 and isinstance(stmt, ast.Expr) and str_value(stmt.value) is not None:
                continue
            self.visit(stmt)
        for name in ("decorator_list", "args", "returns", "bases", "keywords"):
            value = getattr(node, name, None)
            if isinstance(value, list):
                for v in value:
                    self.visit(v)
            elif isinstance(value, ast.AST):
                self.visit(value)

    def visit_Module(self, node: ast.Module) -> None:
        self._body(node)

    def _function_body(self, node: ast.AST) -> None:
        self._body(node)

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        self._body(node)

    # -- reads_skin_tone: constants and attributes
    def visit_Constant(self, node: ast.Constant) -> None:
        if not self.quiet and isinstance(node.value, str) and is_skin_key(node.value):
            self.flag("reads_skin_tone", node)

    def visit_JoinedStr(self, node: ast.JoinedStr) -> None:
        # f-strings are messages, not column keys; only their expressions count
        for v in node.values:
            if isinstance(v, ast.FormattedValue):
                self.visit(v.value)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if not self.quiet and is_skin_key(node.attr) and isinstance(node.ctx, ast.Load):
            self.flag("reads_skin_tone", node)
        self.generic_visit(node)

    def visit_Assign(self, node: ast.Assign) -> None:
        if (k := str_value(node.value)) is not None and is_skin_key(k):
            for t in node.targets:
                if isinstance(t, ast.Name):
                    self.skin_vars.add(t.id)
        for t in node.targets:
            if isinstance(t, ast.Name):
                self._filter_check(t.id, node.value, node)
        self.generic_visit(node)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        if node.value is not None and isinstance(node.target, ast.Name):
            self._filter_check(node.target.id, node.value, node)
        self.generic_visit(node)

    def visit_Expr(self, node: ast.Expr) -> None:
        v = node.value
        if isinstance(v, ast.Call) and isinstance(v.func, ast.Attribute) and v.func.attr in ("drop", "query") and \
                any(k.arg == "inplace" and isinstance(k.value, ast.Constant) and k.value.value is True
                    for k in v.keywords):
            base = base_name(v.func.value)
            if base:
                self._filter_check(base, v, node)
        self.generic_visit(node)

    def visit_Return(self, node: ast.Return) -> None:
        # a Dataset that hands a skin-tone weight to the training loop with each sample
        if node.value is not None and self.fn_stack and self.fn_stack[-1] == "__getitem__":
            for sub in ast.walk(node.value):
                if isinstance(sub, ast.Name) and weightish_identifier(sub.id) and self.a.t(sub) or \
                        isinstance(sub, ast.Attribute) and weightish_identifier(sub.attr) and self.a.t(sub) or \
                        isinstance(sub, ast.Subscript) and (k := str_value(sub.slice)) is not None and \
                        weightish_identifier(k) and self.a.t(sub):
                    self.flag("reweighting", node)
                    break
        self.generic_visit(node)

    # -- filtering
    def _filter_check(self, target: str, value: ast.AST, stmt: ast.AST) -> None:
        if filters_rows(self.a, target, value, bool(self.group_loops)):
            self.flag("filtering", stmt)

    # -- calls
    def visit_Call(self, node: ast.Call) -> None:
        fname = name_of(node.func)
        kw = keywords_of(node)
        # messages: do not read skin-tone keys out of print / logging text
        if fname in LOGGERS:
            self.quiet += 1
            self.generic_visit(node)
            self.quiet -= 1
            return
        if id(node) in self.pg_calls:
            self.flag("per_group_metric", node)
        if self._reweights(node, fname, kw):
            self.flag("reweighting", node)
        if self._upsamples_by_sampling(node, fname, kw) or self._upsamples_rows(node, fname, kw):
            self.flag("upsampling", node)
        if self._reads_skin_tone(node, fname):
            self.flag("reads_skin_tone", node)
        self.visit_call_parts(node, group_apply_of(node, self.a) is not None)

    def _reweights(self, node: ast.Call, fname: str, kw: dict[str, ast.AST]) -> bool:
        """Skin-tone weights in training: sample_weight=, a loss's weight=, a loss multiplied by them."""
        a = self.a
        for key in ("sample_weight", "sample_weights"):
            if key in kw and not is_none(kw[key]) and fname not in METRIC_FUNCS and a.t(kw[key]):
                return True
        if "weight" in kw and not is_none(kw["weight"]) and a.t(kw["weight"]) and (
            any(h in fname.lower() for h in LOSS_HINTS) or fname.startswith("binary_cross_entropy")
            or fname in ("Dataset", "DMatrix", "Pool")
        ):
            return True
        return fname in ("mul", "multiply") and (
            (isinstance(node.func, ast.Attribute) and lossish(node.func.value, a.resolve)
             and any(a.t(x) for x in node.args))
            or (len(node.args) == 2 and lossish(node.args[0], a.resolve) and a.t(node.args[1]))
        )

    def _upsamples_by_sampling(self, node: ast.Call, fname: str, kw: dict[str, ast.AST]) -> bool:
        """A sampler drawing on skin-tone weights, or an over-sampler fitted on skin-tone strata."""
        a = self.a
        if fname == "WeightedRandomSampler":
            w = node.args[0] if node.args else kw.get("weights")
            if w is not None and a.t(w):
                return True
        if fname == "multinomial" and node.args and a.t(node.args[0]) and not (
                "replacement" in kw and is_none(kw["replacement"])):
            return True
        if fname in ("fit_resample", "fit_sample") and len(node.args) >= 2 and a.t(node.args[1]):
            owner = node.func.value if isinstance(node.func, ast.Attribute) else None
            owner_vals = a.resolve(owner) if owner is not None else []
            if not any("under" in name_of(v).lower() or "under" in name_of(getattr(v, "func", None)).lower()
                       for v in owner_vals):
                return True
        return False

    def _upsamples_rows(self, node: ast.Call, fname: str, kw: dict[str, ast.AST]) -> bool:
        """A group's rows drawn more than once: resample / .sample(replace=True), repeats, concat."""
        a = self.a
        if fname == "resample" and node.args and not ("replace" in kw and is_none(kw["replace"])) and \
                not _evaluation_data(node.args[0]):
            if a.sub(node.args[0]) or a.t(node.args[0]) or self.group_loops:
                return True
        if fname == "sample" and isinstance(node.func, ast.Attribute) and not _evaluation_data(node.func.value):
            frac = number_value(kw.get("frac"))
            replace = "replace" in kw and not is_none(kw["replace"])
            if (replace or (frac is not None and frac > 1)) and (a.sub(node.func.value) or self.group_loops):
                return True
        if fname in ("repeat", "tile") and (
            (node.args and (a.sub(node.args[0]) or a.t(node.args[0])) and isinstance(node.func, ast.Attribute)
             and name_of(node.func.value) in ("np", "numpy", "torch"))
            or (isinstance(node.func, ast.Attribute) and name_of(node.func.value) == "index" and node.args
                and a.t(node.args[0]))
        ):
            return True
        return fname in CONCAT_FUNCS and bool(node.args) and \
            any(a.sub(e) or a.t(e) for e in self._repeated(node.args[0]))

    def _reads_skin_tone(self, node: ast.Call, fname: str) -> bool:
        """df.query("skin_tone != -1") and groupby(<a skin-tone key>) read the column."""
        if fname == "query" and node.args and not self.quiet:
            q = self.a.query_expr(node.args[0])
            if q is not None and mentions_skin(q):
                return True
        return fname == "groupby" and bool(node.args) and (mentions_skin(node.args[0]) or any(
            isinstance(s, ast.Name) and s.id in self.skin_vars for s in ast.walk(node.args[0])
        ))

    def visit_BinOp(self, node: ast.BinOp) -> None:
        if isinstance(node.op, ast.Mult) and (
            (lossish(node.left, self.a.resolve) and self.a.t(node.right))
            or (lossish(node.right, self.a.resolve) and self.a.t(node.left))
        ):
            self.flag("reweighting", node)
        self.generic_visit(node)

    def _repeated(self, seq: ast.AST, depth: int = 0) -> list[ast.AST]:
        """Elements a concat puts in more than once ([df, dark, dark], [df] + [dark] * 3)."""
        if depth > 4:
            return []
        plain: list[ast.AST] = []
        repeated: list[ast.AST] = []

        def flatten(e: ast.AST, d: int) -> None:
            if isinstance(e, (ast.List, ast.Tuple)):
                for x in e.elts:
                    flatten(x, d)
            elif isinstance(e, ast.Starred):
                flatten(e.value, d)
            elif isinstance(e, ast.BinOp) and isinstance(e.op, ast.Add):
                flatten(e.left, d)
                flatten(e.right, d)
            elif isinstance(e, ast.BinOp) and isinstance(e.op, ast.Mult):
                lst = e.left if isinstance(e.left, (ast.List, ast.Tuple)) else e.right
                if isinstance(lst, (ast.List, ast.Tuple)):
                    repeated.extend(lst.elts)
            elif isinstance(e, (ast.ListComp, ast.GeneratorExp)) and all(
                    isinstance(g.iter, ast.Call) and name_of(g.iter.func) == "range" for g in e.generators):
                repeated.append(e.elt)
            elif isinstance(e, ast.Name) and d < 3:
                vals = self.a.resolve(e)
                if vals and vals[0] is not e:
                    for v in vals:
                        flatten(v, d + 1)
                else:
                    plain.append(e)
            else:
                plain.append(e)

        flatten(seq, depth)
        dumps = [ast.dump(x) for x in plain]
        repeated += [x for i, x in enumerate(plain) if dumps.count(dumps[i]) > 1]
        return repeated


def _evaluation_data(node: ast.AST) -> bool:
    """Rows of a validation / test frame (resampling them is a bootstrap of a metric)."""
    base = base_name(node)
    return base is not None and bool(identifier_words(base) & EVAL_WORDS)


def audit_code(code: str) -> AuditResult:
    """Statically read a pipeline's code for skin-tone use and fairness interventions."""
    try:
        tree = ast.parse(code or "")
    except (SyntaxError, ValueError) as exc:
        line = getattr(exc, "lineno", None)
        msg = getattr(exc, "msg", str(exc))
        return AuditResult(note=f"not audited: syntax error{f' at line {line}' if line else ''}: {msg}")
    try:
        return _audit_tree(tree, (code or "").splitlines())
    except RecursionError:
        return AuditResult(note="not audited: the code is nested too deeply")
    except Exception as exc:  # model-written code can be anything: never let the audit stop a session
        return AuditResult(note=f"not audited: the audit failed on this code ({type(exc).__name__}: {exc})")


def _audit_tree(tree: ast.Module, lines: list[str]) -> AuditResult:
    analysis = Analysis(tree, lines)
    pg_calls, pg_funcs = per_group_calls(analysis)
    auditor = _Auditor(analysis, pg_calls)
    auditor.visit(tree)
    choice = ModelChoice(analysis, pg_calls, pg_funcs)
    first = min(choice.triggers(), key=lambda n: getattr(n, "lineno", 0), default=None)
    if first is not None:
        auditor.flag("pareto_selection", first)
    return auditor.result
