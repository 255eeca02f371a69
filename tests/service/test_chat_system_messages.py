"""System and developer messages anywhere in a chat completion's messages, as OpenAI takes them:
several in a row (a framework's prompt, then its memory's), a reminder after the user's message
(aider's), a note a few turns back that moves with every call (a role-play front end's). They
are the call's instructions: their texts join the system prompt in order, the thread stores none
of them, and a client that resends its history keeps one thread with each turn once. The
`openai` SDK over real HTTP, on SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest
from openai.types.chat import ChatCompletionMessageParam

import workingmem as wm
from workingmem.llm.testing import Reply, ScriptedUpstream
from workingmem.service import create_app

from .conftest import settings_for
from .live import LiveServer, create_key

PROMPT = "You are a careful coder."
MEMORY = "The user prefers short answers."
REMINDER = "Reply with a unified diff."


@pytest.fixture
def client(service: LiveServer, key: str) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=f"{service.url}/v1", api_key=key, max_retries=0) as sdk:
        yield sdk


def answer_requests(upstream: ScriptedUpstream) -> list[dict[str, Any]]:
    return [r for r in upstream.requests if r.get("model") != "cheap-model"]


def stored(api: httpx.Client, thread: str) -> list[tuple[str, str]]:
    page = api.get(f"/v1/threads/{thread}/messages").json()["data"]
    return [(m["role"], m["content"]) for m in page]


def ask(
    client: openai.OpenAI, messages: list[ChatCompletionMessageParam], **headers: str
) -> tuple[str, str]:
    """The answer's text and the thread the gateway says it is on."""
    raw = client.chat.completions.with_raw_response.create(
        model="answer-model", messages=messages, extra_headers=headers
    )
    return raw.parse().choices[0].message.content or "", raw.headers["x-thread-id"]


@pytest.mark.parametrize("role", ["system", "developer"])
def test_they_join_the_prompt_in_order_and_a_resent_history_keeps_one_thread(
    role: Any, client: openai.OpenAI, upstream: ScriptedUpstream, api: httpx.Client
) -> None:
    """Aider's shape: its prompt, then more instructions, the history, the user's message and a
    reminder after it; the next call resends the history with a new reminder at the end."""
    opening: list[ChatCompletionMessageParam] = [
        {"role": role, "content": PROMPT},
        {"role": role, "content": [{"type": "text", "text": MEMORY}]},
    ]
    history: list[ChatCompletionMessageParam] = [{"role": "user", "content": "Fix the parser."}]
    threads = set()
    for question in ["And the tests?", "Now the docs."]:
        answer, thread = ask(client, [*opening, *history, {"role": role, "content": REMINDER}])
        threads.add(thread)
        sent = answer_requests(upstream)[-1]["messages"]
        prompt = sent[0]["content"]
        assert sent[0]["role"] == "system"
        assert prompt.index(PROMPT) < prompt.index(MEMORY) < prompt.index(REMINDER)
        assert [m["role"] for m in sent[1:]] == ["user", "assistant"] * (len(history) // 2) + [
            "user"
        ]
        history += [
            {"role": "assistant", "content": answer},
            {"role": "user", "content": question},
        ]
    (thread,) = threads  # found again by how it opens: the instructions are the same
    assert stored(api, thread) == [
        ("user", "Fix the parser."),
        ("assistant", "You said: Fix the parser."),
        ("user", "And the tests?"),
        ("assistant", "You said: And the tests?"),
    ]


def test_a_note_that_moves_with_every_call_never_edits_the_thread(
    client: openai.OpenAI, upstream: ScriptedUpstream, api: httpx.Client
) -> None:
    """A role-play front end's note, two messages from the end of every call: each call it
    sits between other turns, and the thread still holds each turn once, in order."""
    note: ChatCompletionMessageParam = {"role": "system", "content": "[Keep the tone light.]"}
    history: list[ChatCompletionMessageParam] = []
    for line in ["Hello there.", "Tell me a story.", "About a cat.", "A grey one."]:
        history.append({"role": "user", "content": line})
        sent = [*history[:-2], note, *history[-2:]] if len(history) > 2 else [note, *history]
        answer, thread = ask(client, sent, **{"X-Thread-Id": "tale"})
        assert thread == "tale"
        assert "[Keep the tone light.]" in answer_requests(upstream)[-1]["messages"][0]["content"]
        history.append({"role": "assistant", "content": answer})
    assert stored(api, "tale") == [(m["role"], m["content"]) for m in history]


def test_a_bad_turn_is_named_by_its_place_among_them(
    client: openai.OpenAI, api: httpx.Client
) -> None:
    messages: list[ChatCompletionMessageParam] = [
        {"role": "system", "content": PROMPT},
        {"role": "user", "content": "Hi"},
        {"role": "developer", "content": REMINDER},
        {"role": "assistant", "content": "Hello."},
        {"role": "system", "content": MEMORY},
        {"role": "user", "content": "x", "name": " ada"},
    ]
    with pytest.raises(openai.BadRequestError) as caught:
        ask(client, messages, **{"X-Thread-Id": "bad"})
    assert caught.value.body["param"] == "messages[5].name"  # type: ignore[index]
    assert api.get("/v1/threads/bad/messages").status_code == 404  # nothing stored


def test_instructions_alone_are_no_request(client: openai.OpenAI, api: httpx.Client) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        ask(client, [{"role": "system", "content": PROMPT}], **{"X-Thread-Id": "none"})
    assert caught.value.status_code == 400
    assert "messages" in caught.value.body["param"]  # type: ignore[index]
    assert api.get("/v1/threads/none/messages").status_code == 404


def test_history_client_sends_them_where_they_were(
    client: openai.OpenAI, upstream: ScriptedUpstream, api: httpx.Client
) -> None:
    messages: list[ChatCompletionMessageParam] = [
        {"role": "system", "content": PROMPT},
        {"role": "user", "content": "Hi"},
        {"role": "system", "content": REMINDER},
    ]
    upstream.responder = lambda request: Reply("Noted.")
    ask(client, messages, **{"X-Thread-Id": "own", "X-Workingmem-History": "client"})
    assert answer_requests(upstream)[-1]["messages"] == messages
    assert stored(api, "own") == [("user", "Hi"), ("assistant", "Noted.")]


def test_the_memory_ends_a_system_message_of_parts_without_losing_them(
    database_url: str, tenant: str, upstream: ScriptedUpstream
) -> None:
    """A profile that adds the memory to the client's own history (history "client") keeps
    the client's system message whole when it comes as text parts."""
    upstream.responder = lambda request: Reply("Noted.")
    coder = wm.Profile(id="coder", history="client", client_history_memory=True)
    key = create_key(database_url, tenant, "coder").secret
    with (
        LiveServer(create_app(settings_for(database_url, upstream, profiles=[coder]))) as live,
        openai.OpenAI(base_url=f"{live.url}/v1", api_key=key, max_retries=0) as sdk,
    ):
        sdk.chat.completions.create(
            model="coder",
            messages=[
                {"role": "system", "content": [{"type": "text", "text": PROMPT}]},
                {"role": "user", "content": "Hi"},
            ],
            extra_headers={"X-Thread-Id": "parts"},
        )
    first = answer_requests(upstream)[-1]["messages"][0]
    assert first["content"][0] == {"type": "text", "text": PROMPT}
    assert "Working memory" in first["content"][1]["text"]  # the agent memory's block
