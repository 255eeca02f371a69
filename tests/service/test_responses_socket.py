"""``/v1/responses`` over a WebSocket (the Responses API's WebSocket mode), as the `openai`
SDK's ``responses.connect()`` and the OpenAI Agents SDK's WebSocket transport use it: real
SDKs, real WebSocket connections to the service, the scripted upstream."""

from __future__ import annotations

import asyncio
import json
import threading
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
import websockets
from agents import Agent, RunConfig, Runner
from agents.models.openai_provider import OpenAIProvider

from workingmem.llm.testing import Reply, ScriptedUpstream, tool_call
from workingmem.service import create_app

from .conftest import settings_for
from .live import LiveServer, create_key
from .test_agents_responses import AGENT, EXPECTED_ROLES, assert_memory_of, blocking, threads_of
from .test_agents_responses import client as client  # the fixture: an AsyncOpenAI client
from .test_responses_api import WEATHER, answers, upstream_model
from .test_responses_api import turns as _turns

pytestmark = pytest.mark.asyncio

TERMINAL = ("response.completed", "response.incomplete", "response.failed", "error")


async def events_of(connection: Any) -> list[Any]:
    """The events of one response, through its last (or an ``error`` event)."""
    out = []
    async for event in connection:
        out.append(event)
        if event.type in TERMINAL:
            break
    return out


async def answer(connection: Any, **request: Any) -> Any:
    """The completed response of one ``response.create``."""
    await connection.response.create(model="answer-model", **request)
    last = (await events_of(connection))[-1]
    assert last.type == "response.completed", last
    return last.response


async def test_each_response_create_is_answered_with_the_events_a_post_streams(
    client: openai.AsyncOpenAI, api: httpx.Client
) -> None:
    async with client.responses.connect(extra_headers={"X-Thread-Id": "ws"}) as connection:
        await connection.response.create(model="answer-model", input="My name is Ada.")
        over_socket = await events_of(connection)
        second = await answer(connection, input="What is my name?")
    posted = await client.responses.create(
        model="answer-model",
        input="My name is Ada.",
        stream=True,
        extra_headers={"X-Thread-Id": "post"},
    )
    over_http = [event async for event in posted]
    assert [e.type for e in over_socket] == [e.type for e in over_http]
    assert [e.sequence_number for e in over_socket] == list(range(len(over_socket)))
    first = over_socket[-1].response
    assert first.output_text == "You said: My name is Ada."
    assert second.output_text == "You said: What is my name?"
    stored = await blocking(_turns)(api, "ws")
    assert [m["content"] for m in stored] == [
        "My name is Ada.",
        "You said: My name is Ada.",
        "What is my name?",
        "You said: What is my name?",
    ]
    assert (await client.responses.retrieve(first.id)).output_text == first.output_text


async def test_a_response_not_stored_is_continued_on_its_connection_alone(
    client: openai.AsyncOpenAI, upstream: ScriptedUpstream, api: httpx.Client
) -> None:
    """``store: false`` keeps no response object, yet the connection keeps its newest, as
    OpenAI's connection cache does: a chain of unstored responses is one thread."""
    async with client.responses.connect() as connection:
        first = await answer(connection, input="My name is Ada.", store=False)
        second = await answer(
            connection, input="I live in Lyon.", store=False, previous_response_id=first.id
        )
        third = await answer(
            connection, input="Where do I live?", store=False, previous_response_id=second.id
        )
    assert third.previous_response_id == second.id
    sent = [m["content"] for m in answers(upstream)[-1]["messages"][1:]]
    assert sent[-3:] == ["I live in Lyon.", "You said: I live in Lyon.", "Where do I live?"]
    threads = await threads_of(api)
    assert len(threads) == 1
    assert len(await blocking(_turns)(api, threads[0]["id"])) == 6
    with pytest.raises(openai.NotFoundError):
        await client.responses.retrieve(second.id)
    async with client.responses.connect() as elsewhere:  # another connection never had it
        await elsewhere.response.create(
            model="answer-model", input="And?", previous_response_id=second.id
        )
        (refused,) = await events_of(elsewhere)
    assert refused.type == "error"
    assert refused.status == 404
    assert refused.error.code == "response_not_found"
    assert len(await threads_of(api)) == 1


async def test_a_function_tool_loop_runs_over_one_connection(
    client: openai.AsyncOpenAI, api: httpx.Client
) -> None:
    async with client.responses.connect(extra_headers={"X-Thread-Id": "tools"}) as connection:
        await connection.response.create(
            model="answer-model", input="What is the weather in Lyon?", tools=[WEATHER]
        )
        events = await events_of(connection)
        asked = events[-1].response
        (call,) = [item for item in asked.output if item.type == "function_call"]
        assert call.name == "get_weather"
        assert "response.function_call_arguments.done" in [e.type for e in events]
        done = await answer(
            connection,
            input=[{"type": "function_call_output", "call_id": call.call_id, "output": "sunny"}],
            tools=[WEATHER],
            previous_response_id=asked.id,
        )
    assert done.output_text == "It is sunny there."
    stored = await blocking(_turns)(api, "tools")
    assert [m["role"] for m in stored] == ["user", "assistant", "tool", "assistant"]
    assert stored[1]["tool_calls"][0]["id"] == stored[2]["tool_call_id"] == call.call_id


async def test_a_refused_request_is_an_error_event_and_the_connection_goes_on(
    client: openai.AsyncOpenAI,
    service: LiveServer,
    database_url: str,
    tenant: str,
    api: httpx.Client,
) -> None:
    theirs = await client.responses.create(model="answer-model", input="Mine alone.")
    other = create_key(database_url, f"{tenant}-other").secret
    stranger = openai.AsyncOpenAI(base_url=f"{service.url}/v1", api_key=other)
    async with stranger, stranger.responses.connect() as connection:
        refused = []
        for request in (
            {"input": "Hi", "previous_response_id": theirs.id},  # another tenant's
            {"input": "Hi", "previous_response_id": "resp_missing"},
            {"input": "Hi", "background": True},
            {"input": 5},
        ):
            await connection.response.create(model="answer-model", **request)
            (event,) = await events_of(connection)
            refused.append((event.type, event.status, event.error.code, event.error.param))
        still = await answer(connection, input="Still here?")
        await connection.response.create(model="answer-model", input="Hi", background=True)
        await events_of(connection)  # after the answer before it was counted
    assert refused == [
        ("error", 404, "response_not_found", None),
        ("error", 404, "response_not_found", None),
        ("error", 422, "invalid_request", "background"),  # as a POST: none are served
        ("error", 422, "invalid_request", "input.str"),  # as a POST names it, bodiless
    ]
    assert still.output_text == "You said: Still here?"
    assert len(await threads_of(api)) == 1  # ours; the stranger's thread is its tenant's
    async with httpx.AsyncClient(base_url=service.url) as web:
        metrics = (await web.get("/metrics")).text
    for status, count in (("404", 2), ("422", 3), ("200", 1)):
        series = f'method="WEBSOCKET",route="/v1/responses",status="{status}"'
        assert f"workingmem_http_requests_total{{{series}}} {count}" in metrics


async def test_a_key_the_service_does_not_know_is_refused_at_the_handshake(
    service: LiveServer, key: str
) -> None:
    url = f"ws://127.0.0.1:{service.port}/v1/responses"
    for headers in ({}, {"Authorization": "Bearer wm_unknown"}):
        with pytest.raises(websockets.InvalidStatus) as refused:
            async with websockets.connect(url, additional_headers=headers):
                pass
        assert refused.value.response.status_code == 401
        assert json.loads(refused.value.response.body or b"{}")["error"]["code"] in (
            "missing_api_key",
            "invalid_api_key",
        )


async def test_a_keyless_server_refuses_a_socket_another_sites_page_opens(
    tmp_path: Path, upstream: ScriptedUpstream
) -> None:
    """A browser opens a WebSocket to any site, sending its page's origin and no key: a
    keyless loopback server takes one from its own pages alone, as it takes a write."""
    settings = settings_for(f"sqlite:///{tmp_path / 'memory.db'}", upstream)
    with LiveServer(create_app(settings)) as live:
        url = f"ws://127.0.0.1:{live.port}/v1/responses"
        with pytest.raises(websockets.InvalidStatus) as refused:
            async with websockets.connect(
                url, origin=websockets.Origin("https://attacker.example")
            ):
                pass
        assert refused.value.response.status_code == 403
        assert b"cross_origin" in (refused.value.response.body or b"")
        own = websockets.Origin(f"http://127.0.0.1:{live.port}")
        async with websockets.connect(url, origin=own) as socket:
            await socket.send(json.dumps({"type": "response.create", "input": "Hi"}))
            events = [json.loads(await socket.recv()) for _ in range(2)]
    assert [e["type"] for e in events] == ["response.created", "response.in_progress"]


async def test_lanes_frames_and_a_request_prepared_without_an_answer(
    service: LiveServer, key: str, upstream: ScriptedUpstream, api: httpx.Client
) -> None:
    """Raw frames, as any client sends them: a ``stream_id`` is echoed on every event of its
    response; ``generate: false`` answers nothing, and the request that continues it is sent
    with its instructions and its input first; what is no client event is an error event."""
    upstream.responder = upstream_model
    url = f"ws://127.0.0.1:{service.port}/v1/responses"
    headers = {"Authorization": f"Bearer {key}", "X-Thread-Id": "raw"}

    async def exchange(socket: Any, frame: str | bytes | dict[str, Any]) -> list[dict[str, Any]]:
        await socket.send(json.dumps(frame) if isinstance(frame, dict) else frame)
        out: list[dict[str, Any]] = []
        while not out or out[-1]["type"] not in (*TERMINAL, "response.steer.failed"):
            out.append(json.loads(await socket.recv()))
        return out

    async with websockets.connect(url, additional_headers=headers) as socket:
        warm = await exchange(
            socket,
            {
                "type": "response.create",
                "model": "answer-model",
                "generate": False,
                "instructions": "Answer in French.",
                "input": "My name is Ada.",
            },
        )
        assert [e["type"] for e in warm] == ["response.created", "response.completed"]
        assert warm[-1]["response"]["output"] == []
        laned = await exchange(
            socket,
            {
                "type": "response.create",
                "model": "answer-model",
                "stream_id": "lane-a",
                "previous_response_id": warm[-1]["response"]["id"],
                "input": "What is my name?",
            },
        )
        assert {e.get("stream_id") for e in laned} == {"lane-a"}
        assert laned[-1]["response"]["output"][0]["content"][0]["text"] == (
            "You said: What is my name?"
        )
        system, *said = answers(upstream)[-1]["messages"]
        prepared_on = {  # prepared on the lane's answer, sent as a binary frame
            "type": "response.create",
            "model": "answer-model",
            "generate": False,
            "previous_response_id": laned[-1]["response"]["id"],
            "input": "I live in Lyon.",
        }
        again = await exchange(socket, json.dumps(prepared_on).encode())
        later = await exchange(
            socket,
            {
                "type": "response.create",
                "model": "answer-model",
                "previous_response_id": again[-1]["response"]["id"],
                "input": "Where do I live?",
            },
        )
        missing = await exchange(
            socket,
            {
                "type": "response.create",
                "stream_id": "lane-b",
                "previous_response_id": "resp_missing",
                "input": "Hi",
            },
        )
        bad = [
            await exchange(socket, frame)
            for frame in (
                "[]",
                "{not json",
                '{"type": "session.update"}',
                '{"type": "response.create", "input": "Hi", "stream_id": 5}',
                '{"type": "response.create", "input": "Hi", "generate": "no"}',
            )
        ]
        steered = await exchange(
            socket,
            {"type": "response.steer", "previous_response_id": "resp_x", "input": "faster"},
        )
    assert [(e[0]["type"], e[0]["status"], e[0]["error"]["param"]) for e in bad] == [
        ("error", 400, None),
        ("error", 400, None),
        ("error", 400, "type"),
        ("error", 422, "stream_id"),
        ("error", 422, "generate"),
    ]
    assert steered[0]["error"]["code"] == "steering_not_supported"
    assert steered[0]["steer"]["input"] == "faster"
    assert "Answer in French." in system["content"]
    assert [m["content"] for m in said] == ["My name is Ada.", "What is my name?"]
    assert [e["type"] for e in again] == ["response.created", "response.completed"]
    assert later[-1]["response"]["output"][0]["content"][0]["text"] == "You said: Where do I live?"
    sent = [m["content"] for m in answers(upstream)[-1]["messages"][1:]]
    assert sent[-3:] == ["You said: What is my name?", "I live in Lyon.", "Where do I live?"]
    assert (missing[0]["type"], missing[0]["status"]) == ("error", 404)
    assert missing[0]["stream_id"] == "lane-b"  # an error names its lane too
    stored = await blocking(_turns)(api, "raw")
    assert [m["content"] for m in stored] == [
        "My name is Ada.",
        "What is my name?",
        "You said: What is my name?",
        "I live in Lyon.",
        "Where do I live?",
        "You said: Where do I live?",
    ]


async def test_the_agents_sdk_over_its_websocket_transport(
    client: openai.AsyncOpenAI, upstream: ScriptedUpstream, api: httpx.Client
) -> None:
    """The Agents SDK's own WebSocket transport, chaining its runs by response id (a tool
    round included): one thread, each item once, the model reading the thread's memory."""
    provider = OpenAIProvider(openai_client=client, use_responses_websocket=True)
    run_config = RunConfig(model_provider=provider, tracing_disabled=True)
    agent: Agent[Any] = AGENT
    previous: str | None = None
    try:
        for text in ["My name is Ada.", "What is the weather in Lyon?", "Thanks"]:
            result = await Runner.run(
                agent,
                text,
                previous_response_id=previous,
                auto_previous_response_id=True,
                run_config=run_config,
            )
            previous = result.last_response_id
    finally:
        await provider.aclose()
    assert result.final_output == "You said: Thanks"
    threads = await threads_of(api)
    assert len(threads) == 1
    stored = await blocking(_turns)(api, threads[0]["id"])
    assert [m["role"] for m in stored] == EXPECTED_ROLES
    assert_memory_of(answers(upstream)[-1]["messages"], stored[:-1])


async def test_a_client_that_goes_stops_its_answer_and_no_answer_is_stored(
    service: LiveServer, key: str, upstream: ScriptedUpstream, api: httpx.Client
) -> None:
    """The upstream holds the first answer until the test lets it go; the client closes its
    connection meanwhile. A second request on the thread gets the thread's lock only once the
    first is stopped (the upstream sees it then): no answer to the first is ever stored."""
    reached, second, release = threading.Event(), threading.Event(), threading.Event()

    def holding(request: dict[str, Any]) -> Reply:
        last = request["messages"][-1]
        if last.get("content") == "Hold on.":
            reached.set()
            release.wait(10)
        elif last.get("content") == "Again.":
            second.set()
        return upstream_model(request)

    upstream.responder = holding
    url = f"ws://127.0.0.1:{service.port}/v1/responses"
    headers = {"Authorization": f"Bearer {key}", "X-Thread-Id": "gone"}
    create = {"type": "response.create", "model": "answer-model"}
    try:
        async with websockets.connect(url, additional_headers=headers) as socket:
            await socket.send(json.dumps({**create, "input": "Hold on."}))
            assert await asyncio.to_thread(reached.wait, 10)
        async with websockets.connect(url, additional_headers=headers) as socket:
            await socket.send(json.dumps({**create, "input": "Again."}))
            assert await asyncio.to_thread(second.wait, 10)
            release.set()
            while (event := json.loads(await socket.recv()))["type"] not in TERMINAL:
                pass
    finally:
        release.set()
    assert event["type"] == "response.completed", event
    stored = await blocking(_turns)(api, "gone")
    # the first input was stored as the thread's opening, as a POST's is; its answer never
    assert [m["content"] for m in stored] == ["Hold on.", "Again.", "You said: Again."]


async def test_the_gateways_own_memory_calls_never_reach_the_socket(
    client: openai.AsyncOpenAI, upstream: ScriptedUpstream, api: httpx.Client
) -> None:
    """R30 over the socket: the model saves to the working memory in a round the gateway runs;
    none of the events shows that call, the response holds the answer alone."""
    upstream.push(
        Reply(
            None,
            tool_calls=[tool_call("update_working_memory", {"content": "# User\n- Name: Ada\n"})],
        ),
        Reply("Saved."),
    )
    async with client.responses.connect(extra_headers={"X-Thread-Id": "own"}) as connection:
        await connection.response.create(model="answer-model", input="Remember: I am Ada.")
        events = await events_of(connection)
    assert "update_working_memory" not in json.dumps([e.model_dump() for e in events])
    done = events[-1].response
    assert [item.type for item in done.output] == ["message"]
    assert done.output_text == "Saved."
    assert answers(upstream)[-1]["messages"][-1]["role"] == "tool"  # the round ran here
    memory = await blocking(api.get)("/v1/threads/own/memory")
    assert memory.json()["working_memory"]["content"] == "# User\n- Name: Ada\n"
