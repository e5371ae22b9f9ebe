"""Test doubles shared by unit and end-to-end tests (a fake Chat Completions server)."""
from tests.fakes.chat_server import (
    BUGGY_PIPELINE,
    SIMPLE_PIPELINE,
    AutoResponder,
    FakeChatServer,
    Reply,
    Request,
    chat_server,
    code_reply,
    error,
    garbage,
    json_review,
    rate_limited,
    refusal,
    reply,
    slow,
    tool_call,
    tool_review,
    truncated,
)

__all__ = [
    "BUGGY_PIPELINE", "SIMPLE_PIPELINE", "AutoResponder", "FakeChatServer", "Reply", "Request",
    "chat_server", "code_reply", "error", "garbage", "json_review", "rate_limited", "refusal",
    "reply", "slow", "tool_call", "tool_review", "truncated",
]
