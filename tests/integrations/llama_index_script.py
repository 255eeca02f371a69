"""LlamaIndex's offline model as the tests script it, and the agent they run it in.

The model is llama-index-core's `MockFunctionCallingLLM`, given a response generator that
keeps a copy of every request and answers from the test's script (tool calls, then an
answer): what a request carries is what the memory gave the agent, plus the agent's own
system prompt and its run's scratchpad.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pytest
from llama_index.core.agent.workflow import FunctionAgent
from llama_index.core.base.llms.types import ChatMessage, MessageRole
from llama_index.core.llms.mock import MockFunctionCallingLLM
from llama_index.core.tools import FunctionTool

import workingmem as wm
from workingmem.integrations.llama_index import WorkingMemoryBuffer

WORKFLOW_WARNINGS = [
    # A workflow lists its agent's methods with inspect.getmembers, which reads every
    # attribute of the agent's pydantic model, the deprecated ones too (`__fields__`,
    # `model_computed_fields` on the instance...): LlamaIndex's doing, not ours.
    pytest.mark.filterwarnings("ignore::pydantic.warnings.PydanticDeprecatedSince20:inspect"),
    pytest.mark.filterwarnings("ignore::pydantic.warnings.PydanticDeprecatedSince211:inspect"),
]
"""The `pytestmark` of a module whose tests run an agent's workflow."""

SYSTEM_PROMPT = "You are a helpful assistant."
SLIDING = wm.WorkingMemoryConfig(strategy=wm.Strategy.SLIDING_WINDOW)

Answer = Callable[[list[ChatMessage]], ChatMessage]
Buffers = Callable[..., WorkingMemoryBuffer]
"""The `buffer` fixture: makes a buffer from WorkingMemoryBuffer's keywords."""


class ScriptedModel:
    """LlamaIndex's offline function-calling model, answering with `answer` and keeping a
    copy of each request (the agent may change its messages after the call)."""

    def __init__(self, answer: Answer) -> None:
        self.answer = answer
        self.requests: list[list[ChatMessage]] = []

    def llm(self) -> MockFunctionCallingLLM:
        return MockFunctionCallingLLM(response_generator=self._respond)

    def _respond(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatMessage:
        self.requests.append([message.model_copy(deep=True) for message in messages])
        return self.answer(list(messages))


def says(text: str) -> Answer:
    return lambda messages: ChatMessage(role=MessageRole.ASSISTANT, content=text)


def history(request: list[ChatMessage]) -> list[ChatMessage]:
    """A request without its system messages (the agent's prompt, the memory text)."""
    return [message for message in request if message.role != MessageRole.SYSTEM]


def dumps(messages: Sequence[ChatMessage]) -> list[dict[str, Any]]:
    return [message.model_dump(mode="json") for message in messages]


def lookup(topic: str) -> str:
    """Looks a topic up in the application's knowledge base."""
    return f"notes on {topic}"


def agent_for(model: ScriptedModel, *tools: FunctionTool) -> FunctionAgent:
    return FunctionAgent(llm=model.llm(), tools=list(tools), system_prompt=SYSTEM_PROMPT)


async def ask(agent: FunctionAgent, memory: WorkingMemoryBuffer, text: str) -> str:
    result = await agent.run(user_msg=text, memory=memory)
    return str(result)
