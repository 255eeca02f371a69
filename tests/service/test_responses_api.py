"""``/v1/responses`` as the `openai` SDK's users call it, in front of a chat-completions
upstream: chains of ``previous_response_id``, forks, streaming, structured outputs, a function
tool loop, ``store: false`` with the whole input. Real SDK, real HTTP, the scripted upstream."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest
from pydantic import BaseModel

from workingmem.llm.testing import Reply, ScriptedUpstream, tool_call

from .live import LiveServer, create_key
from .test_openai_clients import agent_upstream
from .test_openai_sdk import until

WEATHER: Any = {
    "type": "function",
    "name": "get_weather",
    "description": "The weather in a city.",
    "parameters": {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
        "additionalProperties": False,
    },
    "strict": True,
}
upstream_model = agent_upstream
"""A chat model with a weather tool: a weather question gets a call, a tool result an
answer that uses it, "json" a JSON answer, anything else an echo."""


def answers(upstream: ScriptedUpstream) -> list[dict[str, Any]]:
    return [r for r in upstream.requests if r.get("model") != "cheap-model"]


@pytest.fixture
def client(service: LiveServer, key: str, upstream: ScriptedUpstream) -> Iterator[openai.OpenAI]:
    upstream.responder = upstream_model
    with openai.OpenAI(base_url=f"{service.url}/v1", api_key=key, max_retries=0, timeout=10) as sdk:
        yield sdk


def thread_of(client: openai.OpenAI, **request: Any) -> tuple[Any, str]:
    """A response and the thread it was stored in (the ``X-Thread-Id`` header)."""
    raw = client.responses.with_raw_response.create(model="answer-model", **request)
    return raw.parse(), raw.headers["X-Thread-Id"]


def turns(api: httpx.Client, thread: str) -> list[dict[str, Any]]:
    page = api.get(f"/v1/threads/{thread}/messages", params={"limit": 100})
    assert page.status_code == 200, page.text
    return list(page.json()["data"])


def test_a_chain_of_previous_response_ids_is_one_thread_the_model_reads(
    client: openai.OpenAI, upstream: ScriptedUpstream, api: httpx.Client
) -> None:
    first, thread = thread_of(client, input="My name is Ada.")
    assert first.output_text == "You said: My name is Ada."
    assert first.status == "completed"
    assert first.id.startswith("resp_")
    assert first.usage is not None
    assert first.usage.input_tokens > 0
    second, same = thread_of(client, input="What is my name?", previous_response_id=first.id)
    assert same == thread
    assert second.previous_response_id == first.id
    sent = answers(upstream)[-1]["messages"]
    assert [m["content"] for m in sent if m["role"] != "system"] == [
        "My name is Ada.",
        "You said: My name is Ada.",
        "What is my name?",
    ]
    stored = turns(api, thread)
    assert [(m["role"], m["content"]) for m in stored] == [
        ("user", "My name is Ada."),
        ("assistant", "You said: My name is Ada."),
        ("user", "What is my name?"),
        ("assistant", "You said: What is my name?"),
    ]
    # what GET returns is what create returned; the input items are the request's own
    again = client.responses.retrieve(second.id)
    assert again.model_dump() == second.model_dump()
    inputs = client.responses.input_items.list(second.id)
    assert [item.model_dump(exclude_none=True)["content"] for item in inputs.data] == [
        [{"type": "input_text", "text": "What is my name?"}]
    ]


def test_continuing_from_an_older_response_forks_a_new_thread(
    client: openai.OpenAI, api: httpx.Client
) -> None:
    first, thread = thread_of(client, input="Plan A.")
    thread_of(client, input="Go on with A.", previous_response_id=first.id)
    other, fork = thread_of(client, input="Plan B instead.", previous_response_id=first.id)
    assert fork != thread
    assert [m["content"] for m in turns(api, fork)] == [
        "Plan A.",
        "You said: Plan A.",
        "Plan B instead.",
        "You said: Plan B instead.",
    ]
    assert [m["content"] for m in turns(api, thread)][2] == "Go on with A."  # untouched
    after, same = thread_of(client, input="More B.", previous_response_id=other.id)
    assert same == fork
    assert after.output_text == "You said: More B."


def test_a_function_tool_loop_stores_the_call_and_its_output_as_one_unit(
    client: openai.OpenAI, upstream: ScriptedUpstream, api: httpx.Client
) -> None:
    asked, thread = thread_of(client, input="What is the weather in Lyon?", tools=[WEATHER])
    (call,) = asked.output
    assert call.type == "function_call"
    assert call.name == "get_weather"
    assert json.loads(call.arguments) == {"city": "Lyon"}
    assert {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "The weather in a city.",
            "parameters": WEATHER["parameters"],
            "strict": True,
        },
    } in answers(upstream)[-1]["tools"]  # beside the gateway's own memory tools
    done, same = thread_of(
        client,
        previous_response_id=asked.id,
        tools=[WEATHER],
        input=[{"type": "function_call_output", "call_id": call.call_id, "output": "sunny"}],
    )
    assert same == thread
    assert done.output_text == "It is sunny there."
    stored = turns(api, thread)
    assert [m["role"] for m in stored] == ["user", "assistant", "tool", "assistant"]
    assert stored[1]["tool_calls"][0]["id"] == stored[2]["tool_call_id"] == call.call_id


def test_structured_output_with_a_pydantic_model(
    client: openai.OpenAI, upstream: ScriptedUpstream
) -> None:
    class Weather(BaseModel):
        city: str
        celsius: int

    parsed = client.responses.parse(
        model="answer-model", input="Lyon, as json", text_format=Weather
    )
    assert parsed.output_parsed == Weather(city="Lyon", celsius=21)
    sent = answers(upstream)[-1]["response_format"]
    assert sent["type"] == "json_schema"
    assert sent["json_schema"]["name"] == "Weather"
    assert sent["json_schema"]["schema"]["required"] == ["city", "celsius"]


def test_a_streamed_response_has_the_event_sequence_and_is_stored_as_streamed(
    client: openai.OpenAI, api: httpx.Client
) -> None:
    with client.responses.stream(model="answer-model", input="Stream this.") as stream:
        kinds = [event.type for event in stream]
        final = stream.get_final_response()
    deltas = kinds.count("response.output_text.delta")
    assert deltas >= 1
    assert [k for i, k in enumerate(kinds) if k != "response.output_text.delta" or i == 4] == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
        "response.output_text.delta",
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.completed",
    ]
    assert final.output_text == "You said: Stream this."
    stored = client.responses.retrieve(final.id)
    assert [(o.type, o.id) for o in stored.output if o.type == "message"] == [
        (o.type, o.id) for o in final.output if o.type == "message"
    ]  # stored under the id it was streamed with
    assert stored.output_text == final.output_text


def test_a_streamed_function_call_comes_whole_with_its_stored_id(client: openai.OpenAI) -> None:
    with client.responses.stream(
        model="answer-model", input="weather in Lyon?", tools=[WEATHER]
    ) as stream:
        events = list(stream)
        final = stream.get_final_response()
    numbers = [event.sequence_number for event in events]
    assert numbers == list(range(len(events)))
    (call,) = final.output
    assert call.type == "function_call"
    done = [e for e in events if e.type == "response.function_call_arguments.done"]
    assert [json.loads(e.arguments) for e in done] == [{"city": "Lyon"}]
    assert client.responses.retrieve(final.id).output[0].id == call.id


def test_store_false_with_the_whole_input_each_time_is_one_thread_stored_once(
    client: openai.OpenAI, api: httpx.Client
) -> None:
    history: list[Any] = [{"role": "user", "content": "I live in Lyon."}]
    first, thread = thread_of(client, input=history, store=False)
    history += [item.model_dump(exclude_none=True) for item in first.output]
    history.append({"role": "user", "content": "Where do I live?"})
    second, same = thread_of(client, input=history, store=False)
    assert same == thread
    assert [m["content"] for m in turns(api, thread)] == [
        "I live in Lyon.",
        "You said: I live in Lyon.",
        "Where do I live?",
        "You said: Where do I live?",
    ]
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(second.id)  # nothing kept of the response itself


def test_deleting_a_response_keeps_its_turns(client: openai.OpenAI, api: httpx.Client) -> None:
    first, thread = thread_of(client, input="Keep my words.")
    client.responses.delete(first.id)
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(first.id)
    with pytest.raises(openai.NotFoundError):
        client.responses.create(model="answer-model", input="x", previous_response_id=first.id)
    assert len(turns(api, thread)) == 2


def test_bad_requests_name_what_is_wrong_and_store_nothing(
    client: openai.OpenAI, api: httpx.Client
) -> None:
    first, thread = thread_of(client, input="Hello.")
    with pytest.raises(openai.BadRequestError) as hosted:
        client.responses.create(
            model="answer-model",
            input="search",
            previous_response_id=first.id,
            tools=[{"type": "web_search"}],
        )
    assert hosted.value.body is not None
    assert "web_search" in str(hosted.value.body)
    assert hosted.value.response.json()["error"]["param"] == "tools[0].type"
    with pytest.raises(openai.BadRequestError):
        client.responses.create(
            model="answer-model",
            input="both",
            previous_response_id=first.id,
            conversation="conv_x",
        )
    no_call_id: Any = [{"type": "function_call", "name": "f", "arguments": "{}"}]
    with pytest.raises(openai.UnprocessableEntityError) as wrong:
        client.responses.create(
            model="answer-model", previous_response_id=first.id, input=no_call_id
        )
    assert wrong.value.response.json()["error"]["param"] == "body.input.0.function_call.call_id"
    assert len(turns(api, thread)) == 2


def test_another_tenants_response_is_not_found(
    client: openai.OpenAI, service: LiveServer, database_url: str
) -> None:
    first, _ = thread_of(client, input="Mine.")
    other = create_key(database_url, "someone-else", "tests").secret
    with openai.OpenAI(base_url=f"{service.url}/v1", api_key=other, max_retries=0) as stranger:
        with pytest.raises(openai.NotFoundError):
            stranger.responses.retrieve(first.id)
        with pytest.raises(openai.NotFoundError):
            stranger.responses.input_items.list(first.id)
        with pytest.raises(openai.NotFoundError):
            stranger.responses.delete(first.id)
        with pytest.raises(openai.NotFoundError):
            stranger.responses.cancel(first.id)
        with pytest.raises(openai.NotFoundError):
            stranger.responses.create(
                model="answer-model", input="x", previous_response_id=first.id
            )
    assert client.responses.retrieve(first.id).id == first.id


def test_no_response_is_in_the_background_so_none_is_cancelled(
    client: openai.OpenAI, api: httpx.Client
) -> None:
    """Every response is answered in its request: a background one is refused when asked (a
    422 naming `background`), and cancelling a stored one is a 400 that says why."""
    with pytest.raises(openai.UnprocessableEntityError) as background:
        client.responses.create(model="answer-model", input="Later.", background=True)
    assert background.value.response.json()["error"]["param"] == "body.background"
    first, thread = thread_of(client, input="Now.")
    with pytest.raises(openai.BadRequestError) as refused:
        client.responses.cancel(first.id)
    assert "background" in refused.value.message
    with pytest.raises(openai.NotFoundError):
        client.responses.cancel("resp_missing")
    assert client.responses.retrieve(first.id).status == "completed"
    assert len(turns(api, thread)) == 2


def test_a_stream_broken_off_upstream_fails_and_stores_no_half_answer(
    client: openai.OpenAI, upstream: ScriptedUpstream, api: httpx.Client
) -> None:
    first, thread = thread_of(client, input="Hello.")
    upstream.push(Reply("A long answer that breaks off in the middle", drop_after_chunks=3))
    with client.responses.stream(
        model="answer-model", input="Tell me more.", previous_response_id=first.id
    ) as stream:
        kinds = [event.type for event in stream]
    assert kinds[:2] == ["response.created", "response.in_progress"]
    assert kinds[-1] == "response.failed"
    assert "response.completed" not in kinds
    stored = turns(api, thread)
    assert [m["content"] for m in stored] == ["Hello.", "You said: Hello.", "Tell me more."]
    again = client.responses.create(
        model="answer-model", input="Tell me more.", previous_response_id=first.id
    )  # asked again: answered, the question not stored twice
    assert again.output_text == "You said: Tell me more."
    assert len(turns(api, thread)) == 4


def test_a_long_chain_sends_the_memory_not_the_chain(
    client: openai.OpenAI, upstream: ScriptedUpstream, api: httpx.Client
) -> None:
    """The summary is written in the background once due; the requests after it carry the
    notes and the newest turns, not the whole chain."""
    previous, thread = None, ""
    for number in range(12):
        answer, thread = thread_of(
            client,
            input=f"Note {number}: please remember item {number}.",
            previous_response_id=previous,
        )
        previous = answer.id

    def summarized() -> dict[str, Any] | None:
        memory = api.get(f"/v1/threads/{thread}/memory").json()
        return memory if memory["summary"] and memory["covered_turns"] >= 20 else None

    assert until(summarized) is not None, "the background update never wrote a summary"
    thread_of(client, input="What do you remember?", previous_response_id=previous)
    system, *window = answers(upstream)[-1]["messages"]
    assert "The conversation so far, through turn" in system["content"]
    assert "please remember item 0" in system["content"]  # a fact of the first turn
    assert len(window) < 25  # the chain has 25 turns by now
    assert window[-1]["content"] == "What do you remember?"


def test_a_prompt_cache_key_keeps_sessions_that_open_alike_apart(
    client: openai.OpenAI, api: httpx.Client
) -> None:
    opening: list[Any] = [{"role": "user", "content": "Fix the failing test."}]
    answer, first = thread_of(client, input=opening, store=False, prompt_cache_key="session-a")
    _, other = thread_of(client, input=opening, store=False, prompt_cache_key="session-b")
    assert first != other
    more = [
        *opening,
        *(item.model_dump(exclude_none=True) for item in answer.output),
        {"role": "user", "content": "Now run it."},
    ]
    _, again = thread_of(client, input=more, store=False, prompt_cache_key="session-a")
    assert again == first  # the session goes on in its own thread
    assert len(turns(api, first)) == 4
    assert len(turns(api, other)) == 2


def test_history_client_sends_the_input_as_it_came(
    client: openai.OpenAI, upstream: ScriptedUpstream, api: httpx.Client
) -> None:
    given: list[Any] = [
        {"role": "user", "content": "Remember: tea."},
        {"role": "assistant", "content": "Noted."},
        {"role": "user", "content": "And coffee?"},
    ]
    client.responses.create(
        model="answer-model",
        input=given,
        instructions="Be brief.",
        extra_headers={"X-Workingmem-History": "client", "X-Thread-Id": "own"},
    )
    sent = answers(upstream)[-1]["messages"]
    assert sent[0] == {"role": "system", "content": "Be brief."}
    assert [m["content"] for m in sent[1:]] == ["Remember: tea.", "Noted.", "And coffee?"]
    assert [m["content"] for m in turns(api, "own")][:3] == [m["content"] for m in given]


def test_the_gateways_own_memory_calls_never_reach_the_client(
    client: openai.OpenAI, upstream: ScriptedUpstream
) -> None:
    """R30: the model saves to the working memory in a round the gateway runs; the client's
    response holds the answer only."""
    upstream.push(
        Reply(
            None,
            tool_calls=[tool_call("update_working_memory", {"content": "# User\n- Name: Ada\n"})],
        ),
        Reply("Saved."),
    )
    answer, _ = thread_of(client, input="Remember: my name is Ada.")
    assert [item.type for item in answer.output] == ["message"]
    assert answer.output_text == "Saved."
    memory = answers(upstream)[-1]["messages"]
    assert memory[-1]["role"] == "tool"  # the round ran on the server
