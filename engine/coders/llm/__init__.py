"""The LLM coder: any OpenAI-compatible Chat Completions server drives the search.

    coder.py             LlmCoder: draft, improve, debug and review, each a prompt and a parsed reply
    config.py            LlmConfig: the server, the model and their settings (env, file, flags)
    client.py            ChatClient: one call, bounded and streamed (attempts.py: its HTTP attempts;
                         replies.py: reading what the server answered)
    server_check.py      probing a server before a session relies on it (`befair llm check`)
    local_model.py       the local model behind llama.cpp's llama-server
    stream_relay.py      a streaming reply, carried to the live side channel and the runner's thread
    prompts.py           the prompts: befair's own set, and PROMPT_SETS (a task protocol's set by its name);
                         prompts_be_fair.py: the be-fair protocol's, AIDE's own; prompt_common.py: what both share
    response_parsing.py  reading a reply: plan and code, a review as JSON
    scaffold.py          the scaffold for small models (templates/: the file the reply is put into);
                         scaffold_audit.py: the audit of the model's part only
    reply_rules.py       the reply rules, each with an id and a scope (reply_flakes.py, pyflakes', and
                         reply_flaws.py: the checks behind them)
"""
