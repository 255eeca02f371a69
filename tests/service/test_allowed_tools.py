"""An ``allowed_tools`` tool choice (the model may call only the tools it names; every tool
stays in the request) reaches each kind of upstream as that API says it, with the gateway's own
agent-memory tools allowed beside the client's. The `openai` SDK over real HTTP, the scripted
upstream speaking chat, Responses or Anthropic's Messages."""

from __future__ import annotations

from typing import Any

import openai
import pytest

from tests.helpers import assert_valid_anthropic_request
from workingmem.agent_memory.tools import TOOL_NAMES
from workingmem.llm.testing import ScriptedUpstream


def function(name: str) -> Any:
    return {"type": "function", "function": {"name": name, "parameters": {"type": "object"}}}


TOOLS = [function("get_weather"), function("get_time")]
ONLY_WEATHER: Any = {
    "type": "allowed_tools",
    "allowed_tools": {
        "mode": "required",
        "tools": [{"type": "function", "function": {"name": "get_weather"}}],
    },
}
ASK: Any = [{"role": "user", "content": "Weather in Lyon?"}]
OWN = sorted(TOOL_NAMES)


def names(tools: list[dict[str, Any]]) -> list[str]:
    return sorted(t.get("name") or t["function"]["name"] for t in tools)


def test_the_upstream_gets_the_choice_in_its_own_terms(
    served: openai.OpenAI, upstream: ScriptedUpstream, upstream_api: str
) -> None:
    for ask in (
        lambda: served.chat.completions.create(
            model="answer-model", messages=ASK, tools=TOOLS, tool_choice=ONLY_WEATHER
        ),
        lambda: served.responses.create(
            model="answer-model",
            input="Weather in Lyon?",
            tools=[
                {"type": "function", "name": n, "parameters": None, "strict": None}
                for n in ("get_weather", "get_time")
            ],
            tool_choice={
                "type": "allowed_tools",
                "mode": "required",
                "tools": [{"type": "function", "name": "get_weather"}],
            },
        ),
    ):
        ask()
        sent = upstream.requests[-1]
        if upstream_api == "chat":
            assert names(sent["tools"]) == sorted(["get_weather", "get_time", *OWN])
            allowed = sent["tool_choice"]["allowed_tools"]
            assert allowed["mode"] == "required"
            assert names(allowed["tools"]) == sorted(["get_weather", *OWN])
        elif upstream_api == "responses":
            assert names(sent["tools"]) == sorted(["get_weather", "get_time", *OWN])
            assert sent["tool_choice"]["type"] == "allowed_tools"
            assert sent["tool_choice"]["mode"] == "required"
            assert names(sent["tool_choice"]["tools"]) == sorted(["get_weather", *OWN])
        else:  # no such choice at Anthropic: the tools are cut to those allowed
            assert_valid_anthropic_request(sent)
            assert names(sent["tools"]) == sorted(["get_weather", *OWN])
            assert sent["tool_choice"] == {"type": "any"}


@pytest.mark.parametrize(
    ("choice", "param"),
    [
        (
            {"type": "allowed_tools", "allowed_tools": {"mode": "sometimes", "tools": []}},
            "tool_choice.allowed_tools.mode",
        ),
        (
            {
                "type": "allowed_tools",
                "allowed_tools": {"mode": "auto", "tools": [{"type": "mcp", "server_label": "x"}]},
            },
            "tool_choice.allowed_tools.tools[0].type",
        ),
    ],
)
def test_a_choice_of_what_is_not_served_is_refused(
    choice: Any, param: str, served: openai.OpenAI, upstream_api: str
) -> None:
    with pytest.raises(openai.BadRequestError) as refused:
        served.chat.completions.create(
            model="answer-model", messages=ASK, tools=TOOLS, tool_choice=choice
        )
    assert refused.value.response.json()["error"]["param"] == param
