"""befair's headless core: task, data, agent, execution, evaluation and the session store.

Nothing in this package imports textual, befair_tui or baselines (checked by import-linter).
"""
