"""Audit: a static reading of a pipeline's code, and the agent's claimed metric against its output.

`audit_code` parses the code (AST, never regexes over the text) and follows how values derived from
the skin-tone column flow through it; it raises the flags listed in flags.py, each with the source
line that triggered it as evidence. A syntax error gives all False and a note (so does code the
analysis cannot handle: the audit never raises). tests/fixtures/audit_cases/ holds the labelled
pipelines it is measured on (tests/unit/test_audit_labelled.py prints per-badge precision and recall).

The modules, each built on the ones above it:
    vocabulary    the names and words the audit recognises (skin-tone keys, metric and loss functions)
    syntax        small readers of syntax trees (a call's name, a string constant, a mask's atoms)
    scopes        Python's scopes and every binding of a name
    taint         which names, columns, attributes and return values derive from skin tone
    group_rows    the masks that select a skin-tone group's rows, and the names holding them
    per_group     metric calls computed on one skin-tone group
    filtering     training rows dropped on a fairness-relevant condition
    model_choice  a model / epoch / configuration chosen on the worst group
    flags         the flags and their evidence; audit_code
    claims        parse_claimed_metric (the one reader of a printed AUC), check_claim and its threshold
"""
from engine.measures.claims import (
    CLAIM_DIFFERENCE_FLAG, check_claim, claimed_number_in_output, parse_claimed_metric,
)
from engine.evaluation.audit.flags import FLAGS, AuditResult, audit_code

__all__ = [
    "CLAIM_DIFFERENCE_FLAG", "FLAGS", "AuditResult", "audit_code", "check_claim", "claimed_number_in_output",
    "parse_claimed_metric",
]
