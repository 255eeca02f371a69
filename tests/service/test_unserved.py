"""What the gateway does not serve, in the shapes the official SDKs' types allow, is a 400 that
names it on every API (not a 422 on the shape), and nothing is stored: tools the upstream
would run, tool choices of them, chat's deprecated ``functions``."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import anthropic
import httpx
import openai
import pytest

from .live import LiveServer

WEATHER: Any = {
    "type": "function",
    "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {}}},
}
ASK: Any = [{"role": "user", "content": "Weather in Lyon?"}]


@pytest.fixture
def oai(service: LiveServer, key: str) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=f"{service.url}/v1", api_key=key, max_retries=0, timeout=10) as sdk:
        yield sdk


@pytest.fixture
def claude(service: LiveServer, key: str) -> Iterator[anthropic.Anthropic]:
    with anthropic.Anthropic(base_url=service.url, api_key=key, max_retries=0) as sdk:
        yield sdk


def refused(raised: pytest.ExceptionInfo[Any]) -> tuple[str | None, str]:
    """The error's param and message, as the client got them."""
    error = raised.value.response.json()["error"]
    return error.get("param"), error["message"]


def stored_nothing(api: httpx.Client, thread: str) -> None:
    assert api.get(f"/v1/threads/{thread}/messages").status_code == 404


@pytest.mark.parametrize(
    ("fields", "param", "named"),
    [
        (
            {"tools": [WEATHER, {"type": "web_search"}]},
            "tools[1].type",
            "'web_search'",
        ),
        (
            {"tools": [WEATHER], "tool_choice": {"type": "web_search"}},
            "tool_choice.type",
            "'web_search'",
        ),
        ({"functions": [WEATHER["function"]]}, "functions", "deprecated"),
        ({"function_call": "auto"}, "function_call", "deprecated"),
        (
            {
                "messages": [
                    *ASK,
                    {"role": "assistant", "content": "Calling."},
                    {"role": "function", "name": "get_weather", "content": "sunny"},
                ]
            },
            "messages[2].role",
            "deprecated",
        ),
    ],
)
def test_chat_completions(
    fields: dict[str, Any], param: str, named: str, oai: openai.OpenAI, api: httpx.Client
) -> None:
    request: dict[str, Any] = {"messages": ASK, **fields}
    with pytest.raises(openai.BadRequestError) as raised:
        oai.chat.completions.create(
            model="answer-model", extra_headers={"X-Thread-Id": "t1"}, **request
        )
    assert refused(raised)[0] == param
    assert named in refused(raised)[1]
    stored_nothing(api, "t1")


@pytest.mark.parametrize(
    "choice",
    [
        {"type": "mcp", "server_label": "deepwiki"},
        {"type": "web_search_preview"},
    ],
)
def test_responses_tool_choices(choice: Any, oai: openai.OpenAI, api: httpx.Client) -> None:
    with pytest.raises(openai.BadRequestError) as raised:
        oai.responses.create(
            model="answer-model",
            input="Weather in Lyon?",
            tool_choice=choice,
            extra_headers={"X-Thread-Id": "t1"},
        )
    assert refused(raised) == (
        "tool_choice.type",
        f"tool_choice.type: {choice['type']!r} tool choices are not served: only 'none', "
        "'auto', 'required', 'allowed_tools', a function tool or a custom tool",
    )
    stored_nothing(api, "t1")


def test_anthropic_server_tools(claude: anthropic.Anthropic, api: httpx.Client) -> None:
    tools: Any = [
        {"name": "weather", "input_schema": {"type": "object"}},
        {"type": "web_search_20250305", "name": "web_search", "max_uses": 3},
    ]
    with pytest.raises(anthropic.BadRequestError) as raised:
        claude.messages.create(
            model="answer-model",
            max_tokens=100,
            messages=ASK,
            tools=tools,
            extra_headers={"X-Thread-Id": "t1"},
        )
    assert "tools[1].type: 'web_search_20250305' tools are not served" in str(raised.value)
    with pytest.raises(anthropic.BadRequestError):
        claude.messages.count_tokens(model="answer-model", messages=ASK, tools=tools)
    stored_nothing(api, "t1")
