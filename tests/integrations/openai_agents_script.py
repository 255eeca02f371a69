"""The OpenAI Agents SDK's runner as the tests drive it, over a scripted model.

The agent's model is the SDK's `OpenAIChatCompletionsModel` over real HTTP to a scripted
OpenAI-compatible server on 127.0.0.1 (the `upstream` and `client` fixtures), so every request
the SDK makes is recorded as sent. Importing this module switches the SDK's tracing off: no
test exports spans.
"""

from __future__ import annotations

from typing import Any

from agents import (
    Agent,
    OpenAIChatCompletionsModel,
    RunConfig,
    Runner,
    function_tool,
    set_tracing_disabled,
)
from openai import AsyncOpenAI

import workingmem as wm
from workingmem.integrations.openai_agents import WorkingMemorySession

set_tracing_disabled(True)

SLIDING = wm.WorkingMemoryConfig(strategy=wm.Strategy.SLIDING_WINDOW)


@function_tool
def weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


def agent_for(client: AsyncOpenAI, session: WorkingMemorySession, **extra: Any) -> Agent[Any]:
    model = OpenAIChatCompletionsModel(model="gpt-4o-mini", openai_client=client)
    return Agent(name="assistant", model=model, tools=[weather, *session.tools()], **extra)


async def ask(agent: Agent[Any], session: WorkingMemorySession, text: str, **kwargs: Any) -> str:
    config = RunConfig(session_input_callback=session.input_callback())
    result = await Runner.run(agent, text, session=session, run_config=config, **kwargs)
    return str(result.final_output)


def history_of(request: dict[str, Any]) -> list[dict[str, Any]]:
    """A chat request's messages after the system message (the notes) when there is one."""
    messages: list[dict[str, Any]] = request["messages"]
    return messages[1:] if messages and messages[0]["role"] == "system" else messages
