

def test_the_final_choice_line_names_every_criterion_the_sessions_own_first():
    from engine.agent.headless import final_choice_line
    from engine.session.selection import CRITERIA

    payload = {"criterion": "robust", "by_claimed": 5, "by_validation": 1, "by_minimax": 5, "by_robust": 2,
               "reasons": {"validation": "node 1: highest validation AUC (0.8969)"}}
    line = final_choice_line(payload)
    assert line.startswith("final choice: claimed: 5; validation: node 1: highest validation AUC (0.8969); ")
    assert line.endswith("; ★ robust: 2") and all(f"{c}: " in line for c in CRITERIA)
    # a payload recorded before the robust criterion: only what it holds, the session's criterion marked
    old = final_choice_line({"by_claimed": 1, "by_validation": 5, "by_minimax": 4}, "validation")
    assert old == "final choice: claimed: 1; ★ validation: 5; minimax: 4"
