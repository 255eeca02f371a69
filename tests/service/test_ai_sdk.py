"""The AI SDK (Vercel's, for TypeScript) as a client of the gateway, over real HTTP: the app keeps
its conversation and resends it whole with no thread id, the SDK runs the app's tool between an
answer's steps, the last answer streams; on the Responses API (the SDK's default OpenAI model),
Chat Completions, and Anthropic's Messages (its Anthropic provider). On the Responses API the
SDK refers to the answers it was given by their ids (``item_reference``): the conversation is
still one thread, every turn stored once. The SDK runs in Node.js from ``tests/clients/ai-sdk``
(``npm ci`` there, as ``scripts/install dev`` does)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import summarizing_responder
from workingmem.llm.testing import Reply, ScriptedUpstream, tool_call
from workingmem.service import create_app

from .conftest import settings_for
from .live import LiveServer, create_key
from .real_clients import run_client, the_thread
from .test_responses_upstream import said

CLIENT = Path(__file__).parents[1] / "clients" / "ai-sdk"
NODE = shutil.which("node")
pytestmark = pytest.mark.skipif(
    NODE is None or not (CLIENT / "node_modules" / "ai").is_dir(),
    reason="the AI SDK client needs Node.js and `npm ci` in tests/clients/ai-sdk",
)


def weather_model(request: dict[str, Any]) -> Reply:
    """Calls the app's weather tool when asked about the weather, says what it returned, and
    echoes anything else."""
    if request.get("model") == "cheap-model":
        return summarizing_responder(request)
    last = request["messages"][-1]
    if last["role"] == "tool":
        return Reply(f"It is {last['content']} there.")
    offered = [tool["function"]["name"] for tool in request.get("tools") or ()]
    if "weather" in said(last) and "weather" in offered:
        return Reply(None, tool_calls=[tool_call("weather", {"city": "Lyon"}, id="call_w1")])
    return Reply(f"You said: {said(last)}")


@pytest.mark.parametrize("api", ["responses", "chat", "anthropic"])
def test_an_ai_sdk_conversation_resent_whole_is_one_thread(
    api: str, database_url: str, upstream: ScriptedUpstream, tenant: str
) -> None:
    upstream.responder = weather_model
    with LiveServer(create_app(settings_for(database_url, upstream))) as live:
        key = create_key(database_url, tenant, "tests").secret
        command = [str(NODE), "conversation.mjs", f"{live.url}/v1", key, api]
        ran = run_client(command, cwd=CLIENT)
        assert ran.returncode == 0, ran.stderr
        messages = the_thread(live.url, key)

    assert json.loads(ran.stdout)["answers"] == [
        "You said: I live in Lyon.",
        "It is sunny in Lyon there.",
        "You said: Where do I live?",
    ]
    assert [(m["role"], m["content"]) for m in messages] == [
        ("user", "I live in Lyon."),
        ("assistant", "You said: I live in Lyon."),
        ("user", "What is the weather?"),
        ("assistant", None),
        ("tool", "sunny in Lyon"),
        ("assistant", "It is sunny in Lyon there."),
        ("user", "Where do I live?"),
        ("assistant", "You said: Where do I live?"),
    ]
