"""Stored chat completions as the `openai` SDK's users call them: ``store: true`` on create,
then ``chat.completions.list / retrieve / update / delete`` and ``messages.list``, kept by the
gateway per tenant. Real SDK, real HTTP, the scripted upstream behind, both stores."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest

from tests.service.live import LiveServer, create_key
from workingmem.llm.testing import ScriptedUpstream

from .test_openai_clients import answer_requests

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

QUESTION: Any = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "Where do we meet?"},
]


@pytest.fixture
def sdk(service: LiveServer, key: str) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(
        base_url=f"{service.url}/v1",
        api_key=key,
        max_retries=0,
        timeout=10,
        default_headers={"X-Thread-Id": "trip"},
    ) as client:
        yield client


@pytest.fixture
def other(service: LiveServer, database_url: str, tenant: str) -> Iterator[openai.OpenAI]:
    """The SDK with another tenant's key."""
    secret = create_key(database_url, f"{tenant}-other", "tests").secret
    with openai.OpenAI(base_url=f"{service.url}/v1", api_key=secret, max_retries=0) as client:
        yield client


def test_a_stored_completion_is_listed_retrieved_tagged_and_deleted(sdk: openai.OpenAI) -> None:
    made = sdk.chat.completions.create(
        model="answer-model", messages=QUESTION, store=True, metadata={"topic": "trip"}
    )
    assert made.id.startswith("chatcmpl-")
    got = sdk.chat.completions.retrieve(made.id)
    assert got.id == made.id
    assert got.choices[0].message.content == made.choices[0].message.content
    assert got.choices[0].message.content == "You said: Where do we meet?"
    assert got.metadata == {"topic": "trip"}
    messages = sdk.chat.completions.messages.list(made.id)
    assert [(m.id, m.role, m.content) for m in messages.data] == [
        (f"{made.id}-0", "system", "Be brief."),
        (f"{made.id}-1", "user", "Where do we meet?"),
    ]
    assert [c.id for c in sdk.chat.completions.list(metadata={"topic": "trip"})] == [made.id]
    updated = sdk.chat.completions.update(made.id, metadata={"topic": "done"})
    assert updated.metadata == {"topic": "done"}
    assert list(sdk.chat.completions.list(metadata={"topic": "trip"})) == []
    deleted = sdk.chat.completions.delete(made.id)
    assert (deleted.id, deleted.deleted, deleted.object) == (
        made.id,
        True,
        "chat.completion.deleted",
    )
    with pytest.raises(openai.NotFoundError):
        sdk.chat.completions.retrieve(made.id)
    assert list(sdk.chat.completions.list()) == []


def test_only_a_completion_asked_to_be_stored_is_kept(sdk: openai.OpenAI) -> None:
    made = sdk.chat.completions.create(model="answer-model", messages=QUESTION)
    with pytest.raises(openai.NotFoundError):
        sdk.chat.completions.retrieve(made.id)
    sdk.chat.completions.create(model="answer-model", messages=QUESTION, store=False)
    assert list(sdk.chat.completions.list()) == []


def test_store_and_its_metadata_stay_at_the_gateway(
    sdk: openai.OpenAI, upstream: ScriptedUpstream
) -> None:
    """The gateway keeps the completion: the upstream, reached with the gateway's one key,
    is not asked to keep it too (its record would be every tenant's, and a delete here would
    not reach it). Metadata without ``store`` is forwarded, as before."""
    sdk.chat.completions.create(
        model="answer-model", messages=QUESTION, store=True, metadata={"topic": "trip"}
    )
    sdk.chat.completions.create(model="answer-model", messages=QUESTION, metadata={"app": "t"})
    kept, plain = answer_requests(upstream)[-2:]
    assert "store" not in kept
    assert "metadata" not in kept
    assert plain["metadata"] == {"app": "t"}


def test_a_streamed_completion_is_stored_under_its_chunks_id(sdk: openai.OpenAI) -> None:
    chunks = list(
        sdk.chat.completions.create(
            model="answer-model", messages=QUESTION, store=True, stream=True
        )
    )
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "You said: Where do we meet?"
    got = sdk.chat.completions.retrieve(chunks[0].id)
    assert got.choices[0].message.content == text
    assert got.choices[0].finish_reason == "stop"


def test_a_list_pages_by_the_order_they_were_made(sdk: openai.OpenAI) -> None:
    ids = [
        sdk.chat.completions.create(
            model="answer-model",
            messages=[{"role": "user", "content": f"question {i}"}],
            store=True,
        ).id
        for i in range(5)
    ]
    first = sdk.chat.completions.list(limit=2)
    assert [c.id for c in first.data] == ids[:2]
    assert first.has_more
    assert [c.id for c in sdk.chat.completions.list(limit=2)] == ids  # the SDK pages on
    assert [c.id for c in sdk.chat.completions.list(order="desc", limit=3)] == ids[::-1]
    assert [c.id for c in sdk.chat.completions.list(model="answer-model")] == ids
    assert list(sdk.chat.completions.list(model="another-model")) == []
    messages = sdk.chat.completions.messages.list(ids[0], order="desc")
    assert [m.content for m in messages] == ["question 0"]


def test_the_messages_are_those_the_client_sent(sdk: openai.OpenAI) -> None:
    """A client that resends its whole history gets it listed whole; parts are listed as
    parts, their text as the content."""
    history: Any = [
        {"role": "user", "content": "Where do we meet?"},
        {"role": "assistant", "content": "You said: Where do we meet?"},
        {"role": "user", "content": [{"type": "text", "text": "And when?"}]},
    ]
    made = sdk.chat.completions.create(model="answer-model", messages=history, store=True)
    listed = list(sdk.chat.completions.messages.list(made.id, limit=2))
    assert [(m.role, m.content) for m in listed] == [
        ("user", "Where do we meet?"),
        ("assistant", "You said: Where do we meet?"),
        ("user", "And when?"),
    ]
    assert listed[0].content_parts is None
    parts = listed[2].content_parts
    assert parts is not None
    assert [p.model_dump(exclude_none=True) for p in parts] == [
        {"type": "text", "text": "And when?"}
    ]
    with pytest.raises(openai.NotFoundError):
        sdk.chat.completions.messages.list(made.id, after="chatcmpl-none-0")


def test_another_tenants_completion_is_missing(
    sdk: openai.OpenAI, other: openai.OpenAI, service: LiveServer
) -> None:
    """Every route answers another tenant's id as a missing one, byte for byte, and changes
    nothing; its list shows none."""
    made = sdk.chat.completions.create(
        model="answer-model", messages=QUESTION, store=True, metadata={"k": "v"}
    )
    missing = "chatcmpl-missing"
    bodies = []
    for completion_id in (made.id, missing):
        for call in (
            other.chat.completions.retrieve,
            lambda cid: other.chat.completions.update(cid, metadata={}),
            other.chat.completions.messages.list,
            other.chat.completions.delete,
        ):
            with pytest.raises(openai.NotFoundError) as refused:
                call(completion_id)
            bodies.append(refused.value.response.text.replace(completion_id, "<id>"))
    assert bodies[:4] == bodies[4:]
    assert list(other.chat.completions.list()) == []
    with pytest.raises(openai.NotFoundError):
        other.chat.completions.list(after=made.id)
    got = sdk.chat.completions.retrieve(made.id)
    assert got.metadata == {"k": "v"}
    assert len(list(sdk.chat.completions.messages.list(made.id))) == 2


def test_forgetting_the_thread_forgets_its_completions(
    sdk: openai.OpenAI, api: httpx.Client
) -> None:
    made = sdk.chat.completions.create(model="answer-model", messages=QUESTION, store=True)
    kept = sdk.chat.completions.create(
        model="answer-model",
        messages=QUESTION,
        store=True,
        extra_headers={"X-Thread-Id": "kept"},
    )
    assert api.delete("/v1/threads/trip").status_code == 204
    with pytest.raises(openai.NotFoundError):
        sdk.chat.completions.retrieve(made.id)
    assert [c.id for c in sdk.chat.completions.list()] == [kept.id]


def test_bad_requests_are_refused_with_their_reason(sdk: openai.OpenAI, api: httpx.Client) -> None:
    made = sdk.chat.completions.create(
        model="answer-model", messages=QUESTION, store=True, metadata={"k": "v"}
    )
    refused = [
        api.post(f"/v1/chat/completions/{made.id}", json={"metadata": {"k": 1}}),
        api.post(f"/v1/chat/completions/{made.id}", json={"metadata": {}, "model": "x"}),
        api.get("/v1/chat/completions", params={"limit": 101}),
        api.get("/v1/chat/completions", params={"order": "newest"}),
        api.post(
            "/v1/chat/completions",
            json={"model": "answer-model", "messages": QUESTION, "store": "yes"},
        ),
    ]
    assert [r.status_code for r in refused] == [422, 422, 422, 422, 422]
    assert all(r.json()["error"]["message"] for r in refused)
    got = sdk.chat.completions.retrieve(made.id)
    assert got.metadata == {"k": "v"}
