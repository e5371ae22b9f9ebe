"""The coders: the agents the search asks for code, one package each, behind one interface.

    protocol.py   the Coder protocol and what crosses it (CoderContext, CoderReply, NodeView, Review, LlmCall)
    offline/      the offline coder: a simulated agent, labelled as such, with its pipeline templates
    llm/          the LLM coder: any OpenAI-compatible Chat Completions server, its prompts and scaffold

The coders know nothing of the search that asks them: engine.agent (the runner, the registry in
engine/agent/coder_registry.py that builds a coder from a session's settings) imports them, never
the other way round.
"""
