"""A reasoning model behind a chat upstream (vLLM's, Ollama's and DeepSeek's servers send its
thinking as ``reasoning_content`` beside the content): a chat client gets the thinking as the
upstream sent it, streamed as it comes (before the answer, which may take a while) and in the
whole message; the thread stores the answer, not the thinking; clients of the other APIs get
their answer as before. The official SDKs over real HTTP, on SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import anthropic
import httpx
import openai
import pytest

from tests.helpers import summarizing_responder
from workingmem.llm.testing import Reply, ScriptedUpstream, tool_call
from workingmem.service import create_app

from .conftest import settings_for
from .live import LiveServer, create_key

THINKING = "The user greets me. A short greeting back will do."
WEATHER: Any = {
    "type": "function",
    "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {}}},
}


def thinking_model(request: dict[str, Any]) -> Reply:
    if request.get("model") == "cheap-model":
        return summarizing_responder(request)
    extra = {"reasoning_content": THINKING}
    if any(tool["function"]["name"] == "get_weather" for tool in request.get("tools") or ()):
        return Reply(None, tool_calls=[tool_call("get_weather", {}, id="c1")], message_extra=extra)
    return Reply("Hello!", message_extra=extra, chunk_chars=10)


@pytest.fixture
def live(database_url: str, upstream: ScriptedUpstream, tenant: str) -> Iterator[tuple[str, str]]:
    upstream.responder = thinking_model
    with LiveServer(create_app(settings_for(database_url, upstream))) as server:
        yield server.url, create_key(database_url, tenant, "tests").secret


def stored(url: str, key: str, thread: str) -> list[tuple[str, Any]]:
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {key}"}) as rest:
        page = rest.get(f"/v1/threads/{thread}/messages").json()["data"]
    return [(m["role"], m["content"]) for m in page]


def streamed(sdk: openai.OpenAI, thread: str, text: str, **fields: Any) -> list[Any]:
    """The chunks of a streamed answer to `text` on `thread` that carry a choice."""
    stream = sdk.chat.completions.create(
        model="answer-model",
        messages=[{"role": "user", "content": text}],
        stream=True,
        extra_headers={"X-Thread-Id": thread},
        **fields,
    )
    return [chunk for chunk in stream if chunk.choices]


def test_the_thinking_streams_to_a_chat_client_before_the_answer(live: tuple[str, str]) -> None:
    url, key = live
    with openai.OpenAI(base_url=f"{url}/v1", api_key=key, max_retries=0) as sdk:
        deltas = [chunk.choices[0].delta for chunk in streamed(sdk, "think", "Hi!")]
    thinking = [d.model_extra.get("reasoning_content") for d in deltas if d.model_extra]
    assert "".join(t for t in thinking if t) == THINKING
    assert len(thinking) > 1  # as it came, in pieces
    said = [d.content for d in deltas if d.content]
    assert "".join(said) == "Hello!"
    first_text = next(i for i, d in enumerate(deltas) if d.content)
    last_thought = max(
        i for i, d in enumerate(deltas) if d.model_extra and d.model_extra.get("reasoning_content")
    )
    assert last_thought < first_text
    assert stored(url, key, "think") == [("user", "Hi!"), ("assistant", "Hello!")]


def test_the_thinking_comes_with_a_whole_answer_and_a_streamed_call(live: tuple[str, str]) -> None:
    url, key = live
    with openai.OpenAI(base_url=f"{url}/v1", api_key=key, max_retries=0) as sdk:
        whole = sdk.chat.completions.create(
            model="answer-model",
            messages=[{"role": "user", "content": "Hi!"}],
            extra_headers={"X-Thread-Id": "whole"},
        )
        assert whole.choices[0].message.content == "Hello!"
        assert (whole.choices[0].message.model_extra or {})["reasoning_content"] == THINKING
        chunks = streamed(sdk, "call", "Weather?", tools=[WEATHER])
    thinking = "".join(
        (c.choices[0].delta.model_extra or {}).get("reasoning_content") or "" for c in chunks
    )
    assert thinking == THINKING
    calls = [call for c in chunks for call in c.choices[0].delta.tool_calls or ()]
    assert [(call.id, call.function and call.function.name) for call in calls] == [
        ("c1", "get_weather")
    ]
    assert chunks[-1].choices[0].finish_reason == "tool_calls"
    assert stored(url, key, "whole") == [("user", "Hi!"), ("assistant", "Hello!")]


def test_clients_of_the_other_apis_get_their_answer(live: tuple[str, str]) -> None:
    """The chat deltas are the chat client's to pass on: the Responses and Messages streams
    carry the answer as before."""
    url, key = live
    with openai.OpenAI(base_url=f"{url}/v1", api_key=key, max_retries=0) as sdk:
        events = list(
            sdk.responses.create(
                model="answer-model",
                input="Hi!",
                stream=True,
                extra_headers={"X-Thread-Id": "responses"},
            )
        )
    assert events[-1].type == "response.completed"
    assert events[-1].response.output_text == "Hello!"
    with (
        anthropic.Anthropic(base_url=url, api_key=key, max_retries=0) as claude,
        claude.messages.stream(
            model="answer-model",
            max_tokens=100,
            messages=[{"role": "user", "content": "Hi!"}],
            extra_headers={"X-Thread-Id": "messages"},
        ) as stream,
    ):
        assert stream.get_final_text() == "Hello!"


def test_a_history_resent_with_the_thinking_keeps_its_thread(live: tuple[str, str]) -> None:
    """The usual agent loop appends each answer's message as the SDK read it, thinking
    included; the next request takes it, and the thread holds each turn once (the thinking is
    not what was said, so it is no edit either)."""
    url, key = live
    history: list[Any] = []
    with openai.OpenAI(base_url=f"{url}/v1", api_key=key, max_retries=0) as sdk:
        for question in ["Hi!", "Hi again!", "And again!"]:
            history.append({"role": "user", "content": question})
            answer = sdk.chat.completions.create(
                model="answer-model", messages=history, extra_headers={"X-Thread-Id": "loop"}
            )
            message = answer.choices[0].message.model_dump(exclude_none=True)
            assert message["reasoning_content"] == THINKING
            history.append(message)
    assert stored(url, key, "loop") == [
        (m["role"], m["content"]) for m in history
    ]  # each once, without the thinking
