"""LangChain's offline model as the tests script it, and the small builders of their runs.

The model is langchain-core's `GenericFakeChatModel`, given the test's answers and tool calls
in order and keeping a copy of every request it receives; an agent is LangChain v1's own
`create_agent` loop around it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, cast

from langchain.agents.middleware import InputAgentState
from langchain_core.language_models import LanguageModelInput
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, SystemMessage
from langchain_core.outputs import ChatResult
from langchain_core.runnables import Runnable, RunnableConfig
from langchain_core.tools import BaseTool, tool
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import Field

import workingmem as wm

SYSTEM = "You are a helpful assistant."

WINDOW = wm.WorkingMemoryConfig(strategy=wm.Strategy.SLIDING_WINDOW)
"""For tests about storing, not about notes: no cheap model in the way."""


class RecordingModel(GenericFakeChatModel):
    """LangChain's scripted fake model, recording each request; `bind_tools` (which
    `create_agent` needs and the fake lacks) records the tools' names and binds nothing."""

    requests: list[list[BaseMessage]] = Field(default_factory=list)
    tool_names: list[str] = Field(default_factory=list)

    def bind_tools(
        self,
        tools: Sequence[dict[str, Any] | type | Callable[..., Any] | BaseTool],
        *,
        tool_choice: str | None = None,
        **kwargs: Any,
    ) -> Runnable[LanguageModelInput, AIMessage]:
        self.tool_names = [convert_to_openai_tool(t)["function"]["name"] for t in tools]
        return cast(Runnable[LanguageModelInput, AIMessage], self)

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
        self.requests.append(list(messages))
        return super()._generate(messages, *args, **kwargs)

    def history(self, index: int = -1) -> list[BaseMessage]:
        """A request's messages after its system message."""
        request = self.requests[index]
        return request[1:] if isinstance(request[0], SystemMessage) else request

    def system_text(self, index: int = -1) -> str:
        first = self.requests[index][0]
        return first.text if isinstance(first, SystemMessage) else ""


def scripted(*replies: AIMessage | str) -> RecordingModel:
    return RecordingModel(messages=iter(replies), disable_streaming=True)


@tool
def lookup(query: str) -> str:
    """Looks something up."""
    return f"found {query}"


def call(name: str, call_id: str, **arguments: Any) -> AIMessage:
    return AIMessage("", tool_calls=[{"name": name, "args": arguments, "id": call_id}])


def thread_config(thread_id: str) -> RunnableConfig:
    return {"configurable": {"thread_id": thread_id}}


def ask(text: str) -> InputAgentState:
    return {"messages": [{"role": "user", "content": text}]}


def stored_ids(turns: Sequence[wm.Turn]) -> list[str]:
    return [cast(dict[str, Any], turn.item)["data"]["id"] for turn in turns]


def state_ids(messages: Sequence[BaseMessage]) -> list[str]:
    return [cast(str, message.id) for message in messages]
