"""The service end to end: the real `openai` SDK against uvicorn on 127.0.0.1, a real
OpenAI-compatible upstream behind it, on SQLite and PostgreSQL."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TypeVar

import httpx
import openai
import pytest

from workingmem.llm.testing import Reply, ScriptedUpstream, StatusError

from .conftest import TEMPLATE
from .live import LiveServer, create_key, revoke_key

T = TypeVar("T")


def sdk(live: LiveServer, key: str, thread_id: str | None = "th") -> openai.OpenAI:
    headers = {"X-Thread-Id": thread_id} if thread_id else {}
    return openai.OpenAI(
        base_url=f"{live.url}/v1", api_key=key, max_retries=0, timeout=10, default_headers=headers
    )


def ask(client: openai.OpenAI, text: str, **kwargs: Any) -> str:
    answer = client.chat.completions.create(
        model="answer-model", messages=[{"role": "user", "content": text}], **kwargs
    )
    return answer.choices[0].message.content or ""


def answers(upstream: ScriptedUpstream) -> list[dict[str, Any]]:
    return [r for r in upstream.requests if r.get("model") != "cheap-model"]


def until(check: Callable[[], T], seconds: float = 10.0) -> T:
    """Polls `check` until it returns something truthy (the background update is async)."""
    deadline = time.monotonic() + seconds
    while True:
        found = check()
        if found or time.monotonic() > deadline:
            return found
        time.sleep(0.02)


def test_the_model_gets_the_history_when_only_the_new_message_is_sent(
    service: LiveServer, key: str, upstream: ScriptedUpstream
) -> None:
    with sdk(service, key) as client:
        raw = client.chat.completions.with_raw_response.create(
            model="answer-model", messages=[{"role": "user", "content": "I'm Ada"}]
        )
        first = raw.parse()
        assert ask(client, "who am I?") == "You said: who am I?"
    assert raw.headers["x-thread-id"] == "th"
    assert first.id.startswith("chatcmpl-")
    assert first.object == "chat.completion"
    assert first.model == "answer-model"
    assert first.choices[0].message.role == "assistant"
    assert first.choices[0].message.content == "You said: I'm Ada"
    assert first.choices[0].finish_reason == "stop"
    assert first.usage is not None
    assert (first.usage.prompt_tokens, first.usage.completion_tokens) == (100, 10)
    assert first.usage.total_tokens == 110
    second = answers(upstream)[-1]["messages"]
    assert [(m["role"], m["content"]) for m in second[1:]] == [
        ("user", "I'm Ada"),
        ("assistant", "You said: I'm Ada"),
        ("user", "who am I?"),
    ]


def test_streaming_gives_openai_chunks_and_stores_the_answer(
    service: LiveServer, key: str, api: httpx.Client
) -> None:
    with sdk(service, key) as client:
        stream = client.chat.completions.create(
            model="answer-model",
            messages=[{"role": "user", "content": "tell me a long story please"}],
            stream=True,
            stream_options={"include_usage": True},
        )
        chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "You said: tell me a long story please"
    assert chunks[0].choices[0].delta.role == "assistant"
    assert len({c.id for c in chunks}) == 1
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    assert chunks[-1].choices == []
    assert chunks[-1].usage is not None
    assert chunks[-1].usage.total_tokens > 0
    stored = api.get("/v1/threads/th/messages").json()["data"]
    assert [(m["role"], m["content"]) for m in stored] == [
        ("user", "tell me a long story please"),
        ("assistant", text),
    ]


def test_the_memory_endpoints_show_the_summary_and_a_reset_forgets_it(
    service: LiveServer, key: str, api: httpx.Client
) -> None:
    with sdk(service, key) as client:
        ask(client, "please remember: I am Ada", user="ada")
        ask(client, "and I live in Lyon", user="ada")

    def summarized() -> dict[str, Any] | None:
        memory = api.get("/v1/threads/th/memory").json()
        return memory if memory["summary"] else None

    memory = until(summarized)
    assert memory is not None, "the background update never wrote a summary"
    assert memory["strategy"] == "SUMMARY_BUFFER"
    assert memory["user_id"] == "ada"
    assert memory["turn_count"] == memory["covered_turns"] == 4
    assert memory["facts"] == [
        {"text": "please remember: I am Ada", "first_turn": 1, "last_turn": 1}
    ]
    assert "About this conversation" not in memory["notes"]
    assert "please remember: I am Ada" in memory["notes"]
    assert memory["summary_versions"][0]["version"] == memory["state_version"]
    assert 0 < memory["window_tokens"] <= memory["budget_tokens"]
    assert memory["working_memory"]["scope"] == "conversation"

    reset = api.post("/v1/threads/th/memory/reset")
    assert reset.status_code == 200, reset.text
    assert reset.json() == {"thread_id": "th", "reset": True, "working_memory_cleared": False}
    after = api.get("/v1/threads/th/memory").json()
    assert (after["summary"], after["facts"], after["notes"]) == ("", [], "")
    assert after["covered_turns"] == 4
    messages = api.get("/v1/threads/th/messages", params={"limit": 3}).json()
    assert [m["seq"] for m in messages["data"]] == [1, 2, 3]
    assert messages["has_more"]
    assert messages["next_after"] == 3
    rest = api.get("/v1/threads/th/messages", params={"after": 3}).json()
    assert [m["seq"] for m in rest["data"]] == [4]
    assert not rest["has_more"]
    assert rest["next_after"] is None
    threads = api.get("/v1/threads").json()
    assert [t["id"] for t in threads["data"]] == ["th"]


def test_two_tenants_with_the_same_thread_id_each_see_only_their_own(
    service: LiveServer, database_url: str, tenant: str, upstream: ScriptedUpstream
) -> None:
    keys = [create_key(database_url, f"{tenant}-{name}").secret for name in ("a", "b")]
    for key, text in zip(keys, ("I am A", "I am B"), strict=True):
        with sdk(service, key, thread_id="shared") as client:
            ask(client, text)
    with sdk(service, keys[0], thread_id="shared") as client:
        ask(client, "who am I?")
    history = answers(upstream)[-1]["messages"]
    assert "I am B" not in str(history)
    assert "I am A" in str(history)
    for key, mine in zip(keys, ("I am A", "I am B"), strict=True):
        headers = {"Authorization": f"Bearer {key}"}
        messages = httpx.get(f"{service.url}/v1/threads/shared/messages", headers=headers)
        assert messages.json()["data"][0]["content"] == mine
        listed = httpx.get(f"{service.url}/v1/threads", headers=headers).json()["data"]
        assert [t["id"] for t in listed] == ["shared"]


def test_another_tenants_thread_is_answered_as_a_missing_one(
    service: LiveServer, database_url: str, tenant: str
) -> None:
    owner, other = (create_key(database_url, f"{tenant}-{n}").secret for n in ("a", "b"))
    other_headers = {"Authorization": f"Bearer {other}"}
    paths = ["/v1/threads/only-a/memory", "/v1/threads/only-a/messages"]
    before = [httpx.get(service.url + p, headers=other_headers) for p in paths]
    with sdk(service, owner, thread_id="only-a") as client:
        ask(client, "a secret of A")
    after = [httpx.get(service.url + p, headers=other_headers) for p in paths]
    deleted = httpx.delete(service.url + paths[0], headers=other_headers)
    for old, new in zip(before, after, strict=True):
        assert (old.status_code, new.status_code) == (404, 404)
        assert old.content == new.content
    assert deleted.status_code == 404
    assert deleted.json() == before[0].json()
    assert before[0].json()["error"]["code"] == "thread_not_found"


def test_a_revoked_key_gets_401_and_a_missing_key_too(
    service: LiveServer, database_url: str, tenant: str
) -> None:
    created = create_key(database_url, tenant)
    with sdk(service, created.secret) as client:
        ask(client, "hello")
        revoke_key(database_url, created.key.key_id)
        with pytest.raises(openai.AuthenticationError) as caught:
            ask(client, "hello again")
    assert caught.value.status_code == 401
    assert caught.value.body["code"] == "invalid_api_key"  # type: ignore[index]
    for headers in ({}, {"Authorization": "Bearer wm_not-a-key"}, {"Authorization": "Basic x"}):
        response = httpx.get(f"{service.url}/v1/threads", headers=headers)
        assert response.status_code == 401
        assert response.headers["www-authenticate"] == "Bearer"
        assert set(response.json()["error"]) == {"message", "type", "param", "code"}


@pytest.mark.parametrize(
    ("status", "error"),
    [
        pytest.param(429, openai.RateLimitError, id="429"),
        pytest.param(503, openai.InternalServerError, id="503"),
    ],
)
def test_upstream_errors_come_back_with_their_status_in_openai_shape(
    service: LiveServer,
    key: str,
    upstream: ScriptedUpstream,
    status: int,
    error: type[openai.APIStatusError],
) -> None:
    upstream.push(StatusError(status, "slow down", retry_after=7))
    with sdk(service, key) as client, pytest.raises(error) as caught:
        ask(client, "hello")
    assert caught.value.status_code == status
    assert float(caught.value.response.headers["Retry-After"]) == 7  # the client may wait so
    body = caught.value.response.json()
    assert set(body["error"]) == {"message", "type", "param", "code"}
    assert "slow down" not in body["error"]["message"]  # the upstream's text is the operator's
    assert f"status {status}" in body["error"]["message"]
    assert caught.value.response.headers["X-Request-Id"] in body["error"]["message"]
    assert "Traceback" not in caught.value.response.text
    upstream.push(StatusError(status, "still slow"))
    with sdk(service, key) as client, pytest.raises(error):
        client.chat.completions.create(
            model="answer-model", messages=[{"role": "user", "content": "hi"}], stream=True
        )


def test_an_upstream_error_never_shows_a_tenant_the_operators_key(
    service: LiveServer,
    key: str,
    upstream: ScriptedUpstream,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """OpenAI's 401 quotes the key it was given: the tenant gets the status class and a
    request id; the operator's log gets the text, the key redacted, under the same id."""
    leaked = "Incorrect API key provided: sk-upstr***************************cdef."
    upstream.push(StatusError(401, leaked))
    with sdk(service, key) as client, pytest.raises(openai.APIStatusError) as caught:
        ask(client, "hello")
    assert caught.value.status_code == 502
    message = caught.value.response.json()["error"]["message"]
    assert "sk-" not in message
    assert "credentials were refused" in message
    request_id = caught.value.response.headers["X-Request-Id"]
    logged = [r.getMessage() for r in caplog.records if request_id in r.getMessage()]
    assert logged, "the operator's log has no line for the request id"
    assert "Incorrect API key provided: [redacted]" in logged[0]
    assert all("sk-upstr" not in r.getMessage() for r in caplog.records)


def test_a_retry_after_an_upstream_failure_stores_nothing_twice(
    service: LiveServer, key: str, upstream: ScriptedUpstream, api: httpx.Client
) -> None:
    """Earlier new turns are stored before the model is asked; resending the same request
    after a failure answers it without storing them again."""
    messages: list[Any] = [
        {"role": "user", "content": "first"},
        {"role": "assistant", "content": "noted"},
        {"role": "user", "content": "second"},
    ]
    upstream.push(StatusError(500, "boom"))
    with sdk(service, key) as client:
        with pytest.raises(openai.InternalServerError):
            client.chat.completions.create(model="answer-model", messages=messages)
        client.chat.completions.create(model="answer-model", messages=messages)
    stored = api.get("/v1/threads/th/messages").json()["data"]
    assert [m["content"] for m in stored] == ["first", "noted", "second", "You said: second"]


def test_a_client_that_resends_the_whole_history_stores_each_turn_once(
    service: LiveServer, key: str, upstream: ScriptedUpstream, api: httpx.Client
) -> None:
    """Like LangChain's ChatOpenAI or a chat front end: every request carries the whole
    conversation as the client knows it, answers included."""
    history: list[Any] = []
    with sdk(service, key) as client:
        for text in ("I'm Ada.", "I live in Lyon.", "What do you know about me?"):
            history.append({"role": "user", "content": text})
            answer = client.chat.completions.create(model="answer-model", messages=history)
            history.append({"role": "assistant", "content": answer.choices[0].message.content})
    stored = api.get("/v1/threads/th/messages").json()["data"]
    assert [(m["role"], m["content"]) for m in stored] == [
        (m["role"], m["content"]) for m in history
    ]
    sent = [m["content"] for m in answers(upstream)[-1]["messages"] if m["role"] == "user"]
    assert sent[-2:] == ["I live in Lyon.", "What do you know about me?"]  # recent_turns=4
    assert len(sent) == len(set(sent))  # no turn twice in front of the model


def test_a_leading_system_message_replaces_the_profiles_prompt(
    service: LiveServer, key: str, upstream: ScriptedUpstream
) -> None:
    with sdk(service, key) as client:
        client.chat.completions.create(
            model="answer-model",
            messages=[
                {"role": "system", "content": "You are a pirate."},
                {"role": "user", "content": "hello"},
            ],
        )
        ask(client, "hello again", extra_headers={"X-Profile": "support"})
        client.chat.completions.create(
            model="support", messages=[{"role": "user", "content": "by model name"}]
        )
    first, second, third = answers(upstream)
    assert first["messages"][0]["content"].startswith("You are a pirate.")
    assert TEMPLATE.strip().splitlines()[0] in first["messages"][0]["content"]
    assert second["messages"][0]["content"].startswith("You help with orders.")
    assert second["model"] == "answer-model"
    assert third["messages"][0]["content"].startswith("You help with orders.")


def test_what_the_gateway_cannot_serve_is_a_4xx_with_the_reason(
    service: LiveServer, key: str
) -> None:
    with sdk(service, key) as client:
        with pytest.raises(openai.BadRequestError) as several_streamed:
            ask(client, "hello", n=2, stream=True)
        assert several_streamed.value.body["code"] == "unsupported_parameter"  # type: ignore[index]
        with pytest.raises(openai.BadRequestError) as deprecated:
            ask(client, "hello", functions=[{"name": "f", "parameters": {}}])
        assert deprecated.value.body["param"] == "functions"  # type: ignore[index]
        assert "deprecated" in deprecated.value.message


def test_metrics_count_requests_answers_helper_calls_and_the_queue(
    service: LiveServer, key: str, api: httpx.Client
) -> None:
    with sdk(service, key) as client:
        ask(client, "please remember: one")
        ask(client, "two")
    until(lambda: api.get("/v1/threads/th/memory").json()["summary"])
    assert api.get("/healthz").json()["status"] == "ok"
    text = httpx.get(f"{service.url}/metrics").text
    assert (
        'workingmem_http_requests_total{method="POST",route="/v1/chat/completions",status="200"} 2'
        in text
    )
    assert 'route="/v1/threads/{thread_id}/memory"' in text
    assert "workingmem_http_request_duration_seconds_bucket{" in text
    assert "workingmem_answers_total 2" in text
    assert 'workingmem_answer_tokens_total{kind="prompt"} 200' in text
    assert "workingmem_helper_calls_total 1" in text
    assert 'workingmem_memory_updates_total{outcome="updated"} 1' in text
    assert "workingmem_background_queue_depth " in text


def _metric(text: str, series: str) -> float:
    """The value of one series of a Prometheus text body."""
    (line,) = [line for line in text.splitlines() if line.rsplit(" ", 1)[0] == series]
    return float(line.rsplit(" ", 1)[1])


def test_metrics_show_the_database_pool_where_there_is_one(
    service: LiveServer, key: str, database_url: str
) -> None:
    """PostgreSQL's connection pool: its connections by state, its limit, the requests that
    waited or got none; SQLite has no pool, and no such series."""
    with sdk(service, key) as client:
        ask(client, "hello")
    until(lambda: httpx.get(f"{service.url}/healthz").json()["queue_depth"] == 0)
    text = httpx.get(f"{service.url}/metrics").text
    if database_url.startswith("sqlite"):
        assert "workingmem_db_pool" not in text
        return
    assert _metric(text, "workingmem_db_pool_max_connections") == 10
    idle = _metric(text, 'workingmem_db_pool_connections{state="idle"}')
    in_use = _metric(text, 'workingmem_db_pool_connections{state="in_use"}')
    assert idle >= 1
    assert in_use == 0  # nothing is asking now: every connection is back
    assert _metric(text, "workingmem_db_pool_requests_total") >= 2  # the lock's trip, the answer's
    assert _metric(text, "workingmem_db_pool_waiting_requests") == 0
    assert _metric(text, "workingmem_db_pool_request_errors_total") == 0
    assert "# TYPE workingmem_db_pool_wait_seconds_total counter" in text
    assert 'workingmem_db_pool_discarded_total{reason="lost"} 0' in text


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
def test_an_answer_cut_at_max_tokens_says_length_like_the_upstream(
    service: LiveServer, key: str, upstream: ScriptedUpstream, stream: bool
) -> None:
    """The upstream's finish_reason reaches the client, so it can tell a cut answer."""
    upstream.push(Reply("A very long answer that was cu", finish_reason="length"))
    with sdk(service, key) as client:
        if stream:
            chunks = list(
                client.chat.completions.create(
                    model="answer-model",
                    messages=[{"role": "user", "content": "go on"}],
                    stream=True,
                )
            )
            reasons = [c.choices[0].finish_reason for c in chunks if c.choices]
            assert reasons[-1] == "length"
        else:
            answer = client.chat.completions.create(
                model="answer-model", messages=[{"role": "user", "content": "go on"}]
            )
            assert answer.choices[0].finish_reason == "length"
