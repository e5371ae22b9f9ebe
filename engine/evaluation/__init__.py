"""Evaluation: MEDFAIR metrics with their intervals, the evaluation harness and the audit.

Submodules are imported on demand (metrics pulls in scikit-learn and pandas):
    engine.evaluation.metrics   compute_metrics, MetricSet
    engine.measures.uncertainty  stratified bootstrap intervals, paired differences
    engine.evaluation.harness   evaluate, score_predictions, EvalOutcome
    engine.evaluation.audit     audit_code, parse_claimed_metric, check_claim (a package: see its docstring)
"""
