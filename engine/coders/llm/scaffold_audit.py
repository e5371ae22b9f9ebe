"""The audit of a scaffolded pipeline reads the model's part only.

The scaffold itself reads the skin-tone column (to hand train() each image's value and to split
the data by group and label), so the whole file would read as skin-tone use whatever the model
wrote. The audit reads what the reply wrote (Scaffold.written),
and the model reads skin tone when its train() uses the skin_tone argument it is handed. Evidence
lines are numbered as in the whole file, which is what the Code tab shows.
"""
from __future__ import annotations

import ast

from engine.coders.llm import scaffold
from engine.evaluation.audit import AuditResult, audit_code

SKIN_ARGUMENT = 2   # train(X, y, skin_tone): the third parameter


def audit_pipeline(code: str) -> AuditResult:
    """audit_code on the model's part of a scaffolded pipeline, on the whole file otherwise."""
    written = scaffold.load().written(code)
    if written is None:
        return audit_code(code)
    result = audit_code(written)
    if result.note is not None:
        return result
    line = _train_reads_skin_tone(written)
    if line is not None and not result.flags["reads_skin_tone"]:
        result.flags["reads_skin_tone"] = True
        result.evidence["reads_skin_tone"] = f"line {line}: {written.splitlines()[line - 1].strip()[:120]}"
    result.evidence = {flag: _renumbered(text, code) for flag, text in result.evidence.items()}
    return result


def _train_reads_skin_tone(written: str) -> int | None:
    """The first line where train() reads its skin_tone parameter (whatever the reply named it)."""
    for node in ast.parse(written).body:
        if isinstance(node, ast.FunctionDef) and node.name == "train" and len(node.args.args) > SKIN_ARGUMENT:
            name = node.args.args[SKIN_ARGUMENT].arg
            loads = [n.lineno for n in ast.walk(node)
                     if isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load)]
            return min(loads) if loads else None
    return None


def _renumbered(evidence: str, whole: str) -> str:
    """"line N: text" with N the text's line in the whole file (the first line that holds it)."""
    head, sep, text = evidence.partition(": ")
    if not sep or not head.startswith("line "):
        return evidence
    probe = text[:-3] if text.endswith("...") else text
    for number, source in enumerate(whole.splitlines(), start=1):
        if probe and source.strip().startswith(probe):
            return f"line {number}: {text}"
    return evidence
