"""The gateway's tests' model and upstream: an OpenAI-compatible server on 127.0.0.1 that
answers by echo and summarizes when JSON is asked, and what every request to it must be."""

from __future__ import annotations

from typing import Any

import workingmem as wm
from tests.helpers import (
    assert_in_provider_order,
    summarizing_responder,
)
from workingmem.gateway_config import GatewayConfig
from workingmem.llm.testing import Reply, ScriptedUpstream

MODEL = wm.ModelInfo(id="answer-model", context_window=8_000, max_output_tokens=500)
CONFIG = GatewayConfig(
    default_model="answer-model",
    cheap_model="cheap-model",
    models={"answer-model": MODEL},
    working_memory=wm.WorkingMemoryConfig(recent_turns=4, update_every_turns=4),
)


def answering(request: dict[str, Any]) -> Reply:
    """The scripted upstream: helper calls (JSON requested) get a summary; answers echo."""
    if "response_format" in request:
        return summarizing_responder(request)
    last = request["messages"][-1]
    return Reply(f"You said: {last['content']}", prompt_tokens=100, completion_tokens=10)


def assert_provider_valid(request: dict[str, Any], window: int = MODEL.context_window) -> None:
    """What every provider accepts: system first, then a user turn; every tool result answers
    a call of the assistant turn before it; every call has its result; it fits the window."""
    messages = request["messages"]
    assert_in_provider_order(messages)
    assert wm.count_tokens(messages, MODEL) + request.get("max_tokens", 0) <= window


def answer_requests(upstream: ScriptedUpstream) -> list[dict[str, Any]]:
    return [r for r in upstream.requests if "response_format" not in r]
