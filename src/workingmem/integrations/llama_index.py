"""LlamaIndex memory kept by workingmem: a bounded window of whole units, notes, agent memory.

    from llama_index.core.agent.workflow import FunctionAgent
    from workingmem.integrations.llama_index import WorkingMemoryBuffer

    memory = WorkingMemoryBuffer(store="sqlite:///memory.db", tenant_id="t1", thread_id="th1")
    agent = FunctionAgent(llm=llm, tools=[*my_tools, *memory.tools()])
    answer = await agent.run(user_msg="Where did we leave off?", memory=memory)

`WorkingMemoryBuffer` is a LlamaIndex `BaseMemory`: an agent puts the messages of its runs
and gets the model's history from it. What it puts is stored verbatim (each `ChatMessage` as
its JSON, format ``llama_index``) beside an OpenAI chat view that counts the tokens and forms
the units (an assistant message with its tool calls together with all their results). What it
gets is the memory text (the agent-memory block and SUMMARY_BUFFER's notes) as a system
message, then the newest whole units that fit the budget's share, opening on a user message.
The ids of the thread come from the constructor, never from a model.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

from ..agent_memory import AgentMemory, AgentMemoryConfig
from ..config import WorkingMemoryConfig
from ..errors import ValidationError
from ..formats.files import chat_part_of_bytes
from ..llm import LLMClient
from ..messages import check_id
from ..stores import Store
from ..types import Message, ModelInfo, NativeItem, Turn
from ._extras import missing_extra
from ._memory import DEFAULT_MODEL, FrameworkMemory, MemoryContext

try:
    from llama_index.core.base.llms.base import BaseLLM
    from llama_index.core.base.llms.types import (
        ChatMessage,
        MessageRole,
        TextBlock,
        ToolCallBlock,
    )
    from llama_index.core.bridge.pydantic import BaseModel, Field, PrivateAttr
    from llama_index.core.memory.types import BaseMemory
    from llama_index.core.tools import FunctionTool, ToolMetadata
except ImportError as exc:  # pragma: no cover - exercised in a subprocess
    raise missing_extra("llama-index", "llama-index-core") from exc

__all__ = ["FORMAT", "WorkingMemoryBuffer", "from_turn", "to_native"]

FORMAT = "llama_index"
"""The format name of a stored LlamaIndex `ChatMessage` (`workingmem.NativeItem.format`)."""

T = TypeVar("T")

_ASSISTANT_ROLES = frozenset({"assistant", "chatbot", "model"})
"""LlamaIndex's names for the model's own messages (some providers name it otherwise)."""


class WorkingMemoryBuffer(BaseMemory):
    """A LlamaIndex memory over one workingmem thread: `aget` gives the model's history,
    `aput` / `aput_messages` store what a run added, `aget_all` gives the whole thread.

    Pass it to an agent's run (``agent.run(user_msg=..., memory=memory)``); a new buffer on
    the same store and ids continues the conversation, in this process or another one.
    """

    tenant_id: str = Field(frozen=True, description="Whose data it is: tenants never mix.")
    thread_id: str = Field(frozen=True, description="The conversation, within the tenant.")
    user_id: str | None = Field(
        default=None, frozen=True, description="The user, for agent memory kept per user."
    )
    _memory: FrameworkMemory = PrivateAttr()

    def __init__(
        self,
        *,
        tenant_id: str,
        thread_id: str,
        store: Store | str | None = None,
        user_id: str | None = None,
        config: WorkingMemoryConfig | None = None,
        model: str | ModelInfo = DEFAULT_MODEL,
        budget_tokens: int | None = None,
        llm: LLMClient | None = None,
        cheap_model: str = DEFAULT_MODEL,
        agent_memory: AgentMemoryConfig | AgentMemory | None = None,
    ) -> None:
        """
        Args:
            tenant_id: the tenant the thread belongs to.
            thread_id: the conversation.
            store: an open store, a database URL (``sqlite:///memory.db``,
                ``postgresql://...``), or None for ``WORKINGMEM_DATABASE_URL`` / the embedded
                default; one opened here is closed by `aclose`.
            user_id: the user, when known (agent memory with ``scope="user"`` needs it).
            config: the thread memory's settings; `WorkingMemoryConfig()` (SUMMARY_BUFFER)
                if None.
            model: the model the window is counted for (an id, or a `ModelInfo` with its
                context window); ``gpt-4o-mini`` by default.
            budget_tokens: the tokens the history and notes may take; the model's window
                minus its output reserve if None. The window gets `chat_history_ratio` of it.
            llm: the workingmem client of SUMMARY_BUFFER's cheap model (not the agent's
                LlamaIndex LLM); None for an `OpenAIClient` from ``OPENAI_API_KEY`` /
                ``OPENAI_BASE_URL``, else no summaries.
            cheap_model: the model id of the summary updates.
            agent_memory: the model-editable working memory and its three tools (`tools`);
                None for none.
        """
        check_id("tenant_id", tenant_id)
        check_id("thread_id", thread_id)
        if user_id is not None:
            check_id("user_id", user_id)
        if isinstance(llm, BaseLLM) or (llm is not None and not isinstance(llm, LLMClient)):
            raise ValidationError(
                "llm",
                "must be a workingmem LLMClient for the summaries (e.g. "
                f"workingmem.OpenAIClient()), got {type(llm).__name__}; the agent's LlamaIndex "
                "LLM goes to the agent",
            )
        memory = FrameworkMemory(
            store=store,
            config=config,
            model=model,
            budget_tokens=budget_tokens,
            llm=llm,
            cheap_model=cheap_model,
            agent_memory=agent_memory,
        )
        ids: dict[str, Any] = {"tenant_id": tenant_id, "thread_id": thread_id, "user_id": user_id}
        super().__init__(**ids)  # the fields are this class's: mypy sees BaseMemory's
        self._memory = memory

    @classmethod
    def class_name(cls) -> str:
        return "WorkingMemoryBuffer"

    @classmethod
    def from_defaults(cls, **kwargs: Any) -> WorkingMemoryBuffer:
        """The constructor, under the name LlamaIndex's memories share."""
        return cls(**kwargs)

    # -- the model's input -------------------------------------------------------------------

    async def aget(self, input: str | None = None, **kwargs: Any) -> list[ChatMessage]:
        """The memory text as a system message (when there is any), then the window.

        `input` is the current user message, which a retrieving memory searches with; the
        window does not depend on it (the agent has stored that message already).
        """
        return await self._memory.run(self._model_input)

    def get(self, input: str | None = None, **kwargs: Any) -> list[ChatMessage]:
        """`aget` for synchronous code."""
        return self._memory.run_sync(self._model_input)

    async def aget_all(self) -> list[ChatMessage]:
        """Every message of the thread, oldest first, without the memory text."""
        return await self._memory.run(self._all_messages)

    def get_all(self) -> list[ChatMessage]:
        """`aget_all` for synchronous code."""
        return self._memory.run_sync(self._all_messages)

    # -- writes -------------------------------------------------------------------------------

    async def aput(self, message: ChatMessage) -> None:
        """Stores `message` at the end of the thread."""
        await self.aput_messages([message])

    def put(self, message: ChatMessage) -> None:
        """`aput` for synchronous code."""
        self.put_messages([message])

    async def aput_messages(self, messages: list[ChatMessage]) -> None:
        """Stores `messages` at the end of the thread, all or none (a run's tool calls with
        their results form one unit)."""
        await self._memory.run(self._appending(messages))

    def put_messages(self, messages: list[ChatMessage]) -> None:
        """`aput_messages` for synchronous code."""
        self._memory.run_sync(self._appending(messages))

    async def aset(self, messages: list[ChatMessage]) -> None:
        """Makes `messages` the thread (the equal start is kept; [] deletes the thread)."""
        await self._memory.run(self._replacing(messages))

    def set(self, messages: list[ChatMessage]) -> None:
        """`aset` for synchronous code."""
        self._memory.run_sync(self._replacing(messages))

    async def areset(self) -> None:
        """Deletes the thread: its messages, notes and agent memory kept with it."""
        await self._memory.run(self._clear)

    def reset(self) -> None:
        """`areset` for synchronous code."""
        self._memory.run_sync(self._clear)

    # -- agent memory and lifetime --------------------------------------------------------------

    def tools(self) -> list[FunctionTool]:
        """The agent-memory tools as LlamaIndex tools, run on this buffer's thread and user;
        [] when agent memory is off (or kept per user and no user is known)."""
        return [
            self._tool(spec["function"]) for spec in self._memory.tool_specs(user_id=self.user_id)
        ]

    async def when_idle(self) -> None:
        """Returns once the queued summary updates are done (tests, shutdown)."""
        await self._memory.when_idle()

    async def aclose(self) -> None:
        """Finishes the queued updates, then closes what this buffer opened."""
        await self._memory.aclose()

    def close(self) -> None:
        """`aclose` for synchronous code."""
        self._memory.close()

    # -- the work, on the store's loop --------------------------------------------------------

    async def _model_input(self) -> list[ChatMessage]:
        context = await self._memory.context(**self._ids())
        return _with_memory_text(context)

    async def _all_messages(self) -> list[ChatMessage]:
        turns = await self._memory.all_turns(tenant_id=self.tenant_id, thread_id=self.thread_id)
        return [from_turn(turn) for turn in turns]

    def _appending(self, messages: Sequence[ChatMessage]) -> Callable[[], Awaitable[None]]:
        items = _native_items(messages)  # bad input fails here, before anything is stored

        async def append() -> None:
            await self._memory.append(**self._ids(), messages=items)

        return append

    def _replacing(self, messages: Sequence[ChatMessage]) -> Callable[[], Awaitable[None]]:
        items = _native_items(messages)

        async def replace() -> None:
            await self._memory.replace(**self._ids(), messages=items)

        return replace

    async def _clear(self) -> None:
        await self._memory.clear(tenant_id=self.tenant_id, thread_id=self.thread_id)

    def _ids(self) -> dict[str, Any]:
        return {"tenant_id": self.tenant_id, "thread_id": self.thread_id, "user_id": self.user_id}

    def _tool(self, function: dict[str, Any]) -> FunctionTool:
        name: str = function["name"]

        async def call(**arguments: Any) -> str:
            return await self._memory.run(
                lambda: self._memory.run_tool(name, arguments, **self._ids())
            )

        def call_sync(**arguments: Any) -> str:
            return self._memory.run_sync(
                lambda: self._memory.run_tool(name, arguments, **self._ids())
            )

        metadata = ToolMetadata(
            name=name,
            description=function["description"],
            fn_schema=_arguments_model(name, function["parameters"]),
        )
        return FunctionTool(fn=call_sync, async_fn=call, metadata=metadata)


# -- LlamaIndex messages <-> stored turns --------------------------------------------------------


def to_native(message: ChatMessage, *, field: str = "message") -> NativeItem:
    """`message` as the store keeps it: its JSON verbatim, beside its OpenAI chat view."""
    if not isinstance(message, ChatMessage):
        raise ValidationError(
            field, f"must be a LlamaIndex ChatMessage, got {type(message).__name__}"
        )
    item = message.model_dump(mode="json")
    return NativeItem(format=FORMAT, item=item, message=_chat_view(item, field))


def from_turn(turn: Turn) -> ChatMessage:
    """A stored turn as a LlamaIndex `ChatMessage`: the original when LlamaIndex wrote it,
    else one built from its chat view (a turn another client stored on the thread)."""
    item = turn.in_format(FORMAT)
    if item is not None:
        return ChatMessage.model_validate(item)
    blocks: list[Any] = []
    text = _text_of(turn.content)
    if text:
        blocks.append(TextBlock(text=text))
    blocks.extend(
        ToolCallBlock(
            tool_call_id=call.id, tool_name=call.name, tool_kwargs=_kwargs(call.arguments)
        )
        for call in turn.tool_calls
    )
    extra = {"tool_call_id": turn.tool_call_id} if turn.tool_call_id is not None else {}
    return ChatMessage(role=MessageRole(turn.role), blocks=blocks, additional_kwargs=extra)


def _native_items(messages: Sequence[ChatMessage]) -> list[NativeItem]:
    if isinstance(messages, (str, bytes)) or not isinstance(messages, Sequence):
        raise ValidationError("messages", "must be a list of LlamaIndex ChatMessages")
    return [to_native(message, field=f"messages[{i}]") for i, message in enumerate(messages)]


def _with_memory_text(context: MemoryContext) -> list[ChatMessage]:
    messages = [from_turn(turn) for turn in context.turns]
    if context.memory_text:
        messages.insert(0, ChatMessage(role=MessageRole.SYSTEM, content=context.memory_text))
    return messages


def _chat_view(item: dict[str, Any], field: str) -> Message:
    """The OpenAI chat message of a dumped `ChatMessage`: what counts, forms units, windows."""
    role = item.get("role")
    kwargs = item.get("additional_kwargs") or {}
    blocks = item.get("blocks") or []
    if role == "user":
        return {"role": "user", "content": _user_content(blocks)}
    text = "\n".join(part for block in blocks if (part := _block_text(block)) is not None)
    if role == "tool":
        call_id = kwargs.get("tool_call_id")
        if not isinstance(call_id, str):
            raise ValidationError(
                f"{field}.additional_kwargs.tool_call_id",
                "a tool message needs the id of the call it answers",
            )
        return {"role": "tool", "tool_call_id": call_id, "content": text}
    if role in _ASSISTANT_ROLES:
        calls = _tool_calls(blocks, kwargs, field)
        message: Message = {"role": "assistant", "content": text or (None if calls else "")}
        if calls:
            message["tool_calls"] = calls
        return message
    raise ValidationError(
        f"{field}.role",
        f"is {role!r}; a thread stores user, assistant and tool messages (a system prompt "
        "belongs to the agent's system_prompt)",
    )


def _user_content(blocks: Sequence[dict[str, Any]]) -> str | list[dict[str, Any]]:
    """A user message's chat content: its text, or parts when it carries an image, a
    recording or a file, so that they count as the model reads them (`workingmem.tokens._media`)."""
    parts: list[dict[str, Any]] = []
    for block in blocks:
        part = _media_part(block)
        if part is None and (text := _block_text(block)) is not None:
            part = {"type": "text", "text": text}
        if part is not None:
            parts.append(part)
    if all(part["type"] == "text" for part in parts):
        return "\n".join(part["text"] for part in parts)
    return parts


def _media_part(block: dict[str, Any]) -> dict[str, Any] | None:
    """The chat part of an image (its bytes or URL), a recording's or a document's bytes;
    None for the rest (media by path or URL read as a placeholder)."""
    kind = block.get("block_type")
    if kind == "image" and block.get("image"):
        media = block.get("image_mimetype") or "image/png"
        part = chat_part_of_bytes(media, block["image"], "image")
    elif kind == "image" and block.get("url"):
        part = {"type": "image_url", "image_url": {"url": str(block["url"])}}
    elif kind == "audio" and block.get("audio"):
        part = chat_part_of_bytes(f"audio/{block.get('format')}", block["audio"], "audio")
    elif kind == "document" and block.get("data"):
        media = block.get("document_mimetype") or "application/pdf"
        part = chat_part_of_bytes(media, block["data"], block.get("title") or "document")
    else:
        return None
    if part["type"] == "image_url" and block.get("detail"):
        part["image_url"]["detail"] = block["detail"]
    return part


def _block_text(block: dict[str, Any]) -> str | None:
    """The text a content block adds to the chat view; a placeholder for media, None for
    what the model does not read back (tool calls, thinking, cache points)."""
    kind = block.get("block_type")
    if kind == "text":
        return str(block.get("text") or "")
    if kind in ("tool_call", "thinking", "cache"):
        return None
    if kind == "citable":
        inner = [_block_text(part) for part in block.get("content") or ()]
        return "\n".join(part for part in inner if part is not None)
    if kind == "citation":
        cited = block.get("cited_content")
        return _block_text(cited) if isinstance(cited, dict) else None
    return f"[{kind}]"


def _tool_calls(
    blocks: Sequence[dict[str, Any]], kwargs: dict[str, Any], field: str
) -> list[dict[str, Any]]:
    """The calls of an assistant message: its `ToolCallBlock`s, and the OpenAI-style (or
    `ToolSelection`) calls of ``additional_kwargs["tool_calls"]`` not among them."""
    found = [
        (block.get("tool_call_id"), block.get("tool_name"), block.get("tool_kwargs"))
        for block in blocks
        if block.get("block_type") == "tool_call"
    ]
    for call in kwargs.get("tool_calls") or ():
        if isinstance(call, dict) and isinstance(call.get("function"), dict):
            function = call["function"]
            found.append((call.get("id"), function.get("name"), function.get("arguments")))
        elif isinstance(call, dict) and "tool_name" in call:
            found.append((call.get("tool_id"), call.get("tool_name"), call.get("tool_kwargs")))
        else:
            raise ValidationError(
                f"{field}.additional_kwargs.tool_calls", "has a call of an unknown shape"
            )
    calls: dict[str, dict[str, Any]] = {}
    for i, (call_id, name, arguments) in enumerate(found):
        if not isinstance(call_id, str) or not call_id:
            raise ValidationError(f"{field}.tool_calls[{i}].id", "a tool call needs its id")
        if not isinstance(name, str) or not name:
            raise ValidationError(f"{field}.tool_calls[{i}].name", "a tool call needs a name")
        text = arguments if isinstance(arguments, str) else json.dumps(arguments or {})
        calls.setdefault(
            call_id,
            {"id": call_id, "type": "function", "function": {"name": name, "arguments": text}},
        )
    return list(calls.values())


def _text_of(content: str | list[dict[str, Any]] | None) -> str:
    if isinstance(content, str):
        return content
    return "\n".join(
        str(part.get("text", "")) for part in content or () if part.get("type") == "text"
    )


def _kwargs(arguments: str) -> dict[str, Any] | str:
    """A call's arguments as `ToolCallBlock` keeps them: the object, else the text as sent."""
    try:
        parsed = json.loads(arguments)
    except ValueError:
        return arguments
    return parsed if isinstance(parsed, dict) else arguments


def _arguments_model(name: str, parameters: dict[str, Any]) -> type[BaseModel]:
    """A pydantic model whose JSON Schema is `parameters`: `ToolMetadata` takes a tool's
    arguments as a model; the agent-memory tools have theirs as JSON Schema (a schema mode's
    document is typed by the application's own schema)."""

    class Arguments(BaseModel):
        @classmethod
        def model_json_schema(cls, *args: Any, **kwargs: Any) -> dict[str, Any]:
            copy: dict[str, Any] = json.loads(json.dumps(parameters))  # the caller may change it
            return copy

    Arguments.__name__ = Arguments.__qualname__ = f"{name}_arguments"
    return Arguments
