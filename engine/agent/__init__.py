"""The agent side of the engine: the search (policy.py, runner.py), the coders behind one
interface (coder.py: the offline simulated agent in the offline/ package, the LLM coder in
llm.py), and the `befair run` / `befair resume` commands (cli.py).

Entry points: engine.agent.runner.start_session / run / resume.
"""
