"""Pydantic AI: a capability that gives an agent its thread's memory.

    from pydantic_ai import Agent
    from workingmem.integrations.pydantic_ai import WorkingMemoryCapability

    memory = WorkingMemoryCapability(
        store="sqlite:///memory.db", tenant_id="t1", thread_id="th1", user_id="u1"
    )
    agent = Agent("openai:gpt-4o-mini", capabilities=[memory])
    result = await agent.run("Where did we leave off?")  # no message_history: the thread is it

Before each model request the capability gives the model the thread's window (stored turns
that fit the budget, whole tool units) followed by the run's own messages, and adds the memory
text (the agent-memory block, then the notes) to the instructions; the agent-memory tools come
as a toolset run with the capability's ids. After a run its new messages are stored, each
once, verbatim: a `ModelMessage` as ``ModelMessagesTypeAdapter`` dumps it, beside its chat view.

One `ModelMessage` may be several chat turns (a request with N tool returns is N tool turns;
tool returns come before the user prompts of the same request, as units require). Its last
turn carries the message whole; each earlier turn carries only its own part, marked
``{"kind": "request-part", "part": ...}``. A window that starts inside a message gets the
message with the parts its turns hold, so what a later run reads back is what was stored.

``agent.run``, ``run_stream``, ``iter`` and ``run_sync`` all go through these hooks (they are
async; ``run_sync`` runs them on its own loop: close the capability with `close` then).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any, cast

from pydantic import ValidationError as PydanticValidationError

from ..agent_memory import AgentMemory, AgentMemoryConfig
from ..config import WorkingMemoryConfig
from ..formats.files import chat_part_of_bytes
from ..llm import LLMClient
from ..messages import check_id
from ..stores import Store
from ..types import ChatMessage, Message, ModelInfo, NativeItem, Turn
from ._extras import missing_extra
from ._memory import DEFAULT_MODEL, FrameworkMemory

try:
    from pydantic_ai import RunContext, Tool
    from pydantic_ai.capabilities import AbstractCapability
    from pydantic_ai.messages import (
        BinaryContent,
        FileUrl,
        ImageUrl,
        InstructionPart,
        ModelMessage,
        ModelMessagesTypeAdapter,
        ModelRequest,
        ModelResponse,
        RetryFeedbackPart,
        SystemPromptPart,
        TextContent,
        TextPart,
        ToolCallPart,
        ToolReturnPart,
        UploadedFile,
        UserContent,
        UserPromptPart,
    )
    from pydantic_ai.models import ModelRequestContext, ModelRequestParameters
    from pydantic_ai.run import AgentRunResult
    from pydantic_ai.toolsets import FunctionToolset
except ImportError as exc:  # pragma: no cover - exercised in a subprocess
    raise missing_extra("pydantic-ai", "Pydantic AI") from exc

__all__ = ["FORMAT", "WorkingMemoryCapability", "chat_messages"]

FORMAT = "pydantic_ai"
"""The format of the stored turns: their item is a `ModelMessage` as JSON."""
_PART = "request-part"
"""The mark of a turn holding one part of a request stored whole on a later turn."""

_View = tuple[int | None, Message]
"""A chat turn of a message, with the index of the part it comes from (None: the whole)."""


class WorkingMemoryCapability(AbstractCapability[Any]):
    """The memory of one thread, for `Agent(capabilities=[...])` or ``agent.run(capabilities=...)``.

    The ids are the application's: the agent-memory tools run with them, whatever the model
    writes in its arguments. A run's `message_history` is not needed and is not what the model
    reads: the thread is the history (messages of earlier runs given again are neither sent
    nor stored twice). A run that fails stores nothing.
    """

    def __init__(
        self,
        *,
        tenant_id: str,
        thread_id: str,
        user_id: str | None = None,
        store: Store | str | None = None,
        config: WorkingMemoryConfig | None = None,
        model: str | ModelInfo = DEFAULT_MODEL,
        budget_tokens: int | None = None,
        llm: LLMClient | None = None,
        cheap_model: str = DEFAULT_MODEL,
        agent_memory: AgentMemoryConfig | AgentMemory | None = None,
    ) -> None:
        """
        Args:
            tenant_id: the thread's tenant.
            thread_id: the thread.
            user_id: its user (None for none; the agent-memory tools of a per-user memory
                need one).
            store: an open store, a database URL (``sqlite:///memory.db``,
                ``postgresql://...``), or None for ``WORKINGMEM_DATABASE_URL`` / the embedded
                default ``.workingmem/memory.db``; one opened here is closed by `aclose`.
            config: the thread memory's settings; `WorkingMemoryConfig()` (SUMMARY_BUFFER)
                if None.
            model: the model the window is counted for (its tokenizer): an id, by default
                ``gpt-4o-mini`` with a 128,000-token window, or a `ModelInfo`.
            budget_tokens: the tokens of history and notes a request may carry; the model's
                window minus its output reserve if None.
            llm: the client of SUMMARY_BUFFER's cheap model; if None, an `OpenAIClient` when
                ``OPENAI_API_KEY`` or ``OPENAI_BASE_URL`` is set, else no summaries.
            cheap_model: the model id of the summary updates (``gpt-4o-mini``).
            agent_memory: the model-editable document and its three tools; None for none.
        """
        self.tenant_id = check_id("tenant_id", tenant_id)
        self.thread_id = check_id("thread_id", thread_id)
        self.user_id = None if user_id is None else check_id("user_id", user_id)
        self.memory = FrameworkMemory(
            store=store,
            config=config,
            model=model,
            budget_tokens=budget_tokens,
            llm=llm,
            cheap_model=cheap_model,
            agent_memory=agent_memory,
        )

    def __repr__(self) -> str:
        return (
            f"WorkingMemoryCapability(tenant_id={self.tenant_id!r}, "
            f"thread_id={self.thread_id!r}, user_id={self.user_id!r})"
        )

    @classmethod
    def get_serialization_name(cls) -> str | None:
        return None  # holds a store: not buildable from an agent spec

    # -- what the agent gets -----------------------------------------------------------------

    def get_toolset(self) -> FunctionToolset[Any] | None:
        """The agent-memory tools; None when agent memory is off."""
        specs = self.memory.tool_specs(user_id=self.user_id)
        if not specs:
            return None
        return FunctionToolset([self._tool(spec["function"]) for spec in specs])

    async def before_model_request(
        self, ctx: RunContext[Any], request_context: ModelRequestContext
    ) -> ModelRequestContext:
        """The model reads the thread's window, then this run's messages (for this request
        only: the run's own history stays as the run made it), and the instructions end with
        the memory text of the same load: the agent-memory block, then the notes (summary and
        facts, the recalled turns and the window's dates). The run's messages are the current
        exchange: recall searches for its words, and older turns make room for it."""
        current = [m for m in request_context.messages if m.run_id == ctx.run_id]
        context = await self.memory.context(**self._ids, pending=chat_messages(current))
        request_context.messages = _assemble(_messages_from_turns(context.turns), current)
        request_context.model_request_parameters = _with_instructions(
            request_context.model_request_parameters, context.memory_text
        )
        return request_context

    async def after_run(
        self, ctx: RunContext[Any], *, result: AgentRunResult[Any]
    ) -> AgentRunResult[Any]:
        """Stores the run's new messages (which queues the summary update when due)."""
        await self.append(result.new_messages())
        return result

    # -- the thread --------------------------------------------------------------------------

    async def append(self, messages: Sequence[ModelMessage]) -> list[Turn]:
        """Stores `messages` at the end of the thread, all or none: e.g. a conversation had
        before the memory. A request of only system prompts stores nothing (the agent gives
        its prompts again in each run)."""
        items = _native_items(messages)
        return await self.memory.append(**self._ids, messages=items)

    async def all_messages(self) -> list[ModelMessage]:
        """The whole thread, oldest first, as the runs produced it."""
        turns = await self.memory.all_turns(tenant_id=self.tenant_id, thread_id=self.thread_id)
        return _messages_from_turns(turns)

    async def clear(self) -> None:
        """Forgets the thread: its turns, notes and agent-memory document."""
        await self.memory.clear(tenant_id=self.tenant_id, thread_id=self.thread_id)

    async def when_idle(self) -> None:
        """Returns once the queued summary updates are done."""
        await self.memory.when_idle()

    async def aclose(self) -> None:
        """Finishes the queued updates, then closes what this capability opened."""
        await self.memory.aclose()

    def close(self) -> None:
        """`aclose` from synchronous code (after ``agent.run_sync``, say)."""
        self.memory.close()

    @property
    def _ids(self) -> dict[str, Any]:
        return {"tenant_id": self.tenant_id, "thread_id": self.thread_id, "user_id": self.user_id}

    def _tool(self, function: dict[str, Any]) -> Tool[Any]:
        name = function["name"]

        async def call(**arguments: Any) -> str:
            return await self.memory.run_tool(name, arguments, **self._ids)

        return Tool.from_schema(
            call,
            name=name,
            description=function.get("description"),
            json_schema=function["parameters"],
        )


# -- messages <-> turns ----------------------------------------------------------------------


def chat_messages(messages: Sequence[ModelMessage]) -> list[ChatMessage]:
    """The OpenAI chat view of Pydantic AI messages: what the memory counts, cuts into units
    and windows. System prompts, thinking and provider-run tools are not in it."""
    views = [view for message in messages for _, view in _views(message)]
    return cast(list[ChatMessage], views)  # chat-format dicts by construction


def _native_items(messages: Sequence[ModelMessage]) -> list[NativeItem]:
    """The turns that store `messages` verbatim (see the module's docstring)."""
    items: list[NativeItem] = []
    for message in messages:
        views = _views(message)
        dumped = ModelMessagesTypeAdapter.dump_python([message], mode="json")[0]
        for position, (index, view) in enumerate(views):
            whole = position == len(views) - 1
            item = dumped if whole else {"kind": _PART, "part": dumped["parts"][index]}
            items.append(NativeItem(format=FORMAT, item=item, message=view))
    return items


def _messages_from_turns(turns: Sequence[Turn]) -> list[ModelMessage]:
    """Stored turns back as Pydantic AI messages; a message cut by the window keeps the parts
    of its turns in it. Turns stored by others (plain chat messages) are converted."""
    messages: list[ModelMessage] = []
    held: list[dict[str, Any]] = []
    tool_names: dict[str, str] = {}
    for turn in turns:
        item = turn.in_format(FORMAT)
        if item is not None and item.get("kind") == _PART:
            held.append(item["part"])
            continue
        message = _load(item, turn, tool_names)
        if isinstance(message, ModelResponse):
            tool_names.update((c.tool_call_id, c.tool_name) for c in message.tool_calls)
        present = min(len(held), len(_views(message)) - 1) + 1
        if len(held) >= present:  # parts whose whole message is gone (popped)
            messages.append(_request_of(held[: len(held) - present + 1]))
        messages.append(_cut(message, present))
        held = []
    if held:
        messages.append(_request_of(held))
    return _merged(messages)


def _views(message: ModelMessage) -> list[_View]:
    """The chat turns of one message: a response is one assistant turn; a request is a tool
    turn per tool return, then a user turn per user prompt or retry feedback."""
    if isinstance(message, ModelResponse):
        return [(None, _assistant_view(message))]
    tools: list[_View] = []
    users: list[_View] = []
    for index, part in enumerate(message.parts):
        if isinstance(part, ToolReturnPart):
            content = part.model_response_str()
            tools.append(
                (index, {"role": "tool", "tool_call_id": part.tool_call_id, "content": content})
            )
        elif isinstance(part, UserPromptPart):
            users.append((index, {"role": "user", "content": _user_content(part.content)}))
        elif isinstance(part, RetryFeedbackPart):
            users.append((index, {"role": "user", "content": part.model_response()}))
    return tools + users


def _assistant_view(response: ModelResponse) -> Message:
    text = "\n\n".join(part.content for part in response.parts if isinstance(part, TextPart))
    calls = [
        {
            "id": part.tool_call_id,
            "type": "function",
            "function": {"name": part.tool_name, "arguments": part.args_as_json_str()},
        }
        for part in response.parts
        if isinstance(part, ToolCallPart)
    ]
    message: Message = {"role": "assistant", "content": text or (None if calls else "")}
    if calls:
        message["tool_calls"] = calls
    return message


def _user_content(content: str | Sequence[UserContent]) -> str | list[dict[str, Any]]:
    if isinstance(content, str):
        return content
    parts: list[dict[str, Any]] = []
    for item in content:
        if isinstance(item, str):
            parts.append({"type": "text", "text": item})
        elif isinstance(item, TextContent):
            parts.append({"type": "text", "text": item.content})
        elif isinstance(item, ImageUrl):
            parts.append({"type": "image_url", "image_url": {"url": item.url}})
        elif isinstance(item, BinaryContent):
            parts.append(chat_part_of_bytes(item.media_type, item.base64, item.identifier))
        elif isinstance(item, UploadedFile):
            parts.append({"type": "file", "file": {"file_id": item.file_id}})
        elif isinstance(item, FileUrl):  # a document, audio or video by URL: named
            kind = type(item).__name__.removesuffix("Url").lower()
            parts.append({"type": "text", "text": f"[{kind}: {item.url}]"})
        # a cache point is no content
    return parts or ""


def _load(item: dict[str, Any] | None, turn: Turn, tool_names: dict[str, str]) -> ModelMessage:
    """The stored message; made from the chat view when there is none in this format, or
    none this version of Pydantic AI reads."""
    if item is not None:
        try:
            return ModelMessagesTypeAdapter.validate_python([item])[0]
        except PydanticValidationError:
            pass
    return _from_turn(turn, tool_names)


def _request_of(parts: Sequence[dict[str, Any]]) -> ModelMessage:
    request = {"kind": "request", "parts": list(parts)}
    return ModelMessagesTypeAdapter.validate_python([request])[0]


def _cut(message: ModelMessage, present: int) -> ModelMessage:
    """`message` with the parts of its last `present` chat turns (and those of none)."""
    views = _views(message)
    if present >= len(views) or not isinstance(message, ModelRequest):
        return message
    viewed = {index for index, _ in views}
    kept = {index for index, _ in views[len(views) - present :]}
    parts = [p for i, p in enumerate(message.parts) if i in kept or i not in viewed]
    return dataclasses.replace(message, parts=parts)


def _from_turn(turn: Turn, tool_names: dict[str, str]) -> ModelMessage:
    """A turn another client stored, as the message Pydantic AI would have made of it, timed
    when it was stored (so that reading it twice gives equal messages)."""
    text = turn.content if isinstance(turn.content, str) else _text_of(turn.content)
    when: dict[str, Any] = {"timestamp": turn.created_at} if turn.created_at else {}
    if turn.role == "user":
        return ModelRequest(parts=[UserPromptPart(text, **when)], **when)
    if turn.role == "tool":
        call_id = turn.tool_call_id or ""
        name = tool_names.get(call_id, "")
        result = ToolReturnPart(name, text, tool_call_id=call_id, **when)
        return ModelRequest(parts=[result], **when)
    parts: list[TextPart | ToolCallPart] = [TextPart(text)] if text else []
    parts += [ToolCallPart(c.name, c.arguments, tool_call_id=c.id) for c in turn.tool_calls]
    return ModelResponse(parts=list(parts), **when)


def _text_of(content: object) -> str:
    if not isinstance(content, list):
        return ""
    return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))


def _merged(messages: list[ModelMessage]) -> list[ModelMessage]:
    """Consecutive tool-only requests (converted chat turns, popped parts) joined into one,
    as Pydantic AI sends the results of one response."""
    merged: list[ModelMessage] = []
    for message in messages:
        previous = merged[-1] if merged else None
        if (
            isinstance(message, ModelRequest)
            and isinstance(previous, ModelRequest)
            and _tool_only(message)
            and _tool_only(previous)
            and message.run_id is None
        ):
            merged[-1] = dataclasses.replace(previous, parts=[*previous.parts, *message.parts])
        else:
            merged.append(message)
    return merged


def _tool_only(request: ModelRequest) -> bool:
    return bool(request.parts) and all(isinstance(p, ToolReturnPart) for p in request.parts)


def _with_instructions(
    parameters: ModelRequestParameters, memory_text: str
) -> ModelRequestParameters:
    """The request's parameters with the memory text as its last instruction part (its
    `instruction_parts` are what the model reads, and what the request in the run's history
    records); unchanged for no text, or a request that has it already (a suspended response
    resumed is sent the instructions it was sent)."""
    parts = parameters.instruction_parts or []
    if not memory_text or any(memory_text in part.content for part in parts):
        return parameters
    part = InstructionPart(memory_text, dynamic=True)
    return dataclasses.replace(parameters, instruction_parts=[*parts, part])


def _assemble(window: list[ModelMessage], current: list[ModelMessage]) -> list[ModelMessage]:
    """The window then the run's messages, the run's system prompts first and the window's
    old ones left out (the agent gave them again)."""
    old = [_without_system_prompts(m) for m in window]
    if not old:
        return current
    first = current[0] if current else None
    if not isinstance(first, ModelRequest):
        return [*old, *current]
    system = [p for p in first.parts if isinstance(p, SystemPromptPart)]
    if system:
        rest = [p for p in first.parts if not isinstance(p, SystemPromptPart)]
        current = [dataclasses.replace(first, parts=rest), *current[1:]]
        head = old[0]
        if isinstance(head, ModelRequest):
            old[0] = dataclasses.replace(head, parts=[*system, *head.parts])
        else:
            old.insert(0, ModelRequest(parts=system))
    return [*old, *current]


def _without_system_prompts(message: ModelMessage) -> ModelMessage:
    if not isinstance(message, ModelRequest):
        return message
    if not any(isinstance(p, SystemPromptPart) for p in message.parts):
        return message
    parts = [p for p in message.parts if not isinstance(p, SystemPromptPart)]
    return dataclasses.replace(message, parts=parts)
