"""Pydantic AI's offline model as the tests script it: a `FunctionModel` function that calls
tools when told, answers, and records every request as the model received it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic_ai import Agent
from pydantic_ai.messages import (
    ModelMessage,
    ModelResponse,
    TextPart,
    ToolCallPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

import workingmem as wm
from workingmem.integrations.pydantic_ai import WorkingMemoryCapability, chat_messages


@dataclass
class Seen:
    """One model request as the model received it."""

    messages: list[ModelMessage]
    instructions: str | None

    @property
    def chat(self) -> list[wm.ChatMessage]:
        return chat_messages(self.messages)

    @property
    def prompts(self) -> list[str]:
        return [
            str(part.content)
            for message in self.messages
            for part in message.parts
            if isinstance(part, UserPromptPart)
        ]


@dataclass
class Script:
    """A `FunctionModel` function: answers each user prompt with `answer`, first calling
    `calls` (name, arguments) when set, and records every request."""

    answer: str = "ok"
    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    seen: list[Seen] = field(default_factory=list)
    runs: int = 0

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.seen.append(Seen(list(messages), info.instructions))
        last = messages[-1]
        if self.calls and any(isinstance(p, UserPromptPart) for p in last.parts):
            self.runs += 1
            return ModelResponse(
                parts=[
                    ToolCallPart(name, args, tool_call_id=f"{name}-{self.runs}")
                    for name, args in self.calls
                ]
            )
        return ModelResponse(parts=[TextPart(self.answer)])

    def agent(self, memory: WorkingMemoryCapability, **kwargs: Any) -> Agent[None, str]:
        return Agent(FunctionModel(self), capabilities=[memory], **kwargs)


def assert_units_whole(chat: Sequence[wm.ChatMessage]) -> None:
    """What a provider accepts: the history opens on a user turn; every tool result follows
    the assistant turn that called it; every call has its result before the next turn."""
    assert chat[0]["role"] == "user", chat[0]
    open_calls: set[str] = set()
    for message in chat:
        if message["role"] == "tool":
            assert message["tool_call_id"] in open_calls, f"an orphaned tool result: {message}"
            open_calls.discard(message["tool_call_id"])
            continue
        assert not open_calls, f"calls without results: {open_calls}"
        open_calls = set()
        if message["role"] == "assistant":
            open_calls = {call["id"] for call in message.get("tool_calls", [])}
    assert not open_calls, f"calls without results: {open_calls}"
