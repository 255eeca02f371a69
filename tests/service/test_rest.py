"""The REST API in process (httpx's ASGI transport, a gateway the test built), on SQLite and
PostgreSQL: the working-memory endpoints, and a clear 4xx for every malformed request."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any
from unittest.mock import ANY

import httpx
import pytest

import workingmem as wm
from workingmem.llm import OpenAIClient
from workingmem.llm.testing import Reply, ScriptedUpstream
from workingmem.service import ServiceSettings, create_app
from workingmem.stores.keys import ApiKeyStore

from .conftest import CONFIG, TEMPLATE

MAX_BODY = 64 * 1024


async def rest_client(
    store: wm.Store,
    upstream: ScriptedUpstream,
    tenant: str,
    agent_memory: wm.AgentMemoryConfig | None,
) -> AsyncIterator[httpx.AsyncClient]:
    assert isinstance(store, ApiKeyStore)
    created = await store.create_api_key(tenant_id=tenant)
    async with (
        OpenAIClient(base_url=upstream.base_url, max_retries=0, timeout=10) as llm,
        wm.Gateway(store=store, llm=llm, config=CONFIG, agent_memory=agent_memory) as gateway,
    ):
        app = create_app(ServiceSettings(max_body_bytes=MAX_BODY), gateway=gateway)
        async with httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app),
            base_url="http://127.0.0.1",
            headers={"Authorization": f"Bearer {created.secret}"},
        ) as client:
            yield client


@pytest.fixture
async def api(
    store: wm.Store, upstream: ScriptedUpstream, tenant: str
) -> AsyncIterator[httpx.AsyncClient]:
    """A server whose working memory is per conversation, with a template."""
    async for client in rest_client(
        store, upstream, tenant, wm.AgentMemoryConfig(template=TEMPLATE)
    ):
        yield client


def assert_openai_error(response: httpx.Response, status: int) -> dict[str, Any]:
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert error["message"]
    return dict(error)


async def test_a_conversations_working_memory_is_read_written_and_cleared(
    api: httpx.AsyncClient,
) -> None:
    empty = await api.get("/v1/threads/th/working-memory")
    assert assert_openai_error(empty, 404)["code"] == "working_memory_empty"
    put = await api.put("/v1/threads/th/working-memory", json={"content": "# User\n- Name: Ada\n"})
    assert put.status_code == 200, put.text
    assert (put.json()["version"], put.json()["changed"]) == (1, True)
    stale = await api.put(
        "/v1/threads/th/working-memory", json={"content": "# User\n", "expected_version": 0}
    )
    assert assert_openai_error(stale, 409)["code"] == "version_conflict"
    got = await api.get("/v1/threads/th/working-memory")
    assert got.json()["content"] == "# User\n- Name: Ada\n"
    cleared = await api.delete("/v1/threads/th/working-memory")
    assert cleared.json() == {
        "scope": "conversation",
        "owner_id": "th",
        "content": None,
        "version": 2,
        "updated_at": cleared.json()["updated_at"],
        "format": "markdown",
    }
    # deleted, as HTTP means: a read is a 404 (the versions stay for a roll back)
    assert_openai_error(await api.get("/v1/threads/th/working-memory"), 404)
    erased = await api.delete("/v1/threads/th/working-memory", params={"erase_history": True})
    assert erased.json()["version"] == 0


async def test_the_user_endpoints_say_the_scope_is_per_conversation(
    api: httpx.AsyncClient,
) -> None:
    """Not served here (the OpenAPI document omits them): a 404 that names the right path."""
    response = await api.get("/v1/users/u1/working-memory")
    error = assert_openai_error(response, 404)
    assert error["code"] == "working_memory_scope"
    assert "/v1/threads/{thread_id}/working-memory" in error["message"]


async def test_a_users_working_memory_when_the_scope_is_user(
    store: wm.Store, upstream: ScriptedUpstream, tenant: str
) -> None:
    config = wm.AgentMemoryConfig(scope="user")
    async for api in rest_client(store, upstream, tenant, config):
        put = await api.put("/v1/users/u1/working-memory", json={"content": "likes tea"})
        assert put.json()["owner_id"] == "u1"
        got = await api.get("/v1/users/u1/working-memory")
        assert (got.json()["scope"], got.json()["content"]) == ("user", "likes tea")
        chat = await api.post(
            "/v1/chat/completions",
            headers={"X-Thread-Id": "th", "X-User-Id": "u1"},
            json={"messages": [{"role": "user", "content": "hi"}]},
        )
        assert chat.status_code == 200, chat.text
        memory = (await api.get("/v1/threads/th/memory")).json()
        assert memory["working_memory"]["content"] == "likes tea"
        wrong = await api.get("/v1/threads/th/working-memory")
        assert assert_openai_error(wrong, 404)["code"] == "working_memory_scope"


async def test_working_memory_endpoints_are_404_when_none_is_configured(
    store: wm.Store, upstream: ScriptedUpstream, tenant: str
) -> None:
    async for api in rest_client(store, upstream, tenant, None):
        for path in ("/v1/threads/th/working-memory", "/v1/users/u/working-memory"):
            error = assert_openai_error(await api.get(path), 404)
            assert error["code"] == "working_memory_not_configured"


LONG = "x" * 300
CHAT = "/v1/chat/completions"
HI = {"messages": [{"role": "user", "content": "hi"}]}
THREAD = {"X-Thread-Id": "th"}


@pytest.mark.parametrize(
    ("method", "path", "options", "status"),
    [
        pytest.param("GET", f"/v1/threads/{LONG}/memory", {}, 400, id="id-over-256"),
        pytest.param("GET", "/v1/threads/a%01b/memory", {}, 400, id="control-character"),
        pytest.param("GET", "/v1/threads//memory", {}, 400, id="empty-id"),
        pytest.param("GET", "/v1/threads?limit=100000", {}, 422, id="huge-limit"),
        pytest.param("GET", "/v1/threads?limit=abc", {}, 422, id="limit-not-a-number"),
        pytest.param("GET", "/v1/threads?offset=-1", {}, 422, id="negative-offset"),
        pytest.param("GET", f"/v1/threads?offset=1{'0' * 30}", {}, 422, id="offset-overflow"),
        pytest.param("GET", "/v1/threads/th/messages?after=-5", {}, 422, id="negative-after"),
        pytest.param("GET", "/v1/threads/nope/memory", {}, 404, id="unknown-thread"),
        pytest.param("POST", "/v1/threads/nope/memory/reset", {}, 404, id="reset-unknown-thread"),
        pytest.param("DELETE", "/v1/threads/nope/memory", {}, 404, id="old-reset-unknown"),
        pytest.param("GET", "/nowhere", {}, 404, id="unknown-route"),
        pytest.param("PATCH", "/v1/threads", {}, 405, id="wrong-method"),
        pytest.param("POST", CHAT, {"content": b"not json", "headers": THREAD}, 422, id="not-json"),
        pytest.param("POST", CHAT, {"json": [], "headers": THREAD}, 422, id="json-not-object"),
        pytest.param("POST", CHAT, {"json": {"messages": "hi"}, "headers": THREAD}, 422, id="str"),
        pytest.param("POST", CHAT, {"json": {"messages": []}, "headers": THREAD}, 422, id="none"),
        pytest.param(
            "POST",
            CHAT,
            {"json": {"messages": [{"role": "user", "content": 5}]}, "headers": THREAD},
            422,
            id="content-wrong-type",
        ),
        pytest.param(
            "POST",
            CHAT,
            {"json": {"messages": [{"role": "assistant", "content": "x"}]}, "headers": THREAD},
            400,
            id="last-not-user",
        ),
        pytest.param(
            "POST",
            CHAT,
            {"json": {"messages": [{"role": "user", "content": ["x"]}]}, "headers": THREAD},
            422,
            id="content-part-not-object",
        ),
        pytest.param(
            "POST",
            CHAT,
            {
                "json": {"messages": [{"role": "tool", "content": "x", "tool_call_id": "c"}]},
                "headers": THREAD,
            },
            400,
            id="tool-turn",
        ),
        pytest.param(
            "POST",
            CHAT,
            {
                "json": {
                    "messages": [
                        {"role": "system", "content": "first"},
                        {"role": "developer", "content": "late"},
                    ]
                },
                "headers": THREAD,
            },
            400,
            id="instructions-alone",
        ),
        pytest.param(
            "POST", CHAT, {"json": {**HI, "user": "u\x00"}, "headers": THREAD}, 400, id="bad-user"
        ),
        pytest.param("POST", CHAT, {"json": HI, "headers": {"X-Thread-Id": LONG}}, 400, id="long"),
        pytest.param(
            "POST", CHAT, {"json": HI, "headers": {**THREAD, "X-Profile": "nope"}}, 400, id="prof"
        ),
        pytest.param(
            "POST",
            CHAT,
            {"json": HI, "headers": {**THREAD, "X-Workingmem-History": "all"}},
            422,
            id="history",
        ),
        pytest.param(
            "POST", CHAT, {"json": {**HI, "model": "m" * 300}, "headers": THREAD}, 422, id="model"
        ),
        pytest.param(
            "POST", CHAT, {"content": b"x" * (MAX_BODY + 1), "headers": THREAD}, 413, id="too-big"
        ),
        pytest.param(
            "POST",
            CHAT,
            {"content": b"[" * 10_000 + b"]" * 10_000, "headers": THREAD},
            422,
            id="deeply-nested",
        ),
        pytest.param(
            "PUT", "/v1/threads/th/working-memory", {"json": {"content": 5}}, 422, id="wm-type"
        ),
        pytest.param(
            "PUT",
            "/v1/threads/th/working-memory",
            {"json": {"content": "x" * 9_000}},
            400,
            id="wm-over-cap",
        ),
        pytest.param(
            "PUT", "/v1/threads/th/working-memory", {"content": b"{"}, 422, id="wm-not-json"
        ),
    ],
)
async def test_a_malformed_request_is_a_4xx_with_a_reason(
    api: httpx.AsyncClient, method: str, path: str, options: dict[str, Any], status: int
) -> None:
    response = await api.request(method, path, **options)
    assert_openai_error(response, status)


async def test_every_route_the_model_answers_publishes_the_ask_headers_it_reads(
    api: httpx.AsyncClient,
) -> None:
    """The ask headers are read from the request, not declared one by one, so the document
    states them apart: each route that reads them must publish all four."""
    document = (await api.get("/openapi.json")).json()
    for path in (
        "/v1/chat/completions",
        "/v1/responses",
        "/v1/messages",
        "/v1/messages/count_tokens",
    ):
        published = {
            p["name"]: p["schema"]
            for p in document["paths"][path]["post"]["parameters"]
            if p["in"] == "header"
        }
        assert published["X-Workingmem-History"]["enum"] == ["memory", "client"], path
        assert published["X-Profile"]["enum"] == ["default"], path
        for name in ("X-Thread-Id", "X-User-Id"):
            assert published[name]["maxLength"] == 256, (path, name)


async def test_an_unknown_history_header_is_refused_naming_it_and_nothing_is_stored(
    api: httpx.AsyncClient,
) -> None:
    response = await api.post(
        CHAT, headers={"X-Thread-Id": "hist", "X-Workingmem-History": "Client"}, json=HI
    )
    assert assert_openai_error(response, 422)["param"] == "header.X-Workingmem-History"
    assert (await api.get("/v1/threads/hist/messages")).status_code == 404
    for history in ("memory", "client"):
        answer = await api.post(
            CHAT, headers={"X-Thread-Id": "hist", "X-Workingmem-History": history}, json=HI
        )
        assert answer.status_code == 200, answer.text


async def test_a_thread_id_may_hold_slashes_and_unicode(api: httpx.AsyncClient) -> None:
    thread = "org/42/été ✓"
    response = await api.post(CHAT, headers={b"X-Thread-Id": thread.encode()}, json=HI)
    assert response.status_code == 200, response.text
    assert response.headers["x-thread-id"] == thread
    memory = await api.get(f"/v1/threads/{httpx.URL(thread)}/memory")
    assert memory.json()["thread_id"] == thread


async def test_a_stream_broken_off_upstream_ends_with_an_error_event_and_stores_no_answer(
    api: httpx.AsyncClient, upstream: ScriptedUpstream
) -> None:
    upstream.push(Reply("a long answer that never finishes", drop_after_chunks=3))
    response = await api.post(
        CHAT, headers=THREAD, json={**HI, "stream": True, "stream_options": {"include_usage": True}}
    )
    assert response.status_code == 200
    events = [line.removeprefix("data: ") for line in response.text.split("\n\n") if line]
    assert json.loads(events[0])["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    error = json.loads(events[-1])["error"]
    assert error["type"] == "upstream_error"
    assert "[DONE]" not in events
    stored = (await api.get("/v1/threads/th/messages")).json()["data"]
    assert [m["role"] for m in stored] == ["user"]


async def test_a_stream_without_usage_asked_has_no_usage_chunk(api: httpx.AsyncClient) -> None:
    response = await api.post(CHAT, headers=THREAD, json={**HI, "stream": True})
    events = [line.removeprefix("data: ") for line in response.text.split("\n\n") if line]
    assert events[-1] == "[DONE]"
    chunks = [json.loads(event) for event in events[:-1]]
    assert all("usage" not in chunk for chunk in chunks)
    assert chunks[-1]["choices"][0]["finish_reason"] == "stop"
    assert "".join(c["choices"][0]["delta"].get("content", "") for c in chunks) == "You said: hi"


async def test_deleting_a_thread_removes_it_and_nothing_else(api: httpx.AsyncClient) -> None:
    await api.put("/v1/threads/a/b/working-memory", json={"content": "# User\n- Name: Ada\n"})
    await api.post(
        "/v1/chat/completions",
        headers={"X-Thread-Id": "a/b"},
        json={"model": "answer-model", "messages": [{"role": "user", "content": "hi"}]},
    )
    await api.post(
        "/v1/chat/completions",
        headers={"X-Thread-Id": "kept"},
        json={"model": "answer-model", "messages": [{"role": "user", "content": "hi"}]},
    )
    deleted = await api.delete("/v1/threads/a/b")
    assert deleted.status_code == 204, deleted.text
    assert_openai_error(await api.get("/v1/threads/a/b/memory"), 404)
    assert_openai_error(await api.get("/v1/threads/a/b/working-memory"), 404)
    assert (await api.get("/v1/threads/kept/memory")).status_code == 200
    assert_openai_error(await api.delete("/v1/threads/a/b"), 404)  # already gone
    # The other DELETEs under a thread still reach their own routes (the reset's old spelling).
    assert (await api.delete("/v1/threads/kept/memory")).status_code == 200
    assert (await api.get("/v1/threads/kept/memory")).status_code == 200


@pytest.mark.parametrize(
    ("header", "path"),
    [("x/../../threads/victim", None), (None, "/v1/threads/victim%20/memory")],
)
async def test_an_id_that_would_name_another_thread_is_a_400_everywhere(
    api: httpx.AsyncClient, header: str | None, path: str | None
) -> None:
    if header is not None:
        response = await api.post(
            "/v1/chat/completions",
            headers={"X-Thread-Id": header},
            json={"model": "answer-model", "messages": [{"role": "user", "content": "hi"}]},
        )
    else:
        assert path is not None
        response = await api.delete(path)
    assert assert_openai_error(response, 400)["type"] == "invalid_request_error"


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("max_tokens", -1),
        ("max_tokens", 10**12),
        ("temperature", "hot"),
        ("stream", "yes"),
        ("top_p", 3),
    ],
)
async def test_an_invalid_parameter_is_refused_naming_it_and_nothing_is_stored(
    api: httpx.AsyncClient, field: str, value: object
) -> None:
    response = await api.post(
        "/v1/chat/completions",
        headers={"X-Thread-Id": "params"},
        json={
            "model": "answer-model",
            "messages": [{"role": "user", "content": "hi"}],
            field: value,
        },
    )
    assert assert_openai_error(response, 422)["param"] == f"body.{field}"
    assert (await api.get("/v1/threads/params/messages")).status_code == 404  # nothing stored


async def test_anthropics_api_answers_errors_in_its_own_shape(api: httpx.AsyncClient) -> None:
    """Under /v1/messages every refusal, the body cap's included, has Anthropic's shape."""
    for answer, status, kind in (
        (await api.post("/v1/messages", content=b"x" * (MAX_BODY + 1)), 413, "request_too_large"),
        (await api.post("/v1/messages", json={"model": "m"}), 422, "invalid_request_error"),
        (
            await api.post(
                "/v1/messages", json={"model": "m"}, headers={"Authorization": "Bearer wm_no"}
            ),
            401,
            "authentication_error",
        ),
    ):
        assert answer.status_code == status, answer.text
        assert answer.json() == {"type": "error", "error": {"type": kind, "message": ANY}}
    assert_openai_error(await api.post("/v1/chat/completions", content=b"x" * (MAX_BODY + 1)), 413)


@pytest.mark.parametrize(
    ("path", "body_user"),
    [
        (CHAT, {"user": "from-body"}),
        ("/v1/responses", {"user": "from-body"}),
        ("/v1/messages", {"metadata": {"user_id": "from-body"}, "max_tokens": 100}),
    ],
    ids=["chat", "responses", "messages"],
)
async def test_the_user_is_x_user_id_else_the_protocols_own_field(
    api: httpx.AsyncClient, path: str, body_user: dict[str, Any]
) -> None:
    """One rule on every API: the gateway's header first, then the body's own field."""
    said = (
        {"input": "hi"}
        if path == "/v1/responses"
        else {"messages": [{"role": "user", "content": "hi"}]}
    )
    for thread, headers, expected in [
        ("both", {"X-User-Id": "from-header"}, "from-header"),
        ("body", {}, "from-body"),
    ]:
        answer = await api.post(
            path,
            headers={"X-Thread-Id": thread, **headers},
            json={"model": "answer-model", **said, **body_user},
        )
        assert answer.status_code == 200, answer.text
        listed = {t["id"]: t["user_id"] for t in (await api.get("/v1/threads")).json()["data"]}
        assert listed[thread] == expected
