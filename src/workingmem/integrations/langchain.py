"""LangChain v1: workingmem's memory as an agent middleware for `create_agent`.

    from langchain.agents import create_agent
    from workingmem.integrations.langchain import WorkingMemoryMiddleware

    memory = WorkingMemoryMiddleware(store="sqlite:///memory.db", tenant_id="t1")
    agent = create_agent(model, tools=[...], middleware=[memory])
    agent.invoke({"messages": [{"role": "user", "content": "hi"}]},
                 {"configurable": {"thread_id": "th1"}})

Unlike `SummarizationMiddleware`, nothing in the agent's state is rewritten: each model call
gets a request whose messages are the thread's window (whole units within the budget) and
whose system message carries the notes and the agent-memory block, while the state keeps
every message. The messages the run adds are stored verbatim (``message_to_dict``) beside
their chat view, each once: before a model call what the state has that the thread lacks,
right after it the model's answer, after the agent what came last (a ``return_direct`` tool).

What is new: the state's messages after the newest one the thread holds, found by message id
(LangGraph gives every message one), so a checkpointer resending the whole state adds
nothing twice; a state rewound past stored turns (time travel, a regenerated answer) replaces
them. Without a shared id, the overlap rule of the library: the longest end of the thread
that the state opens with is stored already (a client resending its history, a retry).

The ids: the tenant and the user from the constructor only (a run's configuration can come
from a client), the thread from the run's ``configurable.thread_id``, else ``thread_id=``.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, cast

from ._extras import missing_extra

try:
    from langchain.agents.middleware import (
        AgentMiddleware,
        AgentState,
        ModelRequest,
        ModelResponse,
    )
    from langchain_core.messages import (
        AIMessage,
        AnyMessage,
        BaseMessage,
        SystemMessage,
        message_to_dict,
        messages_from_dict,
    )
    from langchain_core.messages.utils import convert_to_messages, convert_to_openai_messages
    from langchain_core.runnables import RunnableConfig
    from langchain_core.tools import BaseTool, StructuredTool
    from langgraph.prebuilt import ToolRuntime
    from langgraph.runtime import ExecutionInfo, Runtime
except ImportError as exc:  # pragma: no cover - exercised in a subprocess
    raise missing_extra("langchain", "LangChain") from exc

from ..agent_memory import AgentMemory, AgentMemoryConfig
from ..config import WorkingMemoryConfig
from ..errors import NotFoundError, ValidationError
from ..llm import LLMClient
from ..messages import MAX_MESSAGES_PER_APPEND, check_id, normalize_messages, overlap
from ..stores import Store
from ..types import Message, ModelInfo, NativeItem, Turn
from ._memory import DEFAULT_MODEL, FrameworkMemory

__all__ = ["FORMAT", "WorkingMemoryMiddleware", "chat_view", "from_turn", "to_native"]

FORMAT = "langchain"
"""The format name of a stored LangChain message (its `message_to_dict` form)."""

_PARTS = {
    "user": frozenset({"text", "image_url", "input_audio", "file"}),
    "assistant": frozenset({"text", "refusal"}),
    "tool": frozenset({"text"}),
}
"""The content parts a chat view keeps per role; any other part reads as its text."""


@dataclass(frozen=True, slots=True)
class _Ids:
    tenant_id: str
    thread_id: str
    user_id: str | None


class WorkingMemoryMiddleware(AgentMiddleware[AgentState[Any], Any, Any]):
    """The thread's memory for a `create_agent` agent: the window and the notes go to the
    model, the run's messages to the store, the agent-memory tools to the model's tools."""

    def __init__(
        self,
        *,
        store: Store | str | None = None,
        tenant_id: str,
        thread_id: str | None = None,
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
            store: an open store, a database URL (``sqlite:///memory.db``,
                ``postgresql://...``), or None for ``WORKINGMEM_DATABASE_URL`` / the embedded
                default ``.workingmem/memory.db``.
            tenant_id: whose threads these are; never taken from a run or a model.
            thread_id: the thread of a run without ``configurable.thread_id``; None makes
                such a run a `ValidationError`.
            user_id: the user (the owner of a ``scope="user"`` agent memory); None for none.
            config: the memory's settings; `WorkingMemoryConfig()` (SUMMARY_BUFFER) if None.
            model: the model the window is counted for (an id or a `ModelInfo`);
                ``gpt-4o-mini`` by default.
            budget_tokens: the tokens a call may spend on history and notes; the model's
                window minus its output reserve if None. The window takes
                ``config.chat_history_ratio`` of it.
            llm: SUMMARY_BUFFER's cheap-model client; None takes ``OPENAI_API_KEY`` /
                ``OPENAI_BASE_URL`` if set, else no summaries (a warning says so).
            cheap_model: the model id of the summary updates; ``gpt-4o-mini`` by default.
            agent_memory: the document the model edits through three tools; None for none.
        """
        self.tenant_id = check_id("tenant_id", tenant_id)
        self.thread_id = None if thread_id is None else check_id("thread_id", thread_id)
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
        """The memory underneath: the store, the window, the background updates."""
        self.tools: Sequence[BaseTool] = [
            self._memory_tool(spec["function"])
            for spec in self.memory.tool_specs(user_id=self.user_id)
        ]

    # -- the model call ----------------------------------------------------------------------

    def wrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], ModelResponse[Any]],
    ) -> ModelResponse[Any]:
        """Stores the state's new messages, hands the model the window, stores its answer."""
        ids = self._ids(request.runtime.execution_info)
        prepared = self.memory.run_sync(lambda: self._with_memory(ids, request))
        response = handler(prepared)
        self.memory.run_sync(lambda: self._store_answer(ids, response.result))
        return response

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> ModelResponse[Any]:
        """`wrap_model_call` for `ainvoke`."""
        ids = self._ids(request.runtime.execution_info)
        prepared = await self.memory.run(lambda: self._with_memory(ids, request))
        response = await handler(prepared)
        await self.memory.run(lambda: self._store_answer(ids, response.result))
        return response

    def after_agent(self, state: AgentState[Any], runtime: Runtime[Any]) -> None:
        """Stores what the run added after its last model call (a ``return_direct`` result)."""
        ids = self._ids(runtime.execution_info)
        self.memory.run_sync(lambda: self._store_new(ids, state["messages"]))

    async def aafter_agent(self, state: AgentState[Any], runtime: Runtime[Any]) -> None:
        """`after_agent` for `ainvoke`."""
        ids = self._ids(runtime.execution_info)
        await self.memory.run(lambda: self._store_new(ids, state["messages"]))

    async def _with_memory(self, ids: _Ids, request: ModelRequest[Any]) -> ModelRequest[Any]:
        await self._store_new(ids, request.messages)
        context = await self.memory.context(
            tenant_id=ids.tenant_id, thread_id=ids.thread_id, user_id=ids.user_id
        )
        # System messages in the state are not turns of a thread: they stay ahead of it.
        kept: list[AnyMessage] = [m for m in request.messages if isinstance(m, SystemMessage)]
        window: list[AnyMessage] = [from_turn(turn) for turn in context.turns]
        return request.override(
            messages=kept + window,
            system_message=_with_text(request.system_message, context.memory_text),
        )

    async def _store_answer(self, ids: _Ids, messages: Sequence[BaseMessage]) -> None:
        # The state takes these objects as they are: an id given here is the one it keeps,
        # so the next call finds them stored.
        for message in messages:
            _ensure_id(message)
        answer = [m for m in messages if not isinstance(m, SystemMessage)]
        if answer:
            await self.memory.append(
                tenant_id=ids.tenant_id,
                thread_id=ids.thread_id,
                user_id=ids.user_id,
                messages=[to_native(m) for m in answer],
            )

    # -- what is new -------------------------------------------------------------------------

    async def _store_new(self, ids: _Ids, messages: Sequence[BaseMessage]) -> None:
        """Stores the messages the thread lacks; replaces the stored turns that the state
        rewound past."""
        candidates = [m for m in messages if not isinstance(m, SystemMessage)]
        if not candidates:
            return
        for message in candidates:
            _ensure_id(message)
        store = await self.memory.store()
        try:
            thread = await store.get_thread(tenant_id=ids.tenant_id, thread_id=ids.thread_id)
        except NotFoundError:
            thread = None
        count = thread.turn_count if thread is not None else 0
        if count == 0:
            await self._append(ids, candidates)
            return
        newest = await store.list_turns(
            tenant_id=ids.tenant_id, thread_id=ids.thread_id, after_seq=count - 1, limit=1
        )
        start = _after_id(candidates, {_stored_id(turn): count for turn in newest})
        if start is not None:
            await self._append(ids, candidates[start[0] :])
            return
        depth = min(len(candidates), count, MAX_MESSAGES_PER_APPEND)
        tail = await store.list_turns(
            tenant_id=ids.tenant_id, thread_id=ids.thread_id, after_seq=count - depth, limit=depth
        )
        seqs = {_stored_id(turn): turn.seq or 0 for turn in tail}
        start = _after_id(candidates, seqs)
        if start is not None:
            await self._rewind(ids, store, after_seq=start[1], messages=candidates[start[0] :])
            return
        views = normalize_messages([chat_view(m) for m in candidates])
        known = overlap([turn.to_message() for turn in tail], views)
        await self._append(ids, candidates[known:])

    async def _append(self, ids: _Ids, messages: Sequence[BaseMessage]) -> None:
        if messages:
            await self.memory.append(
                tenant_id=ids.tenant_id,
                thread_id=ids.thread_id,
                user_id=ids.user_id,
                messages=[to_native(m) for m in messages],
            )

    async def _rewind(
        self, ids: _Ids, store: Store, *, after_seq: int, messages: Sequence[BaseMessage]
    ) -> None:
        """The state left out stored turns after `after_seq`: they go, `messages` follow."""
        turns = await store.append(
            tenant_id=ids.tenant_id,
            thread_id=ids.thread_id,
            user_id=ids.user_id,
            messages=[to_native(m) for m in messages],
            after_seq=after_seq,
        )
        self.memory.update_soon(
            tenant_id=ids.tenant_id, thread_id=ids.thread_id, user_id=ids.user_id, turns=turns
        )

    # -- ids and tools -----------------------------------------------------------------------

    def _ids(self, info: ExecutionInfo | None, config: RunnableConfig | None = None) -> _Ids:
        """The application's ids for a run: the thread from its configuration."""
        thread: object = info.thread_id if info is not None else None
        if thread is None and config is not None:
            thread = (config.get("configurable") or {}).get("thread_id")
        if thread is None:
            thread = self.thread_id
        if thread is None:
            raise ValidationError(
                "thread_id",
                "the run has no thread: invoke the agent with "
                "config={'configurable': {'thread_id': ...}}, or give "
                "WorkingMemoryMiddleware(thread_id=...)",
            )
        return _Ids(
            tenant_id=self.tenant_id,
            thread_id=check_id("thread_id", str(thread)),
            user_id=self.user_id,
        )

    def _memory_tool(self, function: dict[str, Any]) -> BaseTool:
        """One agent-memory tool; it runs with the run's ids, whatever the model sends."""
        name = str(function["name"])

        def call(runtime: ToolRuntime, **arguments: Any) -> str:
            ids = self._ids(runtime.execution_info, runtime.config)
            return self.memory.run_sync(lambda: self._run_tool(name, arguments, ids))

        async def acall(runtime: ToolRuntime, **arguments: Any) -> str:
            ids = self._ids(runtime.execution_info, runtime.config)
            return await self.memory.run(lambda: self._run_tool(name, arguments, ids))

        return StructuredTool.from_function(
            func=call,
            coroutine=acall,
            name=name,
            description=str(function["description"]),
            args_schema=dict(function["parameters"]),
        )

    async def _run_tool(self, name: str, arguments: dict[str, Any], ids: _Ids) -> str:
        return await self.memory.run_tool(
            name,
            arguments,
            tenant_id=ids.tenant_id,
            thread_id=ids.thread_id,
            user_id=ids.user_id,
        )

    # -- lifetime ----------------------------------------------------------------------------

    async def when_idle(self) -> None:
        """Returns once the queued summary updates are done (tests, shutdown)."""
        await self.memory.when_idle()

    async def aclose(self) -> None:
        """Finishes the queued updates, closes what this middleware opened."""
        await self.memory.aclose()

    def close(self) -> None:
        """`aclose` for synchronous code."""
        self.memory.close()


# -- messages ----------------------------------------------------------------------------------


def to_native(message: BaseMessage) -> NativeItem:
    """A LangChain message as the store keeps it: its `message_to_dict` form, verbatim,
    beside its chat view."""
    item = json.loads(json.dumps(message_to_dict(message), default=str))
    return NativeItem(format=FORMAT, item=item, message=chat_view(message))


def from_turn(turn: Turn) -> AnyMessage:
    """A stored turn as a LangChain message: from its LangChain item when it has one (ids,
    ``additional_kwargs`` and all), else from its chat view (a turn another client wrote)."""
    item = turn.in_format(FORMAT)
    if item is not None:
        message = messages_from_dict([item])[0]
    else:
        message = convert_to_messages([dict(turn.to_message())])[0]
    # Typed as BaseMessage; a stored turn is a human, AI or tool message, all in AnyMessage.
    return cast(AnyMessage, message)


def chat_view(message: BaseMessage) -> Message:
    """The OpenAI chat-format view of a message: what counts its tokens and forms its unit.

    A tool result's name is dropped (chat format has none), a call with malformed arguments
    stays a call (LangChain answers it with an error result, which must find it), and a
    content part chat format has no place for reads as its text.
    """
    view: Message = dict(convert_to_openai_messages(message))
    role = view.get("role")
    if role == "tool":
        view.pop("name", None)
    if isinstance(message, AIMessage) and message.invalid_tool_calls:
        view["tool_calls"] = [*(view.get("tool_calls") or ()), *_malformed_calls(message)]
    content = view.get("content")
    parts = _PARTS.get(str(role))
    if isinstance(content, list) and parts is not None:
        kept = [p for p in content if isinstance(p, dict) and p.get("type") in parts]
        if len(kept) != len(content):
            view["content"] = [*kept] if kept and role == "user" else message.text
    return view


def _malformed_calls(message: AIMessage) -> list[dict[str, Any]]:
    return [
        {
            "id": call["id"],
            "type": "function",
            "function": {
                "name": call.get("name") or "unknown",
                "arguments": call.get("args") or "",
            },
        }
        for call in message.invalid_tool_calls
        if call.get("id")
    ]


def _with_text(system: SystemMessage | None, text: str) -> SystemMessage | None:
    """The system message with the memory's text at its end."""
    if not text:
        return system
    if system is None:
        return SystemMessage(content=text)
    content = system.content
    if isinstance(content, str):
        joined = f"{content}\n\n{text}" if content else text
        return system.model_copy(update={"content": joined})
    return system.model_copy(update={"content": [*content, {"type": "text", "text": text}]})


def _ensure_id(message: BaseMessage) -> None:
    if message.id is None:
        message.id = str(uuid.uuid4())


def _stored_id(turn: Turn) -> str | None:
    item = turn.in_format(FORMAT)
    data = item.get("data") if item is not None else None
    message_id = data.get("id") if isinstance(data, dict) else None
    return message_id if isinstance(message_id, str) else None


def _after_id(
    messages: Sequence[BaseMessage], seqs: dict[str | None, int]
) -> tuple[int, int] | None:
    """(the index after the newest message whose id is stored, that turn's seq), or None."""
    for index in range(len(messages) - 1, -1, -1):
        message_id = messages[index].id
        if message_id is not None and message_id in seqs:
            return index + 1, seqs[message_id]
    return None
