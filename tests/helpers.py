"""Message builders and common values for the tests."""

from __future__ import annotations

import workingmem as wm

GPT4O = wm.ModelInfo(id="gpt-4o", context_window=128_000)
DEFAULT_PROFILE = wm.Profile(id="default")


def user(text: str) -> wm.Message:
    return {"role": "user", "content": text}


def assistant(text: str | None, *calls: str) -> wm.Message:
    message: wm.Message = {"role": "assistant", "content": text}
    if calls:
        message["tool_calls"] = [
            {"id": c, "type": "function", "function": {"name": "lookup", "arguments": "{}"}}
            for c in calls
        ]
    return message


def tool(call_id: str, text: str = "result") -> wm.Message:
    return {"role": "tool", "tool_call_id": call_id, "content": text}
