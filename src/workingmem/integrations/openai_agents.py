"""The OpenAI Agents SDK's `Session`, kept by workingmem: every item verbatim, the window and
the notes where the SDK asks for the model's input.

    from workingmem.integrations.openai_agents import WorkingMemorySession
    session = WorkingMemorySession("th1", store="sqlite:///memory.db", tenant_id="t1")
    agent = Agent(name="Assistant", tools=session.tools())
    result = await Runner.run(agent, "Hi", session=session,
                              run_config=RunConfig(session_input_callback=session.input_callback()))

- `get_items`, `add_items`, `pop_item`, `clear_session`: the SDK's protocol over its Responses
  input items, stored exactly as given (`workingmem.formats.responses`: one chat turn per
  message or per response's run of items). `get_items()` is the whole thread, as the SDK's own
  sessions give it: its compaction wrapper reads everything, clears and re-adds.
- `input_callback()`: the SDK's ``session_input_callback``, so that the model reads the window
  (whole units within the budget, newest first) and the notes (the summary and facts, the
  agent-memory block) instead of the whole history. The notes go first, as a system item that
  `add_items` never stores.
- `tools()`: the agent-memory tools as SDK function tools.
- The tenant and the user: the constructor's, else the run's context (``tenant_id`` /
  ``user_id``, as attributes or keys of the object passed as ``context=`` to the run), never
  the model's arguments. The thread is the session id.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, cast

from ..agent_memory import AgentMemory, AgentMemoryConfig
from ..config import WorkingMemoryConfig
from ..errors import ValidationError
from ..formats.responses import OPEN_UNIT_READ, items_of, open_calls, starts_with_output, turns_of
from ..llm import LLMClient
from ..messages import check_id
from ..stores import Store
from ..types import MessageIn, ModelInfo, Turn
from ._extras import missing_extra
from ._memory import DEFAULT_MODEL, FrameworkMemory

try:
    from agents import FunctionTool, RunContextWrapper, SessionSettings, TResponseInputItem
    from agents.memory.session_settings import coerce_session_settings, resolve_session_limit
    from agents.tool_context import ToolContext
except ImportError as exc:  # pragma: no cover - exercised in a subprocess without the SDK
    raise missing_extra("agents", "OpenAI Agents SDK") from exc

__all__ = ["WorkingMemorySession"]

InputCallback = Callable[
    [list[TResponseInputItem], list[TResponseInputItem]], Awaitable[list[TResponseInputItem]]
]


class WorkingMemorySession:
    """A `Session` of the OpenAI Agents SDK on a workingmem store."""

    session_settings: SessionSettings | None

    def __init__(
        self,
        session_id: str,
        *,
        store: Store | str | None = None,
        tenant_id: str | None = None,
        user_id: str | None = None,
        config: WorkingMemoryConfig | None = None,
        model: str | ModelInfo = DEFAULT_MODEL,
        budget_tokens: int | None = None,
        llm: LLMClient | None = None,
        cheap_model: str = DEFAULT_MODEL,
        agent_memory: AgentMemoryConfig | AgentMemory | None = None,
        session_settings: SessionSettings | dict[str, Any] | None = None,
        memory: FrameworkMemory | None = None,
    ) -> None:
        """
        Args:
            session_id: the thread's id (1-256 printable characters).
            store: an open store, a database URL, or None for the embedded default
                (``WORKINGMEM_DATABASE_URL``, else ``.workingmem/memory.db``).
            tenant_id: whose thread it is; if None, the run context's ``tenant_id``.
            user_id: the user (agent memory per user needs one); if None, the run context's.
            config: the memory's settings: `WorkingMemoryConfig()` (SUMMARY_BUFFER) if None;
                ``strategy=Strategy.SLIDING_WINDOW`` for the window alone, ``enabled=False``
                for the last 20 turns.
            model: the model the window is counted for (its tokenizer, its window).
            budget_tokens: the tokens of the model's input the history and notes may take; the
                model's window minus its output reserve if None.
            llm: the client of the summaries' cheap model (`workingmem.OpenAIClient`); from
                ``OPENAI_API_KEY`` / ``OPENAI_BASE_URL`` if None.
            cheap_model: the summaries' model id.
            agent_memory: the model-editable working memory offered by `tools()`; None for none.
            session_settings: the SDK's settings (``limit``: what `get_items()` and so the
                runner read; None: the whole thread).
            memory: a `FrameworkMemory` shared by several sessions (one store, one pool);
                the settings above are then its own.
        """
        self.session_id = check_id("session_id", session_id)
        self.tenant_id = None if tenant_id is None else check_id("tenant_id", tenant_id)
        self.user_id = None if user_id is None else check_id("user_id", user_id)
        self.session_settings = (
            SessionSettings()
            if session_settings is None
            else coerce_session_settings(session_settings)
        )
        self._owns_memory = memory is None
        self.memory = memory or FrameworkMemory(
            store=store,
            config=config,
            model=model,
            budget_tokens=budget_tokens,
            llm=llm,
            cheap_model=cheap_model,
            agent_memory=agent_memory,
        )
        self._run_ids: tuple[str, str | None] | None = None
        self._injected: list[str] = []

    # -- whose thread ------------------------------------------------------------------------

    def _ids(self, wrapper: RunContextWrapper[Any] | None) -> tuple[str, str | None]:
        """(tenant, user): the constructor's, else the run context's, else the last run's."""
        context = wrapper.context if wrapper is not None else None
        tenant = self.tenant_id or _context_id(context, "tenant_id")
        user = self.user_id or _context_id(context, "user_id")
        if tenant is None and self._run_ids is not None:
            tenant, user = self._run_ids[0], user or self._run_ids[1]
        if tenant is None:
            raise ValidationError(
                "tenant_id",
                "no tenant: pass tenant_id= to WorkingMemorySession, or run with a context "
                "that has a tenant_id",
            )
        if context is not None:
            self._run_ids = (tenant, user)
        return tenant, user

    # -- the Session protocol ----------------------------------------------------------------

    async def get_items(
        self, limit: int | None = None, *, wrapper: RunContextWrapper[Any] | None = None
    ) -> list[TResponseInputItem]:
        """The thread's items, oldest first; with `limit` (else `session_settings.limit`), the
        newest `limit` of them."""
        limit = resolve_session_limit(limit, self.session_settings)
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int)):
            raise ValidationError("limit", f"must be an int or None, got {limit!r}")
        tenant, _ = self._ids(wrapper)
        if limit is not None and limit <= 0:
            return []

        async def read() -> list[Turn]:
            if limit is None:
                return await self.memory.all_turns(tenant_id=tenant, thread_id=self.session_id)
            return await self.memory.tail_turns(
                tenant_id=tenant, thread_id=self.session_id, count=limit
            )

        turns = await self.memory.run(read)
        items = [item for turn in turns for item in items_of(turn)]
        return cast(list[TResponseInputItem], items if limit is None else items[-limit:])

    async def add_items(
        self, items: list[TResponseInputItem], *, wrapper: RunContextWrapper[Any] | None = None
    ) -> None:
        """Stores the items at the end of the thread, all or none (the memory's notes that
        `input_callback` put in the model's input are not part of it, and are skipped)."""
        tenant, user = self._ids(wrapper)
        if not isinstance(items, list):
            raise ValidationError("items", "must be a list of Responses input items")
        for index, item in enumerate(items):
            if not isinstance(item, Mapping):
                raise ValidationError(f"items[{index}]", "must be a Responses input item (a dict)")
        given = [dict(cast(Mapping[str, Any], item)) for item in items]
        kept = [item for item in given if not self._was_injected(item)]
        if not kept:
            return

        async def add() -> None:
            answering: frozenset[str] = frozenset()
            if starts_with_output(kept):
                answering = await self._open_calls(tenant)
            await self.memory.append(
                tenant_id=tenant,
                thread_id=self.session_id,
                user_id=user,
                messages=turns_of(kept, open_calls=answering),
            )

        await self.memory.run(add)

    async def pop_item(
        self, *, wrapper: RunContextWrapper[Any] | None = None
    ) -> TResponseInputItem | None:
        """Removes and returns the newest item; None when the thread has none."""
        tenant, user = self._ids(wrapper)

        async def pop() -> dict[str, Any] | None:
            turns = await self.memory.tail_turns(
                tenant_id=tenant, thread_id=self.session_id, count=1
            )
            if not turns:
                return None
            newest = turns[-1]
            items = items_of(newest)
            rest = turns_of(items[:-1]) if len(items) > 1 else []
            await self.memory.truncate(
                tenant_id=tenant,
                thread_id=self.session_id,
                after_seq=(newest.seq or 1) - 1,
                messages=rest,
                user_id=user,
            )
            return items[-1]

        return cast(TResponseInputItem | None, await self.memory.run(pop))

    async def clear_session(self, *, wrapper: RunContextWrapper[Any] | None = None) -> None:
        """Removes every item; the summary rolls back with them (the thread's agent-memory
        document stays: `delete()` forgets everything)."""
        tenant, _ = self._ids(wrapper)
        await self.memory.truncate(tenant_id=tenant, thread_id=self.session_id, after_seq=0)

    async def delete(self, *, wrapper: RunContextWrapper[Any] | None = None) -> None:
        """Deletes the thread and everything of it: items, notes, its agent memory."""
        tenant, _ = self._ids(wrapper)
        await self.memory.clear(tenant_id=tenant, thread_id=self.session_id)

    # -- the model's input -------------------------------------------------------------------

    def input_callback(self) -> InputCallback:
        """The SDK's ``session_input_callback``: the notes, the window, the new input.

        The new input, not stored yet, is the current exchange: the window is the stored
        thread's newest whole units that fit the budget's share beside it (an older one too
        large drops out), and recall searches for its words. The window is taken from the
        history the runner read (so the runner stores nothing of it again), which is the
        thread's tail. `ContextOverflowError` when the new input alone does not fit.
        """

        async def callback(
            history: list[TResponseInputItem], new_items: list[TResponseInputItem]
        ) -> list[TResponseInputItem]:
            tenant, user = self._ids(None)
            pending = [
                turn.message for turn in turns_of([cast(Mapping[str, Any], i) for i in new_items])
            ]
            context = await self.memory.context(
                tenant_id=tenant,
                thread_id=self.session_id,
                user_id=user,
                pending=cast(Sequence[MessageIn], pending),
            )
            count = sum(len(items_of(turn)) for turn in context.turns)
            window = history[len(history) - min(count, len(history)) :] if count else []
            notes: list[TResponseInputItem] = []
            if context.memory_text:
                self._injected.append(context.memory_text)
                notes.append(
                    cast(TResponseInputItem, {"role": "system", "content": context.memory_text})
                )
            return [*notes, *window, *new_items]

        return callback

    def _was_injected(self, item: Mapping[str, Any]) -> bool:
        if item.get("role") != "system" or item.get("type") not in (None, "message"):
            return False
        content = item.get("content")
        text = content if isinstance(content, str) else _first_text(content)
        if text in self._injected:
            self._injected.remove(text)
            return True
        return False

    # -- agent memory ------------------------------------------------------------------------

    def tools(self) -> list[FunctionTool]:
        """The agent-memory tools as SDK function tools (update, get, clear); [] when agent
        memory is off. They act on this session's thread, tenant and user."""
        return [
            self._tool(spec["function"])
            for spec in self.memory.tool_specs(user_id=self.user_id, user_later=True)
        ]

    def _tool(self, function: Mapping[str, Any]) -> FunctionTool:
        name = str(function["name"])

        async def invoke(context: ToolContext[Any], arguments: str) -> str:
            tenant, user = self._ids(context)
            return await self.memory.run_tool(
                name, arguments, tenant_id=tenant, thread_id=self.session_id, user_id=user
            )

        return FunctionTool(
            name=name,
            description=str(function.get("description", "")),
            params_json_schema=dict(function.get("parameters") or {}),
            on_invoke_tool=invoke,
            strict_json_schema=False,
        )

    # -- lifetime ----------------------------------------------------------------------------

    async def when_idle(self) -> None:
        """Returns once the queued summary updates are done."""
        await self.memory.when_idle()

    async def aclose(self) -> None:
        """Finishes the queued updates and closes the store this session opened."""
        if self._owns_memory:
            await self.memory.aclose()

    def close(self) -> None:
        """`aclose` for synchronous code."""
        if self._owns_memory:
            self.memory.close()

    async def _open_calls(self, tenant: str) -> frozenset[str]:
        turns = await self.memory.tail_turns(
            tenant_id=tenant, thread_id=self.session_id, count=OPEN_UNIT_READ
        )
        return open_calls(turns)


def _context_id(context: object, key: str) -> str | None:
    value = context.get(key) if isinstance(context, Mapping) else getattr(context, key, None)
    return None if value is None else check_id(key, value)


def _first_text(content: object) -> str | None:
    if isinstance(content, list) and content and isinstance(content[0], Mapping):
        text = content[0].get("text")
        return text if isinstance(text, str) else None
    return None if content is None else json.dumps(content)
