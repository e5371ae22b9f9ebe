"""The agent side of the engine: the search (policy.py, runner.py), the task protocols
(task_protocol.py), the session's configuration and set-up, and the coder registry
(coder_registry.py), which builds the coder a session names from engine.coders (the offline
simulated agent, the LLM coder) behind one interface (engine/coders/protocol.py).

Entry points: engine.agent.session_setup.start_session, engine.agent.runner.run,
engine.agent.recovery.resume.
"""
