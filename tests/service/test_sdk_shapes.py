"""Every body and event the gateway sends is valid for the official SDKs' own models, checked
by validation (every required field, every literal type), not by the SDKs' reading.

The SDKs read an answer without validating it (`construct`): a field the gateway leaves out
goes unnoticed until a client reads it, and a client in another language with strict schemas
refuses the whole body. So the bodies are read here as raw HTTP and validated with
`model_validate` against `openai.types` and `anthropic.types`, through each kind of upstream,
for the chat completions, the Responses and Conversations APIs, and the Messages API.
"""

from __future__ import annotations

import json
import typing
import uuid
from collections.abc import Iterator
from typing import Any

import anthropic.types as claude
import httpx
import openai.types as oai
import openai.types.chat as chat
import openai.types.conversations as conversations
import openai.types.responses as responses
import pytest
from pydantic import BaseModel, ValidationError

from workingmem.llm.testing import Reply, ScriptedUpstream, tool_call
from workingmem.service import create_app
from workingmem.service.response_items import item_with_id

from .conftest import settings_for
from .live import LiveServer, create_key

WEATHER_PARAMETERS = {"type": "object", "properties": {"city": {"type": "string"}}}
CHAT_TOOL = {"type": "function", "function": {"name": "weather", "parameters": WEATHER_PARAMETERS}}
RESPONSES_TOOL = {"type": "function", "name": "weather", "parameters": WEATHER_PARAMETERS}
CLAUDE_TOOL = {"name": "weather", "input_schema": WEATHER_PARAMETERS}
CLAUDE_HEADERS = {"anthropic-version": "2023-06-01"}
SEARCH = {"type": "web_search_20250305", "name": "web_search"}


def members(union: Any, data: Any) -> list[type[BaseModel]]:
    """The models of an SDK's union (of items, of events) whose type is `data`'s: validating
    against the whole union reports every member's errors. More than one for a message (the
    input's shape and the output's)."""
    while typing.get_origin(union) is typing.Annotated:
        union = typing.get_args(union)[0]
    found = [
        model
        for model in typing.get_args(union)
        if "type" in model.model_fields
        and data.get("type") in typing.get_args(model.model_fields["type"].annotation)
    ]
    assert found, f"no member of {union} has the type {data.get('type')!r}"
    return found


def conforms(kind: Any, data: Any) -> None:
    """`data` validates as `kind` (a model), or as one of the union `kind`'s models."""
    candidates: list[type[BaseModel]] = [kind] if isinstance(kind, type) else members(kind, data)
    errors: list[str] = []
    for model in candidates:
        try:
            model.model_validate(data)
        except ValidationError as exc:
            errors.append(str(exc))
        else:
            return
    names = " or ".join(model.__name__ for model in candidates)
    raise AssertionError(f"not a valid {names}: {json.dumps(data)}\n" + "\n".join(errors))


def events(response: httpx.Response) -> list[dict[str, Any]]:
    """A stream's JSON events; each named event's name is its type."""
    assert response.status_code == 200, response.text
    found: list[dict[str, Any]] = []
    name = None
    for line in response.text.splitlines():
        if line.startswith("event: "):
            name = line.removeprefix("event: ")
        elif line.startswith("data: ") and line != "data: [DONE]":
            event = json.loads(line.removeprefix("data: "))
            assert name in (None, event.get("type")), f"event {name} carries {event.get('type')}"
            found.append(event)
            name = None
    return found


def ok(response: httpx.Response) -> Any:
    assert response.status_code == 200, response.text
    return response.json()


@pytest.fixture
def http(
    database_url: str, upstream: ScriptedUpstream, upstream_api: str
) -> Iterator[httpx.Client]:
    """Raw HTTP to a gateway whose upstream speaks `upstream_api`: it calls the tool when it
    is offered one and the request has no tool result yet, else answers, with a reasoning
    item (Responses) or a thinking block (Messages) first."""

    def answering(request: dict[str, Any]) -> Reply:
        answered = "tool" in json.dumps(request.get("messages") or request.get("input") or "")
        if request.get("tools") and not answered:
            return Reply(None, tool_calls=[tool_call("weather", {"city": "Paris"})], thinking="h")
        return Reply("Noted.", reasoning="sealed", thinking="Hmm.", cached_tokens=3)

    upstream.responder = answering
    settings = settings_for(database_url, upstream, upstream_api=upstream_api)
    with LiveServer(create_app(settings)) as live:
        tenant = f"t-shapes-{uuid.uuid4().hex}"  # a test's own: PostgreSQL is every test's
        secret = create_key(database_url, tenant, "tests").secret
        headers = {"Authorization": f"Bearer {secret}", "x-api-key": secret}
        with httpx.Client(base_url=live.url, headers=headers, timeout=10) as client:
            yield client


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("tools", [[], [CHAT_TOOL]])
def test_chat_completions(http: httpx.Client, stream: bool, tools: list[Any]) -> None:
    body: dict[str, Any] = {
        "model": "answer-model",
        "messages": [{"role": "user", "content": "Hi"}],
    }
    if tools:
        body["tools"] = tools
    if stream:
        body |= {"stream": True, "stream_options": {"include_usage": True}}
        for event in events(http.post("/v1/chat/completions", json=body)):
            conforms(chat.ChatCompletionChunk, event)
    else:
        conforms(chat.ChatCompletion, ok(http.post("/v1/chat/completions", json=body)))


def test_stored_chat_completions(http: httpx.Client) -> None:
    body = {"model": "answer-model", "messages": [{"role": "user", "content": "Hi"}]}
    made = ok(http.post("/v1/chat/completions", json={**body, "store": True}))
    path = f"/v1/chat/completions/{made['id']}"
    conforms(chat.ChatCompletion, ok(http.get(path)))
    conforms(chat.ChatCompletion, ok(http.post(path, json={"metadata": {"k": "v"}})))
    listed = ok(http.get("/v1/chat/completions", params={"metadata[k]": "v"}))
    assert [c["id"] for c in listed["data"]] == [made["id"]]
    for completion in listed["data"]:
        conforms(chat.ChatCompletion, completion)
    messages = ok(http.get(f"{path}/messages"))
    assert [(m["id"], m["role"], m["content"]) for m in messages["data"]] == [
        (f"{made['id']}-0", "user", "Hi")
    ]
    conforms(chat.ChatCompletionDeleted, ok(http.delete(path)))


def test_responses_and_their_items(http: httpx.Client) -> None:
    first = ok(http.post("/v1/responses", json={"model": "answer-model", "input": "Hi"}))
    conforms(responses.Response, first)
    called = ok(
        http.post(
            "/v1/responses",
            json={"model": "answer-model", "input": "Weather?", "tools": [RESPONSES_TOOL]},
        )
    )
    conforms(responses.Response, called)
    call = next(item for item in called["output"] if item["type"] == "function_call")
    result = {"type": "function_call_output", "call_id": call["call_id"], "output": "sunny"}
    answered = ok(
        http.post(
            "/v1/responses",
            json={"model": "answer-model", "previous_response_id": called["id"], "input": [result]},
        )
    )
    conforms(responses.Response, answered)
    conforms(responses.Response, ok(http.get(f"/v1/responses/{answered['id']}")))
    page = ok(http.get(f"/v1/responses/{answered['id']}/input_items"))
    conforms(responses.ResponseItemList, {**page, "data": []})
    assert [item["type"] for item in page["data"]] == ["function_call_output"]
    for item in page["data"]:
        conforms(responses.ResponseItem, item)
    counted = ok(
        http.post(
            "/v1/responses/input_tokens",
            json={"model": "answer-model", "previous_response_id": answered["id"]},
        )
    )
    conforms(responses.InputTokenCountResponse, counted)


@pytest.mark.parametrize("tools", [[], [RESPONSES_TOOL]])
def test_responses_stream(http: httpx.Client, tools: list[Any]) -> None:
    body = {"model": "answer-model", "input": "Weather?", "stream": True, "tools": tools}
    streamed = events(http.post("/v1/responses", json=body))
    assert streamed[-1]["type"] == "response.completed"
    for event in streamed:
        conforms(responses.ResponseStreamEvent, event)


def test_conversations_and_their_items(http: httpx.Client) -> None:
    """Items a client adds (a message, a function call and its output, a custom tool's call
    and output) are listed in the shapes the SDK reads back, status and id included."""
    added = [
        {"type": "message", "role": "user", "content": "Hello"},
        {"type": "function_call", "call_id": "c1", "name": "weather", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": "sunny"},
        {"type": "custom_tool_call", "call_id": "c2", "name": "grep", "input": "x"},
        {"type": "custom_tool_call_output", "call_id": "c2", "output": "found"},
        {"role": "assistant", "content": "It is sunny."},
    ]
    created = ok(http.post("/v1/conversations", json={"items": added, "metadata": {"a": "b"}}))
    conforms(conversations.Conversation, created)
    path = f"/v1/conversations/{created['id']}"
    answered = ok(
        http.post(
            "/v1/responses",
            json={"model": "answer-model", "input": "And?", "conversation": created["id"]},
        )
    )
    conforms(responses.Response, answered)
    conforms(conversations.Conversation, ok(http.get(path)))
    conforms(conversations.Conversation, ok(http.post(path, json={"metadata": {"c": "d"}})))
    more = ok(http.post(f"{path}/items", json={"items": [{"role": "user", "content": "More"}]}))
    conforms(conversations.ConversationItemList, {**more, "data": []})
    page = ok(http.get(f"{path}/items", params={"order": "asc"}))
    conforms(conversations.ConversationItemList, {**page, "data": []})
    assert len(page["data"]) == len(added) + 3  # the question, its answer, "More"
    for item in page["data"] + more["data"]:
        conforms(conversations.ConversationItem, item)
        conforms(responses.ResponseItem, item)
    for item in page["data"]:
        conforms(conversations.ConversationItem, ok(http.get(f"{path}/items/{item['id']}")))
    conforms(conversations.Conversation, ok(http.delete(f"{path}/items/{page['data'][0]['id']}")))
    conforms(conversations.ConversationDeletedResource, ok(http.delete(path)))


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("tools", [[], [CLAUDE_TOOL]])
def test_messages(http: httpx.Client, stream: bool, tools: list[Any]) -> None:
    body: dict[str, Any] = {
        "model": "answer-model",
        "max_tokens": 100,
        "messages": [{"role": "user", "content": "Hi"}],
        "tools": tools,
        "stream": stream,
    }
    answer = http.post("/v1/messages", json=body, headers=CLAUDE_HEADERS)
    if not stream:
        conforms(claude.Message, ok(answer))
        return
    streamed = events(answer)
    assert [e["type"] for e in streamed[:2]] == ["message_start", "ping"]  # a ping: no model
    for event in streamed[2:]:
        conforms(claude.RawMessageStreamEvent, event)
    conforms(claude.RawMessageStreamEvent, streamed[0])


def test_counts_models_and_errors(http: httpx.Client) -> None:
    hello = [{"role": "user", "content": "Hi"}]
    counted = http.post(
        "/v1/messages/count_tokens",
        json={"model": "answer-model", "messages": hello},
        headers=CLAUDE_HEADERS,
    )
    conforms(claude.MessageTokensCount, ok(counted))
    for model in ok(http.get("/v1/models"))["data"]:
        conforms(oai.Model, model)
    for messages, status in (([], 422), ([{"role": "assistant", "content": "Hi"}], 400)):
        body = {"model": "answer-model", "messages": messages}
        refused = http.post("/v1/chat/completions", json=body)
        assert refused.status_code == status
        conforms(oai.ErrorObject, refused.json()["error"])
    missing = http.get("/v1/responses/resp_missing")
    assert missing.status_code == 404
    conforms(oai.ErrorObject, missing.json()["error"])
    bad = http.post(
        "/v1/messages",
        json={"model": "answer-model", "max_tokens": 5, "messages": []},
        headers=CLAUDE_HEADERS,
    )
    assert bad.status_code == 422  # messages: at least one
    conforms(claude.ErrorResponse, bad.json())
    unserved = http.post(
        "/v1/messages",
        json={"model": "answer-model", "max_tokens": 5, "messages": hello, "tools": [SEARCH]},
        headers=CLAUDE_HEADERS,
    )
    assert unserved.status_code == 400
    conforms(claude.ErrorResponse, unserved.json())


def test_a_stream_the_upstream_breaks_off_ends_in_each_apis_error_shape(
    http: httpx.Client, upstream: ScriptedUpstream
) -> None:
    # after the first text (past the opening events of each API), before the end
    broken = Reply("A long answer that the upstream never finishes.", drop_after_chunks=7)
    said = [{"role": "user", "content": "Hi"}]
    upstream.push(broken)
    chat_body = {"model": "answer-model", "messages": said, "stream": True}
    last = events(http.post("/v1/chat/completions", json=chat_body))[-1]
    conforms(oai.ErrorObject, last["error"])
    upstream.push(broken)
    responses_body = {"model": "answer-model", "input": "Hi", "stream": True}
    streamed = events(http.post("/v1/responses", json=responses_body))
    assert streamed[-1]["type"] == "response.failed"
    for event in streamed:
        conforms(responses.ResponseStreamEvent, event)
    upstream.push(broken)
    claude_body = {"model": "answer-model", "max_tokens": 100, "messages": said, "stream": True}
    last = events(http.post("/v1/messages", json=claude_body, headers=CLAUDE_HEADERS))[-1]
    conforms(claude.ErrorResponse, last)


def test_a_listed_item_gets_the_status_its_shape_requires_and_the_stored_one_keeps_none() -> None:
    """R25: the status is the listing's; the item as stored is unchanged. An item type whose
    listed shape has no required status (a reasoning item) gets none."""
    stored = {"type": "function_call_output", "call_id": "c1", "output": "sunny"}
    listed = item_with_id(stored, 3, 1)
    conforms(responses.ResponseItem, listed)
    assert listed == {**stored, "id": "fco_wm3_1", "status": "completed"}
    assert "status" not in stored
    reasoning = {"type": "reasoning", "id": "rs_1", "summary": []}
    assert item_with_id(reasoning, 4, 0) == reasoning
