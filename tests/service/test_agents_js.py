"""The OpenAI Agents SDK for TypeScript with `OpenAIConversationsSession`, over real HTTP: the
session sends the whole history with no thread id and adds each run's items to its conversation
only once the run is answered (the Python SDK adds the input first). The conversation is still
the one thread, each item stored once, and forgetting it forgets everything of the session.
The SDK runs in Node.js from ``tests/clients/openai-agents`` (``npm ci`` there, as
``scripts/install dev`` does); the same requests are also made with the `openai` SDK, for the
cases the SDK's own run does not reach."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

import workingmem as wm
from workingmem.llm.testing import Reply, ScriptedUpstream, tool_call
from workingmem.service import create_app

from .conftest import settings_for
from .live import LiveServer, Seen, create_key, run_async
from .real_clients import run_client
from .test_agents_responses import assert_memory_of
from .test_openai_clients import agent_upstream
from .test_responses_api import answers, turns

CLIENT = Path(__file__).parents[1] / "clients" / "openai-agents"
NODE = shutil.which("node")
needs_node = pytest.mark.skipif(
    NODE is None or not (CLIENT / "node_modules" / "@openai" / "agents").is_dir(),
    reason="the Agents SDK client needs Node.js and `npm ci` in tests/clients/openai-agents",
)

RUN = ["user", "assistant", "tool", "assistant"]
"""A run of the script that calls the weather tool."""
RUN_ROLES = [*RUN, "user", "assistant", *RUN, "user", "assistant"]
"""The thread of the script's four runs: the first and the third call the weather tool."""


@pytest.fixture
def client(service: LiveServer, key: str, upstream: ScriptedUpstream) -> openai.OpenAI:
    upstream.responder = agent_upstream
    return openai.OpenAI(base_url=f"{service.url}/v1", api_key=key, max_retries=0, timeout=10)


def thread_ids(api: httpx.Client) -> list[str]:
    return [thread["id"] for thread in api.get("/v1/threads").json()["data"]]


@needs_node
def test_a_typescript_agent_over_the_websocket_transport_is_one_thread(
    database_url: str, upstream: ScriptedUpstream, tenant: str
) -> None:
    """The SDK's WebSocket transport (``useResponsesWebSocket``), four runs chained by their
    response ids over one connection: every call came over the socket, one thread of every
    turn once, in order, the last call reading its memory."""
    upstream.responder = agent_upstream
    app, seen = create_app(settings_for(database_url, upstream)), list[tuple[str, str]]()
    app.add_middleware(Seen, seen=seen)
    with LiveServer(app) as live:
        key = create_key(database_url, tenant).secret
        ran = run_client([str(NODE), "chain.mjs", f"{live.url}/v1", key], cwd=CLIENT)
        assert ran.returncode == 0, ran.stderr
        with httpx.Client(base_url=live.url, headers={"Authorization": f"Bearer {key}"}) as api:
            (thread,) = thread_ids(api)
            stored = turns(api, thread)
    assert json.loads(ran.stdout)["answers"] == [
        "It is sunny in Lyon there.",
        "You said: My name is Ada.",
        "It is sunny in Lyon there.",
        "You said: Thanks",
    ]
    assert {asked for asked in seen if asked[1] == "/v1/responses"} == {
        ("websocket", "/v1/responses")
    }
    assert [m["role"] for m in stored] == RUN_ROLES
    assert_memory_of(answers(upstream)[-1]["messages"], stored[:-1])


@needs_node
@pytest.mark.parametrize("mode", ["plain", "stream"])
def test_a_typescript_conversations_session_is_one_thread_each_item_once(
    mode: str, service: LiveServer, key: str, upstream: ScriptedUpstream, api: httpx.Client
) -> None:
    upstream.responder = agent_upstream
    command = [str(NODE), "session.mjs", f"{service.url}/v1", key, mode]
    ran = run_client(command, cwd=CLIENT)
    assert ran.returncode == 0, ran.stderr
    out = json.loads(ran.stdout)
    assert out["answers"] == [
        "It is sunny in Lyon there.",
        "You said: My name is Ada.",
        "It is sunny in Lyon there.",
        "You said: Thanks",
    ]
    # a function_call_output as the SDK reads it: a function_call_result
    run = ["user", "function_call", "function_call_result", "assistant"]
    assert out["items"] == [*run, "user", "assistant", *run, "user", "assistant"]
    conversation = out["conversation"]
    assert thread_ids(api) == [conversation]  # no copy of any run anywhere else
    stored = turns(api, conversation)
    assert [m["role"] for m in stored] == RUN_ROLES
    for call in (1, 7):
        assert stored[call]["tool_calls"][0]["id"] == stored[call + 1]["tool_call_id"]
    # the last run was answered on the conversation: the model read its memory
    assert_memory_of(answers(upstream)[-1]["messages"], stored[:-1])

    assert api.delete(f"/v1/conversations/{conversation}").status_code == 200
    assert thread_ids(api) == []  # forgetting the conversation forgets the session


def said_items(text: str, answer: str) -> Any:
    """A run's items as the TypeScript session adds them: the input, then the answer's message
    (no ids)."""
    return [
        {"role": "user", "content": text},
        {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": answer, "annotations": []}],
            "status": "completed",
        },
    ]


def run_once(
    client: openai.OpenAI, conversation: str, history: list[dict[str, Any]], text: str
) -> list[dict[str, Any]]:
    """One run as the TypeScript session makes it: the history and the input sent whole, with
    no thread; then the input and the answer added to the conversation. The new history."""
    sent: Any = [*history, {"role": "user", "content": text}]
    answer = client.responses.create(model="answer-model", instructions="Be brief.", input=sent)
    items = said_items(text, answer.output_text)
    client.conversations.items.create(conversation, items=items)
    return [*history, *items]


def test_the_session_s_runs_reach_its_conversation(
    client: openai.OpenAI, upstream: ScriptedUpstream, api: httpx.Client
) -> None:
    conversation = client.conversations.create().id
    history: list[dict[str, Any]] = []
    for text in ["My name is Ada.", "I live in Lyon.", "Thanks"]:
        history = run_once(client, conversation, history, text)
        assert thread_ids(api) == [conversation]
    assert [m["content"] for m in turns(api, conversation)] == [
        "My name is Ada.",
        "You said: My name is Ada.",
        "I live in Lyon.",
        "You said: I live in Lyon.",
        "Thanks",
        "You said: Thanks",
    ]
    listed = client.conversations.items.list(conversation, order="asc").data
    assert len({item.id for item in listed}) == len(listed) == 6


def test_the_gateway_s_memory_rounds_do_not_part_the_session_from_its_conversation(
    client: openai.OpenAI, upstream: ScriptedUpstream, api: httpx.Client
) -> None:
    """R30 on the way of a session: the model reads its working memory before each answer, a
    round the gateway stores and the client never sees. The first run's copy holds it, the
    conversation does not, and the copy is still found and forgotten; the items a later run
    adds repeat the conversation's client-visible turns, and are not stored again."""

    def remembering(request: dict[str, Any]) -> Any:
        messages = request["messages"]
        if messages[-1]["role"] == "user" and request.get("tools"):
            return Reply(None, tool_calls=[tool_call("get_working_memory", {}, id="m1")])
        if messages[-1].get("tool_call_id") == "m1":  # read: answers the user's turn
            return agent_upstream({**request, "messages": messages[:-2]})
        return agent_upstream(request)

    upstream.responder = remembering
    conversation = client.conversations.create().id
    history: list[dict[str, Any]] = []
    for text in ["My name is Ada.", "Thanks"]:
        history = run_once(client, conversation, history, text)
        assert thread_ids(api) == [conversation]
    # the second run's round is the conversation's (the first's went with its copy)
    stored = turns(api, conversation)
    assert [m["role"] for m in stored] == ["user", "assistant", *RUN]
    assert stored[3]["tool_calls"][0]["function"]["name"] == "get_working_memory"
    listed = client.conversations.items.list(conversation, order="asc").data
    assert [item.model_dump()["content"][0]["text"] for item in listed] == [
        "My name is Ada.",
        "You said: My name is Ada.",
        "Thanks",
        "You said: Thanks",
    ]


def test_a_copy_made_before_is_forgotten_once_the_conversation_holds_it(
    client: openai.OpenAI, api: httpx.Client, database_url: str, tenant: str
) -> None:
    """A session whose first run went to a copy that stayed (a gateway of before): the next
    run goes to the copy still, and once its items make the conversation the copy's turns,
    the copy goes; the run after reaches the conversation."""
    conversation = client.conversations.create().id
    first = client.responses.create(
        model="answer-model", instructions="Be brief.", input="My name is Ada."
    )
    (copy,) = set(thread_ids(api)) - {conversation}
    history = said_items("My name is Ada.", first.output_text)

    async def added_before() -> None:  # the items, added where no copy was looked for
        async with await wm.open_store(database_url) as store:
            await store.append(
                tenant_id=tenant,
                thread_id=conversation,
                messages=[
                    {"role": "user", "content": "My name is Ada."},
                    {"role": "assistant", "content": first.output_text},
                ],
            )

    run_async(added_before)
    assert set(thread_ids(api)) == {conversation, copy}
    history = run_once(client, conversation, history, "I live in Lyon.")
    assert thread_ids(api) == [conversation]
    run_once(client, conversation, history, "Thanks")
    assert thread_ids(api) == [conversation]
    assert len(turns(api, conversation)) == 6


def test_a_thread_that_is_not_the_conversation_s_copy_stays(
    client: openai.OpenAI, api: httpx.Client
) -> None:
    """The same answer added to a conversation whose turns differ from the thread it was
    given in: nothing is forgotten, the items are stored."""
    client.responses.create(model="answer-model", instructions="Be brief.", input="Hello")
    other = client.conversations.create(items=[{"role": "user", "content": "Bonjour"}]).id
    client.conversations.items.create(other, items=said_items("Hello", "You said: Hello"))
    assert len(thread_ids(api)) == 2
    assert [m["content"] for m in turns(api, other)] == ["Bonjour", "Hello", "You said: Hello"]


def test_a_thread_the_client_named_is_never_taken_for_a_copy(
    client: openai.OpenAI, api: httpx.Client
) -> None:
    named = client.responses.create(
        model="answer-model",
        instructions="Be brief.",
        input="My name is Ada.",
        extra_headers={"X-Thread-Id": "mine"},
    )
    conversation = client.conversations.create().id
    client.conversations.items.create(
        conversation,
        items=said_items("My name is Ada.", named.output_text),
    )
    assert sorted(thread_ids(api)) == sorted([conversation, "mine"])


def test_another_tenant_s_copy_is_never_found(
    client: openai.OpenAI, service: LiveServer, database_url: str, tenant: str, api: httpx.Client
) -> None:
    """Another tenant's session with the very same run: each tenant keeps its own thread."""
    other_key = create_key(database_url, f"{tenant}-b", "tests").secret
    with openai.OpenAI(
        base_url=f"{service.url}/v1", api_key=other_key, max_retries=0, timeout=10
    ) as other:
        answer = other.responses.create(
            model="answer-model", instructions="Be brief.", input="My name is Ada."
        )
        with httpx.Client(
            base_url=service.url, headers={"Authorization": f"Bearer {other_key}"}, timeout=10
        ) as other_api:
            theirs = thread_ids(other_api)
            conversation = client.conversations.create().id
            client.conversations.items.create(
                conversation,
                items=said_items("My name is Ada.", answer.output_text),
            )
            assert thread_ids(other_api) == theirs
    assert thread_ids(api) == [conversation]
