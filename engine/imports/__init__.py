"""Importers of recorded agent runs: each turns a run's artifacts into a session's events.

    aide.py         one AIDE run (journal.json, config.yaml, aide.log, best_solution.py)
    mlzero.py       one MLZero run (info_logs.txt / logs.txt, token_usage.json, node_*/)
    predictions.py  a run's published DDI predictions, scored with the product's own scorer
    be_fair.py      the published "Be Fair!" artifact tree, every run, as the study `be-fair`

Imported sessions go through the same event log and reducer as live ones; every figure keeps its
provenance (the agent's claim, or published predictions scored here).
"""
