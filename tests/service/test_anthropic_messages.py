"""``POST /v1/messages`` with the `anthropic` SDK over HTTP, in front of a chat-completions
upstream: a thread named or found from the resent transcript, streaming with the SDK's helpers,
a parallel tool-use loop, Anthropic's error shape, tenants apart."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

import anthropic
import httpx
import pytest
from anthropic.types import MessageParam
from anthropic.types.beta import BetaCompactionBlockParam
from pydantic import BaseModel

from tests.helpers import assert_in_provider_order, summarizing_responder
from workingmem.llm.testing import Reply, ScriptedUpstream, tool_call

from .live import LiveServer, create_key
from .test_responses_api import turns

CALLS = itertools.count()
WEATHER: Any = {
    "name": "get_weather",
    "description": "The weather in a city.",
    "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}},
}


def claude_like(request: dict[str, Any]) -> Reply:
    """A chat upstream: a weather question gets two parallel calls, tool results an answer,
    anything else an echo."""
    if request.get("model") == "cheap-model":
        return summarizing_responder(request)
    last = request["messages"][-1]
    if last["role"] == "tool":
        results = [m["content"] for m in request["messages"] if m["role"] == "tool"][-2:]
        return Reply(f"Lyon: {results[0]}; Paris: {results[1]}.")
    text = last["content"] if isinstance(last["content"], str) else ""
    if "weather" in text:
        n = next(CALLS)
        return Reply(
            None,
            tool_calls=[
                tool_call("get_weather", {"city": "Lyon"}, id=f"toolu_{n}a"),
                tool_call("get_weather", {"city": "Paris"}, id=f"toolu_{n}b"),
            ],
        )
    return Reply(f"You said: {text}", prompt_tokens=40, completion_tokens=4)


def answers(upstream: ScriptedUpstream) -> list[dict[str, Any]]:
    return [r for r in upstream.requests if r.get("model") != "cheap-model"]


@pytest.fixture
def claude(
    service: LiveServer, key: str, upstream: ScriptedUpstream
) -> Iterator[anthropic.Anthropic]:
    upstream.responder = claude_like
    with anthropic.Anthropic(base_url=service.url, api_key=key, max_retries=0) as sdk:
        yield sdk


def ask(claude: anthropic.Anthropic, messages: list[MessageParam], **more: Any) -> tuple[Any, str]:
    raw = claude.messages.with_raw_response.create(
        model="answer-model", max_tokens=200, messages=messages, **more
    )
    return raw.parse(), raw.headers["X-Thread-Id"]


def test_a_named_thread_gets_the_memory_with_only_the_new_message(
    claude: anthropic.Anthropic, upstream: ScriptedUpstream, api: httpx.Client
) -> None:
    header = {"X-Thread-Id": "trip"}
    first, thread = ask(claude, [{"role": "user", "content": "I am Ada."}], extra_headers=header)
    assert thread == "trip"
    assert first.content[0].type == "text"
    assert first.content[0].text == "You said: I am Ada."
    assert (first.stop_reason, first.usage.input_tokens, first.usage.output_tokens) == (
        "end_turn",
        40,
        4,
    )
    ask(
        claude, [{"role": "user", "content": "Who am I?"}], system="Be brief.", extra_headers=header
    )
    sent = answers(upstream)[-1]["messages"]
    assert sent[0]["content"].startswith("Be brief.")
    assert [m["content"] for m in sent[1:]] == ["I am Ada.", "You said: I am Ada.", "Who am I?"]
    assert [m["content"] for m in turns(api, "trip")] == [m["content"] for m in sent[1:]] + [
        "You said: Who am I?"
    ]


def test_a_resent_transcript_is_one_thread_each_turn_once(
    claude: anthropic.Anthropic, api: httpx.Client
) -> None:
    transcript: list[MessageParam] = []
    threads = set()
    for text in ("Hi.", "Plan a trip.", "To Lyon."):
        transcript.append({"role": "user", "content": text})
        answer, thread = ask(claude, transcript)
        threads.add(thread)
        transcript.append({"role": "assistant", "content": answer.content[0].text})
    assert len(threads) == 1
    assert [m["content"] for m in turns(api, threads.pop())] == [
        str(m["content"]) for m in transcript
    ]


def test_a_parallel_tool_use_loop_keeps_the_unit_whole(
    claude: anthropic.Anthropic, upstream: ScriptedUpstream, api: httpx.Client
) -> None:
    header = {"X-Thread-Id": "tools"}
    question: MessageParam = {"role": "user", "content": "weather in Lyon and Paris?"}
    asked, _ = ask(claude, [question], tools=[WEATHER], extra_headers=header)
    assert asked.stop_reason == "tool_use"
    uses = [block for block in asked.content if block.type == "tool_use"]
    assert [(u.name, u.input) for u in uses] == [
        ("get_weather", {"city": "Lyon"}),
        ("get_weather", {"city": "Paris"}),
    ]
    results: list[Any] = [
        {"type": "tool_result", "tool_use_id": uses[0].id, "content": "sunny"},
        {
            "type": "tool_result",
            "tool_use_id": uses[1].id,
            "content": [{"type": "text", "text": "rain"}],
        },
    ]
    done, _ = ask(
        claude,
        [
            question,
            {"role": "assistant", "content": asked.content},
            {"role": "user", "content": results},
        ],
        tools=[WEATHER],
        extra_headers=header,
    )
    assert done.content[0].text == "Lyon: sunny; Paris: rain."
    assert [m["role"] for m in turns(api, "tools")] == [
        "user",
        "assistant",
        "tool",
        "tool",
        "assistant",
    ]
    for request in answers(upstream):
        assert_in_provider_order(request["messages"])
    offered = answers(upstream)[-1]["tools"]
    assert {
        "type": "function",
        "function": {
            "name": "get_weather",
            "parameters": WEATHER["input_schema"],
            "description": "The weather in a city.",
        },
    } in offered


def test_a_stream_through_the_sdk_helpers(claude: anthropic.Anthropic, api: httpx.Client) -> None:
    with claude.messages.stream(
        model="answer-model",
        max_tokens=200,
        messages=[{"role": "user", "content": "Stream this."}],
        extra_headers={"X-Thread-Id": "streamed"},
    ) as stream:
        text = "".join(stream.text_stream)
        final = stream.get_final_message()
    assert text == "You said: Stream this."
    assert final.content[0].type == "text"
    assert final.content[0].text == text
    assert final.stop_reason == "end_turn"
    assert [m["content"] for m in turns(api, "streamed")] == ["Stream this.", text]


def test_a_streamed_tool_use_comes_whole(claude: anthropic.Anthropic) -> None:
    with claude.messages.stream(
        model="answer-model",
        max_tokens=200,
        tools=[WEATHER],
        messages=[{"role": "user", "content": "weather now?"}],
    ) as stream:
        final = stream.get_final_message()
    assert [b.type for b in final.content] == ["tool_use", "tool_use"]
    assert final.stop_reason == "tool_use"


def test_errors_have_anthropics_shape(
    claude: anthropic.Anthropic, service: LiveServer, api: httpx.Client
) -> None:
    with pytest.raises(anthropic.BadRequestError) as last_is_assistant:
        ask(
            claude,
            [{"role": "assistant", "content": "Hel"}],  # nothing to answer, nor to go on from
            extra_headers={"X-Thread-Id": "prefill"},
        )
    body = last_is_assistant.value.body
    assert isinstance(body, dict)
    assert body["type"] == "error"
    assert body["error"]["type"] == "invalid_request_error"
    with (
        anthropic.Anthropic(base_url=service.url, api_key="wm_unknown", max_retries=0) as wrong,
        pytest.raises(anthropic.AuthenticationError) as refused,
    ):
        wrong.messages.create(
            model="answer-model", max_tokens=10, messages=[{"role": "user", "content": "x"}]
        )
    assert isinstance(refused.value.body, dict)
    assert refused.value.body["error"]["type"] == "authentication_error"
    assert api.get("/v1/threads/prefill/messages").status_code == 404  # nothing stored
    with pytest.raises(anthropic.BadRequestError) as no_schema:
        ask(
            claude,
            [{"role": "user", "content": "Hi"}],
            extra_body={"output_config": {"format": {"type": "json_schema", "schema": "none"}}},
            extra_headers={"X-Thread-Id": "unformatted"},
        )
    assert "output_config.format.schema" in str(no_schema.value)
    assert api.get("/v1/threads/unformatted/messages").status_code == 404


def test_mcp_servers_the_upstream_would_call_are_refused_by_name(
    claude: anthropic.Anthropic, api: httpx.Client
) -> None:
    """Claude's MCP connector: Anthropic's API calls the servers and answers with their tool
    blocks, as a server tool's; the gateway offers the model only the client's tools."""
    with pytest.raises(anthropic.BadRequestError) as refused:
        claude.beta.messages.create(
            model="answer-model",
            max_tokens=10,
            messages=[{"role": "user", "content": "What is on my calendar?"}],
            mcp_servers=[{"type": "url", "url": "https://calendar.invalid/mcp", "name": "cal"}],
            betas=["mcp-client-2025-04-04"],
            extra_headers={"X-Thread-Id": "calendar"},
        )
    assert "mcp_servers" in str(refused.value)
    assert "client tools" in str(refused.value)
    assert api.get("/v1/threads/calendar/messages").status_code == 404  # nothing stored


def test_another_tenant_never_reads_the_thread(
    claude: anthropic.Anthropic, upstream: ScriptedUpstream, service: LiveServer, database_url: str
) -> None:
    ask(
        claude,
        [{"role": "user", "content": "My secret is 42."}],
        extra_headers={"X-Thread-Id": "s"},
    )
    other = create_key(database_url, "tenant-elsewhere", "tests").secret
    with anthropic.Anthropic(base_url=service.url, api_key=other, max_retries=0) as stranger:
        stranger.messages.create(
            model="answer-model",
            max_tokens=10,
            messages=[{"role": "user", "content": "What is my secret?"}],
            extra_headers={"X-Thread-Id": "s"},
        )
    sent = answers(upstream)[-1]["messages"]
    assert all("42" not in str(m["content"]) for m in sent)


def test_count_tokens_counts_the_memory_and_stores_nothing(
    claude: anthropic.Anthropic, api: httpx.Client
) -> None:
    header = {"X-Thread-Id": "counted"}
    question: list[MessageParam] = [{"role": "user", "content": "How long is this?"}]
    alone = claude.messages.count_tokens(
        model="answer-model", messages=question, extra_headers=header
    ).input_tokens
    assert alone > 0
    assert api.get("/v1/threads/counted/messages").status_code == 404  # nothing stored
    ask(claude, [{"role": "user", "content": "A first message, " * 20}], extra_headers=header)
    later = claude.messages.count_tokens(
        model="answer-model", messages=question, tools=[WEATHER], extra_headers=header
    ).input_tokens
    assert later > alone + 40  # the thread's memory and the tool are in it
    assert len(turns(api, "counted")) == 2


def test_the_gateways_own_memory_calls_never_reach_claude(
    claude: anthropic.Anthropic, upstream: ScriptedUpstream
) -> None:
    """R30 on the Messages API."""
    upstream.push(
        Reply(None, tool_calls=[tool_call("get_working_memory", {})]),
        Reply("Nothing saved yet."),
    )
    answer, _ = ask(claude, [{"role": "user", "content": "What do you know?"}])
    assert [block.type for block in answer.content] == ["text"]
    assert answer.stop_reason == "end_turn"


class Trip(BaseModel):
    """What a Claude client asks for as structured output."""

    city: str
    days: int


def test_structured_output_reaches_a_chat_upstream_as_its_response_format(
    claude: anthropic.Anthropic, upstream: ScriptedUpstream
) -> None:
    """The SDK's ``messages.parse`` sends ``output_config.format``: a chat upstream is asked
    for the same schema as a ``json_schema`` response format, and its JSON answer is the
    parsed output the client gets."""

    def json_answer(request: dict[str, Any]) -> Reply:
        if request.get("model") == "cheap-model":
            return summarizing_responder(request)
        return Reply('{"city": "Lyon", "days": 3}')

    upstream.responder = json_answer
    parsed = claude.messages.parse(
        model="answer-model",
        max_tokens=200,
        messages=[{"role": "user", "content": "Plan my trip to Lyon."}],
        output_format=Trip,
        extra_headers={"X-Thread-Id": "structured"},
    )
    assert parsed.parsed_output == Trip(city="Lyon", days=3)
    sent = answers(upstream)[-1]["response_format"]
    assert sent["type"] == "json_schema"
    assert sent["json_schema"]["schema"]["properties"].keys() == {"city", "days"}


def test_claudes_compaction_summary_reaches_a_model_of_another_api(
    claude: anthropic.Anthropic, upstream: ScriptedUpstream, api: httpx.Client
) -> None:
    """Claude's context management answers a `compaction` block whose `content` is its summary
    of what came before; the client sends it back. A chat model reads that summary in the
    assistant's words, and so does the thread's summary update (the turn's chat view)."""
    compaction: BetaCompactionBlockParam = {
        "type": "compaction",
        "content": "Ada plans a trip to Lyon in May.",
    }
    failed: BetaCompactionBlockParam = {"type": "compaction", "content": None}  # nothing to read
    answer = claude.beta.messages.create(
        model="answer-model",
        max_tokens=200,
        messages=[
            {"role": "user", "content": "Hi"},
            {
                "role": "assistant",
                "content": [compaction, failed, {"type": "text", "text": "Sure."}],
            },
            {"role": "user", "content": "When do I travel?"},
        ],
        extra_headers={"X-Thread-Id": "compacted"},
    )
    assert answer.content[0].type == "text"
    said = answers(upstream)[-1]["messages"]
    assert said[-2] == {"role": "assistant", "content": "Ada plans a trip to Lyon in May.\nSure."}
    stored = turns(api, "compacted")[1]["content"]
    assert stored == "Ada plans a trip to Lyon in May.\nSure."  # the thread's chat view
