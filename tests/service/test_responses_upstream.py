"""The gateway in front of an upstream that speaks Responses (``--upstream-api responses``):
the client's Responses requests and the gateway's own calls go upstream as Responses, with
``store: false`` (the gateway is the store), and the reasoning items an answer carried go back
upstream byte for byte on the next call, as the window's turns they are."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest
from openai.types.responses import ResponseInputTextParam

import workingmem as wm
from tests.helpers import summarizing_responder
from workingmem.llm.testing import Reply, ScriptedUpstream, tool_call
from workingmem.service import create_app

from .conftest import settings_for
from .live import LiveServer, create_key
from .test_responses_api import WEATHER, turns

SECRETS = itertools.count(1)


def said(item: dict[str, Any]) -> str:
    content = item.get("content")
    if isinstance(content, str):
        return content
    return "".join(p.get("text", "") for p in content or () if isinstance(p, dict))


def responses_model(request: dict[str, Any]) -> Reply:
    """A Responses model that reasons (an encrypted reasoning item before each answer), calls
    the weather tool when asked about the weather, and echoes anything else."""
    items = request["input"]
    if request.get("model") == "cheap-model":  # the summary update, as a Responses call
        return summarizing_responder({"messages": [{"content": said(items[-1])}]})
    last = items[-1]
    secret = f"encrypted-{next(SECRETS)}"
    if last.get("type") == "function_call_output":
        return Reply(f"It is {last['output']} there.", reasoning=secret)
    if "weather" in said(last):
        call = tool_call("get_weather", {"city": "Lyon"}, id=f"call_{secret}")
        return Reply(None, tool_calls=[call], reasoning=secret)
    return Reply(f"You said: {said(last)}", reasoning=secret)


def upstream_calls(upstream: ScriptedUpstream) -> list[dict[str, Any]]:
    return [r for r in upstream.requests if r.get("model") != "cheap-model"]


@pytest.fixture
def native(database_url: str) -> Iterator[tuple[LiveServer, ScriptedUpstream]]:
    with ScriptedUpstream(responder=responses_model) as upstream:
        settings = settings_for(database_url, upstream, upstream_api="responses")
        with LiveServer(create_app(settings)) as live:
            yield live, upstream


@pytest.fixture
def client(
    native: tuple[LiveServer, ScriptedUpstream], database_url: str, tenant: str
) -> Iterator[openai.OpenAI]:
    live, _ = native
    key = create_key(database_url, tenant, "tests").secret
    with openai.OpenAI(base_url=f"{live.url}/v1", api_key=key, max_retries=0) as sdk:
        yield sdk


@pytest.fixture
def rest(
    native: tuple[LiveServer, ScriptedUpstream], client: openai.OpenAI
) -> Iterator[httpx.Client]:
    with httpx.Client(
        base_url=native[0].url, headers={"Authorization": f"Bearer {client.api_key}"}
    ) as api:
        yield api


def test_reasoning_items_go_back_upstream_byte_for_byte(
    client: openai.OpenAI, native: tuple[LiveServer, ScriptedUpstream], rest: httpx.Client
) -> None:
    _, upstream = native
    first = client.responses.create(model="answer-model", input="I am Ada.")
    reasoning = first.output[0]
    assert reasoning.type == "reasoning"
    assert reasoning.encrypted_content is not None
    assert first.output_text == "You said: I am Ada."
    second = client.responses.create(
        model="answer-model", input="Who am I?", previous_response_id=first.id
    )
    sent = upstream_calls(upstream)[-1]
    assert sent["store"] is False
    assert "reasoning.encrypted_content" in sent["include"]
    assert sent["input"][0] == {"role": "user", "content": "I am Ada."}
    assert sent["input"][1] == first.model_dump(exclude_none=True)["output"][0]  # as it came
    assert sent["input"][1]["encrypted_content"] == reasoning.encrypted_content
    assert sent["input"][-1] == {"role": "user", "content": "Who am I?"}
    assert client.responses.retrieve(second.id).output[0].type == "reasoning"
    thread = client.responses.with_raw_response.retrieve(second.id)
    assert thread.status_code == 200


def test_a_client_history_goes_upstream_as_the_client_sent_its_items(
    client: openai.OpenAI, native: tuple[LiveServer, ScriptedUpstream]
) -> None:
    """`X-Workingmem-History: client`: the input as it came, a reasoning item and its
    encrypted content included, not its chat view."""
    _, upstream = native
    first = client.responses.create(model="answer-model", input="I am Ada.", store=False)
    history = [
        {"role": "user", "content": "I am Ada."},
        *first.model_dump(exclude_none=True)["output"],
        {"role": "user", "content": "Who am I?"},
    ]
    client.responses.create(
        model="answer-model",
        input=history,
        store=False,
        extra_headers={"X-Workingmem-History": "client"},
    )
    sent = upstream_calls(upstream)[-1]["input"]
    assert sent == history
    assert sent[1]["type"] == "reasoning"
    assert sent[1]["encrypted_content"] == first.output[0].encrypted_content  # type: ignore[union-attr]


def test_a_responses_upstream_gets_the_cache_marks_of_the_window(
    database_url: str, tenant: str
) -> None:
    """A client that marks its newest message on every call (`prompt_cache_breakpoint`, what
    GPT-5.6's explicit caching asks) has a window of marked items: each goes upstream on the
    item it was on (OpenAI writes the newest four and matches at the newest 80; the newest 80
    are kept, `formats.breakpoints`)."""
    window = wm.Profile(id="window", working_memory=wm.Strategy.SLIDING_WINDOW)
    with ScriptedUpstream(responder=responses_model) as upstream:
        settings = settings_for(database_url, upstream, upstream_api="responses", profiles=[window])
        with LiveServer(create_app(settings)) as live:
            key = create_key(database_url, tenant, "tests").secret
            with openai.OpenAI(base_url=f"{live.url}/v1", api_key=key, max_retries=0) as client:
                previous: str | None = None
                for turn in range(6):
                    part: ResponseInputTextParam = {
                        "type": "input_text",
                        "text": f"Turn {turn}.",
                        "prompt_cache_breakpoint": {"mode": "explicit"},
                    }
                    response = client.responses.create(
                        model="answer-model",
                        input=[{"role": "user", "content": [part]}],
                        extra_headers={"X-Profile": "window"},
                        previous_response_id=previous,
                    )
                    previous = response.id
        sent = upstream_calls(upstream)[-1]["input"]
    users = [item for item in sent if item.get("role") == "user"]
    assert [said(item) for item in users] == [f"Turn {turn}." for turn in range(6)]
    marked = [said(item) for item in users if "prompt_cache_breakpoint" in item["content"][0]]
    assert marked == [f"Turn {turn}." for turn in range(6)]


def test_a_function_call_loop_through_a_responses_upstream(
    client: openai.OpenAI, native: tuple[LiveServer, ScriptedUpstream]
) -> None:
    _, upstream = native
    asked = client.responses.create(model="answer-model", input="weather in Lyon?", tools=[WEATHER])
    kinds = [item.type for item in asked.output]
    assert kinds == ["reasoning", "function_call"]
    call = asked.output[1]
    assert call.type == "function_call"
    tools = upstream_calls(upstream)[-1]["tools"]
    assert {"type": "function", **{k: WEATHER[k] for k in WEATHER if k != "type"}} in tools
    done = client.responses.create(
        model="answer-model",
        previous_response_id=asked.id,
        tools=[WEATHER],
        input=[{"type": "function_call_output", "call_id": call.call_id, "output": "sunny"}],
    )
    assert done.output_text == "It is sunny there."
    sent = upstream_calls(upstream)[-1]["input"]
    assert [item.get("type", "message") for item in sent] == [
        "message",
        "reasoning",
        "function_call",
        "function_call_output",
    ]
    assert sent[2]["call_id"] == call.call_id


def test_a_streamed_answer_from_a_responses_upstream(
    client: openai.OpenAI, rest: httpx.Client
) -> None:
    with client.responses.stream(model="answer-model", input="Stream it.") as stream:
        kinds = [event.type for event in stream]
        final = stream.get_final_response()
    assert kinds[0] == "response.created"
    assert kinds[-1] == "response.completed"
    assert "response.output_text.delta" in kinds
    assert [item.type for item in final.output] == ["reasoning", "message"]
    assert final.output_text == "You said: Stream it."
    stored = client.responses.retrieve(final.id)
    shown = final.model_dump(exclude_none=True)["output"]
    assert stored.model_dump(exclude_none=True)["output"] == shown  # as streamed, ids and all


def test_chat_completions_through_a_responses_upstream(
    client: openai.OpenAI, native: tuple[LiveServer, ScriptedUpstream], rest: httpx.Client
) -> None:
    _, upstream = native
    for text in ("I am Ada.", "Who am I?"):
        answer = client.chat.completions.create(
            model="answer-model",
            messages=[{"role": "user", "content": text}],
            extra_headers={"X-Thread-Id": "chat"},
        )
        assert answer.choices[0].message.content == f"You said: {text}"
    sent = upstream_calls(upstream)[-1]["input"]
    assert [item.get("type", "message") for item in sent] == [
        "message",
        "reasoning",  # the first answer's, kept though a chat client never sees it
        "message",
        "message",
    ]
    assert [said(item) for item in sent] == ["I am Ada.", "", "You said: I am Ada.", "Who am I?"]
    assert len(turns(rest, "chat")) == 4


def test_a_stored_prompt_goes_to_the_responses_upstream_that_keeps_it(
    client: openai.OpenAI, native: tuple[LiveServer, ScriptedUpstream]
) -> None:
    """OpenAI reads a ``prompt`` by its id; the gateway hands it on with the memory."""
    _, upstream = native
    prompt: Any = {"id": "pmpt_trip", "version": "2", "variables": {"city": "Lyon"}}
    answer = client.responses.create(model="answer-model", input="Plan my day.", prompt=prompt)
    assert answer.output_text == "You said: Plan my day."
    sent = upstream_calls(upstream)[-1]
    assert sent["prompt"] == prompt
    assert sent["input"][-1] == {"role": "user", "content": "Plan my day."}
