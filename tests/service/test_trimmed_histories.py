"""A client that resends its history without a thread id, trimmed from the front to a budget of
its own (LlamaIndex's memory buffer, LangChain's `trim_messages`, a chat front end's context
setting): its conversation is found by the last answer it saw, so it stays one thread with its
memory, on both stores, through the `openai` SDK over real HTTP."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest
from agents import (
    Agent,
    OpenAIChatCompletionsModel,
    Runner,
    SessionSettings,
    SQLiteSession,
    set_tracing_disabled,
)

from .live import LiveServer, create_key
from .test_openai_clients import stored

set_tracing_disabled(True)  # the SDK would send its traces to OpenAI

SYSTEM: Any = {"role": "system", "content": "Be brief."}


@pytest.fixture
def sdk(service: LiveServer, key: str) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=f"{service.url}/v1", api_key=key, max_retries=0) as client:
        yield client


def talk(sdk: openai.OpenAI, history: list[Any], text: str, *, keep: int, **extra: Any) -> str:
    """Asks `text` with the system message and the newest `keep` messages of `history` (which
    grows by the question and its answer); the thread the gateway answered on."""
    history.append({"role": "user", "content": text})
    raw = sdk.chat.completions.with_raw_response.create(
        model="answer-model", messages=[SYSTEM, *history[-keep:]], **extra
    )
    history.append({"role": "assistant", "content": raw.parse().choices[0].message.content})
    return raw.headers["X-Thread-Id"]


def test_a_history_trimmed_from_the_front_stays_one_thread(
    sdk: openai.OpenAI, api: httpx.Client
) -> None:
    history: list[Any] = []
    threads = {talk(sdk, history, f"Message {i}", keep=5) for i in range(8)}
    assert len(threads) == 1
    (thread,) = threads
    assert [t["content"] for t in stored(api, thread)] == [m["content"] for m in history]


def test_what_another_conversation_could_say_is_not_continued(
    sdk: openai.OpenAI, service: LiveServer, database_url: str, tenant: str
) -> None:
    """Another user, another tenant, a history whose last answer the thread never gave, and a
    trimmed history that shares fewer than two exchanges with the thread: each its own."""
    history: list[Any] = []
    for i in range(4):
        thread = talk(sdk, history, f"Message {i}", keep=5)
    trimmed = history[-4:]
    as_other_user = talk(sdk, list(trimmed), "Next", keep=5, user="someone-else")
    edited = [*trimmed[:-1], {"role": "assistant", "content": "Something I never said."}]
    as_edited = talk(sdk, edited, "Next", keep=5)
    too_short = talk(sdk, list(history[-2:]), "Next", keep=3)
    secret = create_key(database_url, f"{tenant}-other", "tests").secret
    with openai.OpenAI(base_url=f"{service.url}/v1", api_key=secret, max_retries=0) as other:
        as_other_tenant = talk(other, list(trimmed), "Next", keep=5)
    found = [as_other_user, as_edited, too_short, as_other_tenant]
    assert thread not in found
    assert len(set(found)) == len(found)
    assert talk(sdk, history, "Next", keep=5) == thread  # still found by the right client


async def test_an_agents_sdk_session_with_a_limit_stays_one_thread(
    service: LiveServer, key: str, api: httpx.Client
) -> None:
    """The OpenAI Agents SDK's session sends its newest `limit` items and no thread id."""
    client = openai.AsyncOpenAI(base_url=f"{service.url}/v1", api_key=key, max_retries=0)
    model = OpenAIChatCompletionsModel(model="answer-model", openai_client=client)
    agent = Agent(name="brief", instructions="Be brief.", model=model)
    session = SQLiteSession("trimmed", session_settings=SessionSettings(limit=6))
    async with client:
        for i in range(8):
            result = await Runner.run(agent, f"Message {i}", session=session)
            assert result.final_output == f"You said: Message {i}"
    (thread,) = threads_of(api)
    turns = stored(api, thread)
    assert len(turns) == 16
    assert [t["content"] for t in turns[::2]] == [f"Message {i}" for i in range(8)]


def threads_of(api: httpx.Client) -> list[str]:
    """The tenant's threads, over the REST API."""
    return [t["id"] for t in api.get("/v1/threads", params={"limit": 100}).json()["data"]]
