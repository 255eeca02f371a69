"""``POST /v1/messages`` in front of an Anthropic upstream (``upstream_api="anthropic"``), with
the `anthropic` SDK over HTTP on both sides of the gateway: the request forwarded natively,
thinking blocks and their signatures back upstream byte for byte (from the store, streamed,
in a tool loop, in the gateway's own memory rounds), every upstream request valid by
Anthropic's rules, the summary written through the same upstream."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from typing import Any

import anthropic
import httpx
import pytest
from anthropic.types import MessageParam

import workingmem as wm
from tests.helpers import assert_valid_anthropic_request, summarizing_responder
from workingmem.agent_memory.tools import anthropic_tools
from workingmem.llm._scripted_anthropic import count_of
from workingmem.llm.testing import RawBody, Reply, ScriptedUpstream, signature_of, tool_call
from workingmem.service import create_app

from .conftest import TEMPLATE, settings_for
from .live import LiveServer, create_key
from .test_anthropic_messages import WEATHER
from .test_openai_sdk import until
from .test_responses_api import turns

CALLS = itertools.count()
THINKING: Any = {"type": "enabled", "budget_tokens": 1024}


def _text(content: object) -> str:
    if isinstance(content, str):
        return content
    listed = content if isinstance(content, list) else []
    return "".join(str(b.get("text", "")) for b in listed if b.get("type") == "text")


def claude(request: dict[str, Any]) -> Reply:
    """An Anthropic upstream: thinks before each answer; a weather question gets two parallel
    calls, their results an answer, anything else an echo."""
    if request.get("model") == "cheap-model":
        return summarizing_responder(request)
    last = request["messages"][-1]["content"]
    blocks = last if isinstance(last, list) else []
    results = [b for b in blocks if b.get("type") == "tool_result"]
    if results:
        said = [
            _text(b["content"]) if isinstance(b["content"], list) else b["content"] for b in results
        ]
        return Reply(f"Lyon: {said[0]}; Paris: {said[1]}.", thinking="Both results are in.")
    text = _text(last)
    if "weather" in text:
        n = next(CALLS)
        return Reply(
            None,
            thinking="Two cities: two calls.",
            tool_calls=[
                tool_call("get_weather", {"city": "Lyon"}, id=f"toolu_{n}a"),
                tool_call("get_weather", {"city": "Paris"}, id=f"toolu_{n}b"),
            ],
        )
    return Reply(f"You said: {text}", thinking=f"The user said {text!r}.")


def answers(upstream: ScriptedUpstream) -> list[dict[str, Any]]:
    return [r for r in upstream.requests if r.get("model") != "cheap-model"]


@pytest.fixture
def service(database_url: str, upstream: ScriptedUpstream) -> Iterator[LiveServer]:
    upstream.responder = claude
    settings = settings_for(database_url, upstream, upstream_api="anthropic")
    with LiveServer(create_app(settings)) as live:
        yield live


@pytest.fixture
def sdk(service: LiveServer, key: str) -> Iterator[anthropic.Anthropic]:
    with anthropic.Anthropic(base_url=service.url, api_key=key, max_retries=0) as client:
        yield client


def create(sdk: anthropic.Anthropic, messages: list[MessageParam], **more: Any) -> Any:
    return sdk.messages.create(
        model="answer-model", max_tokens=2048, thinking=THINKING, messages=messages, **more
    )


def blocks(message: Any) -> list[dict[str, Any]]:
    return [block.model_dump(exclude_none=True) for block in message.content]


def test_the_request_goes_on_natively_and_the_thinking_comes_back_from_the_store(
    sdk: anthropic.Anthropic, upstream: ScriptedUpstream
) -> None:
    header = {
        "X-Thread-Id": "think",
        "anthropic-beta": "interleaved-thinking-2025-05-14",
        "anthropic-version": "2023-06-01",  # the client's version, not the gateway's SDK's
    }
    first = create(
        sdk,
        [{"role": "user", "content": "I am Ada."}],
        stop_sequences=["END"],
        extra_body={"top_k": 5},
        extra_headers=header,
    )
    thought, said = blocks(first)
    assert (thought["type"], said["type"]) == ("thinking", "text")
    assert thought["signature"] == signature_of("The user said 'I am Ada.'.")
    sent = answers(upstream)[-1]
    assert sent["thinking"] == THINKING
    assert (sent["top_k"], sent["stop_sequences"]) == (5, ["END"])  # as given, known or not
    assert sent["max_tokens"] == 2048
    assert upstream.headers[-1]["anthropic-beta"] == "interleaved-thinking-2025-05-14"
    assert upstream.headers[-1]["anthropic-version"] == "2023-06-01"
    create(sdk, [{"role": "user", "content": "Who am I?"}], extra_headers=header)
    again = answers(upstream)[-1]
    assert_valid_anthropic_request(again)
    assert again["messages"][1] == {"role": "assistant", "content": blocks(first)}
    assert "memory" in again["system"].lower()  # the memory's slot, in Anthropic's system


def test_a_resent_transcript_sends_each_thinking_block_back_unchanged(
    sdk: anthropic.Anthropic, upstream: ScriptedUpstream, api: httpx.Client
) -> None:
    """Claude Code's way: no thread id, the whole transcript every call."""
    transcript: list[MessageParam] = []
    shown = []
    threads = set()
    for text in ("Hi.", "Plan a trip.", "To Lyon."):
        transcript.append({"role": "user", "content": text})
        raw = sdk.messages.with_raw_response.create(
            model="answer-model", max_tokens=2048, thinking=THINKING, messages=transcript
        )
        answer = raw.parse()
        threads.add(raw.headers["X-Thread-Id"])
        shown.append(blocks(answer))
        transcript.append({"role": "assistant", "content": answer.content})
    assert len(threads) == 1
    last = answers(upstream)[-1]
    assert_valid_anthropic_request(last)
    sent = [m["content"] for m in last["messages"] if m["role"] == "assistant"]
    assert sent[-1] == shown[-2]  # the window's answers, as the upstream gave them
    assert all(content in shown for content in sent)
    assert len(turns(api, threads.pop())) == 6  # each turn once


def test_a_streamed_thinking_block_is_passed_on_and_stored(
    sdk: anthropic.Anthropic, upstream: ScriptedUpstream
) -> None:
    header = {"X-Thread-Id": "streamed"}
    with sdk.messages.stream(
        model="answer-model",
        max_tokens=2048,
        thinking=THINKING,
        messages=[{"role": "user", "content": "Stream this."}],
        extra_headers=header,
    ) as stream:
        kinds = [event.type for event in stream]
        final = stream.get_final_message()
    assert "thinking" in kinds
    assert "signature" in kinds
    assert blocks(final) == [
        {
            "type": "thinking",
            "thinking": "The user said 'Stream this.'.",
            "signature": signature_of("The user said 'Stream this.'."),
        },
        {"type": "text", "text": "You said: Stream this."},
    ]
    create(sdk, [{"role": "user", "content": "And then?"}], extra_headers=header)
    assert answers(upstream)[-1]["messages"][1]["content"] == blocks(final)


def test_a_parallel_tool_loop_keeps_its_thinking_with_its_calls(
    sdk: anthropic.Anthropic, upstream: ScriptedUpstream, api: httpx.Client
) -> None:
    header = {"X-Thread-Id": "tools"}
    question: MessageParam = {"role": "user", "content": "weather in Lyon and Paris?"}
    asked = create(sdk, [question], tools=[WEATHER], extra_headers=header)
    assert asked.stop_reason == "tool_use"
    assert [b["type"] for b in blocks(asked)] == ["thinking", "tool_use", "tool_use"]
    uses = blocks(asked)[1:]
    results: list[Any] = [
        {"type": "tool_result", "tool_use_id": uses[0]["id"], "content": "sunny"},
        {"type": "tool_result", "tool_use_id": uses[1]["id"], "content": "rain"},
    ]
    done = create(
        sdk,
        [
            question,
            {"role": "assistant", "content": asked.content},
            {"role": "user", "content": results},
        ],
        tools=[WEATHER],
        extra_headers=header,
    )
    assert blocks(done)[-1] == {"type": "text", "text": "Lyon: sunny; Paris: rain."}
    loop = answers(upstream)[-1]
    assert_valid_anthropic_request(loop)
    assert loop["messages"][1] == {"role": "assistant", "content": blocks(asked)}
    assert loop["messages"][2]["content"] == results
    assert WEATHER in loop["tools"]
    assert [m["role"] for m in turns(api, "tools")] == [
        "user",
        "assistant",
        "tool",
        "tool",
        "assistant",
    ]


def test_the_gateways_memory_round_sends_its_thinking_back_with_its_call(
    sdk: anthropic.Anthropic, upstream: ScriptedUpstream
) -> None:
    """A thinking model's call of the working-memory tool is answered by the gateway; the
    round's request holds the call after its own signed thinking, as Anthropic requires."""
    upstream.push(
        Reply(
            None,
            thinking="Worth keeping.",
            tool_calls=[
                tool_call(
                    "update_working_memory", {"content": "# User\n- Name: Ada\n"}, id="toolu_m"
                )
            ],
        ),
        Reply("Noted, Ada.", thinking="Saved."),
    )
    answer = create(
        sdk, [{"role": "user", "content": "I am Ada."}], extra_headers={"X-Thread-Id": "m"}
    )
    shown = blocks(answer)
    assert [b["type"] for b in shown] == ["thinking", "text"]  # no memory call shown
    assert shown[1]["text"] == "Noted, Ada."
    round_two = answers(upstream)[-1]
    assert_valid_anthropic_request(round_two)
    call = round_two["messages"][-2]
    assert call["content"][0] == {
        "type": "thinking",
        "thinking": "Worth keeping.",
        "signature": signature_of("Worth keeping."),
    }
    assert call["content"][1]["name"] == "update_working_memory"
    memory_tools = anthropic_tools(wm.AgentMemoryConfig(template=TEMPLATE).mode)
    assert all(tool in round_two["tools"] for tool in memory_tools)  # R22, in Anthropic's format


def test_history_client_sends_claudes_blocks_as_given(
    sdk: anthropic.Anthropic, upstream: ScriptedUpstream, api: httpx.Client
) -> None:
    """R28: `history: client` passes the transcript through, thinking blocks included, and
    still stores it."""
    first = create(sdk, [{"role": "user", "content": "Hi."}], extra_headers={"X-Thread-Id": "c"})
    transcript: list[MessageParam] = [
        {"role": "user", "content": "Hi."},
        {"role": "assistant", "content": first.content},
        {"role": "user", "content": "Go on."},
    ]
    create(
        sdk,
        transcript,
        extra_headers={"X-Thread-Id": "c", "X-Workingmem-History": "client"},
    )
    sent = answers(upstream)[-1]
    assert_valid_anthropic_request(sent)
    assert sent["messages"] == [
        {"role": "user", "content": "Hi."},
        {"role": "assistant", "content": blocks(first)},
        {"role": "user", "content": "Go on."},
    ]
    assert len(turns(api, "c")) == 4


def test_the_summary_is_written_through_the_anthropic_upstream(
    sdk: anthropic.Anthropic, upstream: ScriptedUpstream, api: httpx.Client
) -> None:
    header = {"X-Thread-Id": "long"}
    for n in range(5):
        create(sdk, [{"role": "user", "content": f"remember: item {n}"}], extra_headers=header)
    until(lambda: api.get("/v1/threads/long/memory").json()["covered_turns"] >= 4)
    helper = next(r for r in upstream.requests if r.get("model") == "cheap-model")
    assert_valid_anthropic_request(helper)
    assert helper["output_config"]["format"]["type"] == "json_schema"
    create(sdk, [{"role": "user", "content": "What do you know?"}], extra_headers=header)
    system = answers(upstream)[-1]["system"]
    assert system.count("through turn") == 1  # the notes, once


def test_another_tenant_never_reads_the_thread(
    sdk: anthropic.Anthropic, upstream: ScriptedUpstream, service: LiveServer, database_url: str
) -> None:
    create(
        sdk, [{"role": "user", "content": "My secret is 42."}], extra_headers={"X-Thread-Id": "s"}
    )
    other = create_key(database_url, "tenant-elsewhere", "tests").secret
    with anthropic.Anthropic(base_url=service.url, api_key=other, max_retries=0) as stranger:
        create(
            stranger,
            [{"role": "user", "content": "What is it?"}],
            extra_headers={"X-Thread-Id": "s"},
        )
    assert "42" not in json.dumps(answers(upstream)[-1])


def test_the_upstreams_refusal_reaches_the_client_in_anthropics_shape_and_can_be_retried(
    sdk: anthropic.Anthropic, upstream: ScriptedUpstream, api: httpx.Client
) -> None:
    from workingmem.llm.testing import StatusError

    upstream.push(StatusError(429, "slow down", retry_after=0))
    with pytest.raises(anthropic.RateLimitError) as refused:
        create(sdk, [{"role": "user", "content": "Hi"}], extra_headers={"X-Thread-Id": "r"})
    assert isinstance(refused.value.body, dict)
    assert refused.value.body["type"] == "error"
    assert refused.value.body["error"]["type"] == "rate_limit_error"
    create(sdk, [{"role": "user", "content": "Hi"}], extra_headers={"X-Thread-Id": "r"})
    assert [m["role"] for m in turns(api, "r")] == ["user", "assistant"]  # asked again, once


def test_an_overload_in_the_middle_of_the_upstreams_stream_reaches_the_client_as_one(
    sdk: anthropic.Anthropic, upstream: ScriptedUpstream, api: httpx.Client
) -> None:
    """Claude's stream can fail after it began (an ``overloaded_error`` event): the client's
    stream ends with the same error type, not a 200's, nothing of the answer is stored, and
    the question asked again is answered."""
    message: dict[str, Any] = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "answer-model",
        "content": [],
        "stop_reason": None,
        "usage": {"input_tokens": 5, "output_tokens": 1},
    }
    events: list[dict[str, Any]] = [
        {"type": "message_start", "message": message},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "It"}},
        {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
    ]
    body = "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events)
    upstream.push(RawBody(body, content_type="text/event-stream"))
    header = {"X-Thread-Id": "overloaded"}
    question: list[MessageParam] = [{"role": "user", "content": "Hi"}]

    def read_the_stream() -> None:
        with sdk.messages.stream(
            model="answer-model", max_tokens=256, messages=question, extra_headers=header
        ) as stream:
            for _ in stream:
                pass

    with pytest.raises(anthropic.APIStatusError) as failed:
        read_the_stream()
    assert isinstance(failed.value.body, dict)
    assert failed.value.body["error"]["type"] == "overloaded_error"
    assert [m["role"] for m in turns(api, "overloaded")] == ["user"]
    create(sdk, question, extra_headers=header)
    assert [m["role"] for m in turns(api, "overloaded")] == ["user", "assistant"]


def test_count_tokens_is_the_upstreams_count_of_what_would_be_sent(
    sdk: anthropic.Anthropic, upstream: ScriptedUpstream, api: httpx.Client
) -> None:
    header = {"X-Thread-Id": "counted"}
    first = create(sdk, [{"role": "user", "content": "A first message."}], extra_headers=header)
    question: list[MessageParam] = [{"role": "user", "content": "How long is this?"}]
    counted = sdk.messages.count_tokens(
        model="answer-model", messages=question, thinking=THINKING, extra_headers=header
    )
    asked = upstream.requests[-1]
    assert "max_tokens" not in asked  # a count, not an answer
    assert asked["thinking"] == THINKING
    assert counted.input_tokens == count_of(asked)
    assert asked["messages"][1] == {"role": "assistant", "content": blocks(first)}
    assert len(turns(api, "counted")) == 2  # nothing stored by the count
    create(sdk, question, extra_headers=header)
    sent = answers(upstream)[-1]
    assert (sent["system"], sent["messages"]) == (asked["system"], asked["messages"])


def test_claude_codes_cache_marks_stay_within_anthropics_four(
    sdk: anthropic.Anthropic, upstream: ScriptedUpstream
) -> None:
    """Claude Code marks its system prompt and its newest messages on every call, and resends
    the transcript: the stored messages keep their old marks, the upstream gets the newest."""
    ephemeral: Any = {"type": "ephemeral"}
    system: Any = [{"type": "text", "text": "You are a coding agent.", "cache_control": ephemeral}]
    transcript: list[Any] = []
    for n in range(5):
        marked = [
            {"type": "text", "text": f"file {n}", "cache_control": ephemeral},
            {"type": "text", "text": f"step {n}", "cache_control": ephemeral},
        ]
        transcript.append({"role": "user", "content": marked})
        answer = create(sdk, transcript, system=system)
        transcript.append({"role": "assistant", "content": answer.content})
        sent = answers(upstream)[-1]
        assert_valid_anthropic_request(sent)  # at most four marks, whatever the window holds
    assert sent["system"][0]["cache_control"] == ephemeral
    assert sent["system"][0]["text"].startswith("You are a coding agent.")
    newest = sent["messages"][-1]["content"][-1]
    assert newest == {"type": "text", "text": "step 4", "cache_control": ephemeral}
