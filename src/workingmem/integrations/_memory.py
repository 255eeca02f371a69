"""FrameworkMemory: what every framework integration needs of workingmem, in one object.

    memory = FrameworkMemory(store="sqlite:///memory.db", model="gpt-4o-mini")
    await memory.append(tenant_id="t1", thread_id="th1", user_id="u1", messages=[...])
    context = await memory.context(tenant_id="t1", thread_id="th1", user_id="u1")
    context.turns         # the window's stored turns, oldest first (their native items kept)
    context.memory_text   # the agent-memory block and the notes, for the system prompt

An integration turns the framework's messages into `NativeItem`s (the original beside its chat
view), appends what is new after each model call, and builds the model's input from
`context()`. The budget: `budget_tokens`, by default the model's context window minus its output
reserve; the window takes `chat_history_ratio` of it (SLIDING_WINDOW, SUMMARY_BUFFER's tail).
SUMMARY_BUFFER's notes are rewritten in the background once `update_every_turns` turns are due,
never on the framework's path; without a model client for it (`llm`, else one from
``OPENAI_API_KEY`` / ``OPENAI_BASE_URL``) the notes stay as stored and a warning says why once.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from dataclasses import dataclass
from typing import Any, Concatenate, ParamSpec, TypeVar

from ..agent_memory import AgentMemory, AgentMemoryConfig
from ..agent_memory.tools import openai_tools
from ..background import BackgroundQueue
from ..config import Profile, WorkingMemoryConfig
from ..context import render_memory_slot
from ..errors import NotFoundError, ValidationError
from ..llm import CallKind, CallMeta, LLMClient, OpenAIClient
from ..memory import WorkingMemory
from ..stores import Store, open_store
from ..stores.base import read_turns
from ..tokens import Tokenizer, tokenizer_for
from ..types import ChatMessage, MessageIn, ModelInfo, NativeItem, Strategy, Turn
from ._loop import HomeLoop

__all__ = ["DEFAULT_CONTEXT_WINDOW", "DEFAULT_MODEL", "FrameworkMemory", "MemoryContext"]

logger = logging.getLogger("workingmem.integrations")

DEFAULT_MODEL = "gpt-4o-mini"
"""The model a memory counts for, and the cheap model of its summaries, unless told."""
DEFAULT_CONTEXT_WINDOW = 128_000
"""The context window of a model given by its id alone (that of gpt-4o-mini)."""

_PAGE = 500
_PROFILE = Profile(id="default")
T = TypeVar("T")
P = ParamSpec("P")


def on_home_loop(
    method: Callable[Concatenate[FrameworkMemory, P], Awaitable[T]],
) -> Callable[Concatenate[FrameworkMemory, P], Coroutine[Any, Any, T]]:
    """Runs the method on the memory's home loop, whichever loop awaits it (see `HomeLoop`)."""

    async def on_home(self: FrameworkMemory, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return await self.run(lambda: method(self, *args, **kwargs))

    functools.update_wrapper(on_home, method)  # its name and docstring, for help()
    return on_home


@dataclass(frozen=True, slots=True)
class MemoryContext:
    """What the model should know from a thread before one call."""

    turns: list[Turn]
    """The window's stored turns, oldest first: whole units, the newest exchange last (the
    call's pending messages, not stored yet, come after them)."""
    notes: str
    """SUMMARY_BUFFER's summary and facts, then, with `recall_ratio`, the recalled turns and
    the days the window was written; "" for none."""
    instructions: str
    """The agent-memory block (its content and how to edit it); "" when it is off."""
    tokens: int
    """The window's stored turns' tokens with the model's tokenizer."""
    dropped_turns: int
    """The thread's turns that are not in the window."""
    covered_turns: int | None = None
    """SUMMARY_BUFFER: the turn count the notes were written at."""

    @property
    def messages(self) -> list[ChatMessage]:
        """The window in OpenAI's chat format."""
        return [turn.to_message() for turn in self.turns]

    @property
    def memory_text(self) -> str:
        """The agent-memory block, then the notes under "About this conversation"; "" for
        nothing: the text an integration adds to the model's instructions."""
        return render_memory_slot(self.instructions, self.notes)


class FrameworkMemory:
    """One store and one memory configuration, shared by the threads an integration serves."""

    def __init__(
        self,
        *,
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
            store: an open store, a database URL (``sqlite:///memory.db``,
                ``postgresql://...``), or None for ``WORKINGMEM_DATABASE_URL`` / the embedded
                default ``.workingmem/memory.db``. A store opened here is closed by `aclose`.
            config: the thread memory's settings (strategy, ratio, tail, update cadence);
                `WorkingMemoryConfig()`'s defaults (SUMMARY_BUFFER) if None.
            model: the model the window is counted for: an id (its tokenizer, a 128,000-token
                window) or a `ModelInfo`.
            budget_tokens: the tokens a call may spend on the history and notes; the model's
                window minus its output reserve if None.
            llm: the client of SUMMARY_BUFFER's cheap model; if None, an `OpenAIClient` when
                ``OPENAI_API_KEY`` or ``OPENAI_BASE_URL`` is set, else no summaries.
            cheap_model: the model id of the summary updates.
            agent_memory: the model-editable working memory (spec 003) and its three tools;
                None for none.
        """
        if isinstance(model, str):
            if not model.strip():
                raise ValidationError("model", "must be a model id or a ModelInfo")
            model = ModelInfo(id=model, context_window=DEFAULT_CONTEXT_WINDOW)
        if not isinstance(model, ModelInfo):
            raise ValidationError("model", "must be a model id or a ModelInfo")
        if budget_tokens is None:
            budget_tokens = max(1, model.context_window - model.max_output_tokens)
        if isinstance(budget_tokens, bool) or not isinstance(budget_tokens, int):
            raise ValidationError("budget_tokens", "must be a positive integer")
        if budget_tokens < 1:
            raise ValidationError("budget_tokens", f"must be at least 1, got {budget_tokens}")
        if store is not None and not isinstance(store, (str, Store)):
            raise ValidationError("store", "must be an open store, a database URL or None")
        self.model = model
        self.budget_tokens = budget_tokens
        self.config = config or WorkingMemoryConfig()
        self.cheap_model = cheap_model
        self._url = store if not isinstance(store, Store) else None
        self._store = store if isinstance(store, Store) else None
        self._owns_store = self._store is None
        self._owns_llm = llm is None
        if llm is None and (os.environ.get("OPENAI_API_KEY") or os.environ.get("OPENAI_BASE_URL")):
            llm = OpenAIClient()
        self._llm = llm
        self._agent_config = agent_memory
        self._agent: AgentMemory | None = None
        self._memory: WorkingMemory | None = None
        self._queue: BackgroundQueue | None = None
        self._opening: asyncio.Lock | None = None
        self._loop = HomeLoop(private=self._owns_store)
        self._warned_no_llm = False
        self._closing: asyncio.Task[None] | None = None

    # -- running on the store's loop ---------------------------------------------------------

    async def run(self, work: Callable[[], Awaitable[T]]) -> T:
        """`work()` on the loop the store lives on (see `HomeLoop`)."""
        return await self._loop.run(work)

    def run_sync(self, work: Callable[[], Awaitable[T]]) -> T:
        """`work()` from synchronous code, on the store's loop."""
        return self._loop.run_sync(work)

    @property
    def tokenizer(self) -> Tokenizer:
        return tokenizer_for(self.model)

    async def store(self) -> Store:
        """The store, opened on first use when given as a URL."""
        if self._store is not None:
            return self._store
        if self._opening is None:
            self._opening = asyncio.Lock()
        async with self._opening:
            if self._store is None:
                self._store = await open_store(self._url)
        return self._store

    async def _parts(self) -> tuple[Store, WorkingMemory, AgentMemory | None]:
        store = await self.store()
        if self._memory is None:
            self._memory = WorkingMemory(store=store, config=self.config, llm=self._llm)
            agent = self._agent_config
            if isinstance(agent, AgentMemoryConfig):
                agent = AgentMemory(store=store, config=agent)
            self._agent = agent
        return store, self._memory, self._agent

    # -- before a model call -----------------------------------------------------------------

    @on_home_loop
    async def context(
        self,
        *,
        tenant_id: str,
        thread_id: str,
        user_id: str | None = None,
        pending: Sequence[MessageIn] = (),
    ) -> MemoryContext:
        """The window and the notes for the thread's next model call.

        `pending`: messages the call sends after the window that are not stored yet (a
        framework that stores a run's input after the model call). The window is made as if
        they were stored, as the thread's newest turns (`WorkingMemory.load`): they take their
        tokens of its share, and with a user turn among them they are the current exchange,
        whose words recall searches for and for which older stored units drop out.
        `ContextOverflowError` when the current exchange alone does not fit the share. A
        thread not stored yet has an empty window.
        """
        store, memory, agent = await self._parts()
        instructions = await self._instructions(agent, tenant_id, thread_id, user_id)
        try:
            loaded = await memory.load(
                tenant_id=tenant_id,
                thread_id=thread_id,
                model=self.model,
                profile=_PROFILE,
                budget_tokens=self.budget_tokens,
                pending=pending,
            )
        except NotFoundError:
            return MemoryContext(
                turns=[], notes="", instructions=instructions, tokens=0, dropped_turns=0
            )
        seqs = loaded.seqs
        turns = await read_turns(
            store,
            tenant_id=tenant_id,
            thread_id=thread_id,
            first=seqs[0] if seqs else 1,
            count=len(seqs),
        )
        return MemoryContext(
            turns=turns,
            notes=loaded.notes,
            instructions=instructions,
            tokens=loaded.tokens,
            dropped_turns=loaded.dropped_turns,
            covered_turns=loaded.covered_turns,
        )

    @on_home_loop
    async def _instructions(
        self, agent: AgentMemory | None, tenant_id: str, thread_id: str, user_id: str | None
    ) -> str:
        if agent is None or not self._agent_offered(user_id, user_later=False):
            return ""
        return await agent.get_working_memory_instructions(
            tenant_id=tenant_id, conversation_id=thread_id, user_id=user_id
        )

    # -- after a model call ------------------------------------------------------------------

    @on_home_loop
    async def append(
        self,
        *,
        tenant_id: str,
        thread_id: str,
        messages: Sequence[MessageIn | NativeItem],
        user_id: str | None = None,
    ) -> list[Turn]:
        """Stores `messages` at the end of the thread (all or none) and, under SUMMARY_BUFFER,
        queues the notes' update when it is due."""
        store, _, _ = await self._parts()
        if not messages:
            return []
        turns = await store.append(
            tenant_id=tenant_id, thread_id=thread_id, messages=messages, user_id=user_id
        )
        self.update_soon(tenant_id=tenant_id, thread_id=thread_id, user_id=user_id, turns=turns)
        return turns

    @on_home_loop
    async def replace(
        self,
        *,
        tenant_id: str,
        thread_id: str,
        messages: Sequence[MessageIn | NativeItem],
        user_id: str | None = None,
    ) -> list[Turn]:
        """Makes `messages` the thread's turns (the equal start stays, with its counts)."""
        store, _, _ = await self._parts()
        if not messages:
            await self.clear(tenant_id=tenant_id, thread_id=thread_id)
            return []
        turns = await store.replace_turns(
            tenant_id=tenant_id, thread_id=thread_id, messages=messages, user_id=user_id
        )
        self.update_soon(tenant_id=tenant_id, thread_id=thread_id, user_id=user_id, turns=turns)
        return turns

    @on_home_loop
    async def all_turns(self, *, tenant_id: str, thread_id: str, after_seq: int = 0) -> list[Turn]:
        """Every turn of the thread after `after_seq`, oldest first, read in pages; [] for a
        thread not stored yet."""
        store, _, _ = await self._parts()
        turns: list[Turn] = []
        try:
            while True:
                page = await store.list_turns(
                    tenant_id=tenant_id,
                    thread_id=thread_id,
                    after_seq=(turns[-1].seq or 0) if turns else after_seq,
                    limit=_PAGE,
                )
                turns.extend(page)
                if len(page) < _PAGE:
                    return turns
        except NotFoundError:
            return []

    @on_home_loop
    async def tail_turns(self, *, tenant_id: str, thread_id: str, count: int) -> list[Turn]:
        """The thread's newest `count` turns, oldest first; [] for a thread not stored yet."""
        store, _, _ = await self._parts()
        try:
            thread = await store.get_thread(tenant_id=tenant_id, thread_id=thread_id)
        except NotFoundError:
            return []
        start = max(0, thread.turn_count - count)
        return await self.all_turns(tenant_id=tenant_id, thread_id=thread_id, after_seq=start)

    @on_home_loop
    async def truncate(
        self,
        *,
        tenant_id: str,
        thread_id: str,
        after_seq: int,
        messages: Sequence[MessageIn | NativeItem] = (),
        user_id: str | None = None,
    ) -> list[Turn]:
        """Removes the turns after `after_seq` and appends `messages` in their place, in one
        transaction; the summary rolls back to a version that covers only what stays. Nothing
        happens to a thread not stored yet (unless there are messages to store)."""
        store, _, _ = await self._parts()
        try:
            await store.get_thread(tenant_id=tenant_id, thread_id=thread_id)
        except NotFoundError:
            if not messages:
                return []
            return await self.append(
                tenant_id=tenant_id, thread_id=thread_id, messages=messages, user_id=user_id
            )
        return await store.append(
            tenant_id=tenant_id,
            thread_id=thread_id,
            messages=messages,
            user_id=user_id,
            after_seq=after_seq,
        )

    @on_home_loop
    async def pop(self, *, tenant_id: str, thread_id: str) -> list[Turn]:
        """Removes the newest unit (a turn, or a call with its results); [] when empty."""
        store, _, _ = await self._parts()
        try:
            return await store.pop_turns(tenant_id=tenant_id, thread_id=thread_id)
        except NotFoundError:
            return []

    @on_home_loop
    async def clear(self, *, tenant_id: str, thread_id: str) -> None:
        """Deletes the thread and all of it (turns, notes, its agent memory); no error when
        there is nothing."""
        store, _, _ = await self._parts()
        with contextlib.suppress(NotFoundError):
            await store.delete_thread(tenant_id=tenant_id, thread_id=thread_id)

    def update_soon(
        self,
        *,
        tenant_id: str,
        thread_id: str,
        user_id: str | None,
        turns: Sequence[Turn] = (),
    ) -> None:
        """Queues SUMMARY_BUFFER's update of the thread, off the caller's path (the updater
        reads whether it is due); nothing under SLIDING_WINDOW or switched-off memory."""
        config = self.config
        if not config.enabled or config.strategy is Strategy.SLIDING_WINDOW:
            return
        if self._llm is None:
            if not self._warned_no_llm:
                self._warned_no_llm = True
                logger.warning(
                    "SUMMARY_BUFFER without a model client for its summaries: pass llm= "
                    "(or set OPENAI_API_KEY); the window works, the notes stay as stored"
                )
            return
        memory = self._memory
        assert memory is not None, "update_soon follows an append"
        meta = CallMeta(
            tenant_id=tenant_id,
            kind=CallKind.MEMORY_WORKING,
            model=self.cheap_model,
            thread_id=thread_id,
            user_id=user_id,
        )

        async def update() -> None:
            await memory.save_context(
                tenant_id=tenant_id,
                thread_id=thread_id,
                user_id=user_id,
                profile=_PROFILE,
                cheap_model_id=self.cheap_model,
                meta=meta,
            )

        if self._queue is None:
            self._queue = BackgroundQueue(workers=2)
        self._queue.submit((tenant_id, thread_id), update)

    # -- agent memory ------------------------------------------------------------------------

    def tool_specs(
        self, *, user_id: str | None = None, user_later: bool = False
    ) -> list[dict[str, Any]]:
        """The agent-memory tools in OpenAI's function format; [] when agent memory is off
        (or per user and no user is known, unless `user_later`: the run will say who)."""
        if not self._agent_offered(user_id, user_later=user_later):
            return []
        config = self._agent_settings
        assert config is not None
        return openai_tools(config.mode)

    @property
    def _agent_settings(self) -> AgentMemoryConfig | None:
        agent = self._agent_config
        return agent.config if isinstance(agent, AgentMemory) else agent

    def _agent_offered(self, user_id: str | None, *, user_later: bool) -> bool:
        """Agent memory is on, and there is whose document it is (a user, for one per user)."""
        config = self._agent_settings
        if config is None or not config.enabled:
            return False
        return config.scope != "user" or user_id is not None or user_later

    @on_home_loop
    async def run_tool(
        self,
        name: str,
        arguments: object,
        *,
        tenant_id: str,
        thread_id: str,
        user_id: str | None = None,
    ) -> str:
        """Runs the model's call of an agent-memory tool; the ids are the application's."""
        _, _, agent = await self._parts()
        if agent is None:
            return "Error: working memory is not enabled for this assistant."
        return await agent.execute_tool(
            name, arguments, tenant_id=tenant_id, conversation_id=thread_id, user_id=user_id
        )

    # -- lifetime ----------------------------------------------------------------------------

    @on_home_loop
    async def when_idle(self) -> None:
        """Returns once the queued summary updates are done (tests, shutdown)."""
        if self._queue is not None:
            await self._queue.when_idle()

    async def aclose(self) -> None:
        """Finishes the queued updates, then closes what this memory opened."""
        await self.run(self._close_parts)
        self._loop.close()

    def close(self) -> None:
        """`aclose` for synchronous code; called on the store's own loop (a sync ``close()``
        in async code), it closes in a task of that loop instead of blocking it."""
        if self._loop.on_home():
            self._closing = asyncio.get_running_loop().create_task(self._close_parts())
            return
        self.run_sync(self._close_parts)
        self._loop.close()

    async def _close_parts(self) -> None:
        if self._queue is not None:
            await self._queue.aclose()
            self._queue = None
        if self._owns_store and self._store is not None:
            await self._store.aclose()
            self._store = None
            self._memory = None
        if self._owns_llm and self._llm is not None:
            close = getattr(self._llm, "aclose", None)
            if close is not None:
                await close()
            self._llm = None
