"""The agent side of the engine: the search (policy.py, runner.py), the coders behind one
interface (coder.py: the offline simulated agent in the offline/ package, the LLM coder in
llm.py), and the `befair run` / `befair resume` commands (cli.py).

Entry points: engine.agent.session_setup.start_session, engine.agent.runner.run,
engine.agent.recovery.resume.
"""
