"""Gateway: what a host calls once per user message (the AIGateway of spec 000).

    async with Gateway(store=store, llm=OpenAIClient()) as gateway:
        result = await gateway.ask(tenant_id="t1", thread_id="th1", user_id="u1",
                                   message="What did I say my budget was?")
        result.answer, result.usage, result.warnings

One `ask`: the user turn is stored first (durable before anything else); the request is
assembled (system prompt, memory, history under the window); the upstream model answers,
calling the working-memory tools if it wants (a bounded loop; every call and result is stored
as turns); the answer is stored; `save_context` goes to the background queue, never blocking
the answer. An upstream failure stores no half answer: the user turn stays and asking again
with the same message answers it, without storing it twice.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
import uuid
import weakref
from collections.abc import (
    AsyncGenerator,
    AsyncIterator,
    Awaitable,
    Callable,
    Coroutine,
    Mapping,
    Sequence,
)
from contextlib import aclosing, asynccontextmanager, suppress
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, ParamSpec, Self, TypeVar

from .agent_memory import AgentMemory, AgentMemoryConfig
from .answers import AnswerStream, AskResult, ResetResult, ThreadMemory
from .background import BackgroundQueue
from .config import Profile
from .context import AssembledContext, AssemblyWarning, ContextAssembler
from .conversations import extends, find_conversation
from .errors import ConflictError, ValidationError, WorkingMemoryError
from .formats import carrying
from .gateway_config import CallPlan, GatewayConfig, Overrides, Profiles
from .leases import keep_renewed
from .llm import (
    CallKind,
    CallMeta,
    Completion,
    GuardedClient,
    LLMClient,
    LLMError,
    NativeEvent,
    StreamEnd,
    TextDelta,
    Usage,
    UsageGuard,
)
from .memory import KnownThread, WorkingMemory, WorkingMemoryProtocol
from .messages import normalize_turns
from .placement import (
    GATEWAY_TOOLS,
    NewestRead,
    Placement,
    check_client_tools,
    first_limit,
    place,
    tool_name,
)
from .prompts import PromptTemplates
from .rewriter import QueryRewriter
from .stores.base import Store, append_and_release, claim_and_open, read_turns
from .stores.documents import DocumentStore
from .strategies import render_notes, update_due
from .tokens import Tokenizer, tokenizer_for
from .tokens._recent import counting_for
from .types import (
    Message,
    MessageIn,
    NativeItem,
    Strategy,
    Turn,
    UpdateReport,
)

__all__ = ["AnswerFormat", "AnswerStream", "AskResult", "Gateway", "ResetResult", "ThreadMemory"]

P = ParamSpec("P")
T = TypeVar("T")

logger = logging.getLogger("workingmem.gateway")

FIND_ATTEMPTS = 8
"""How often a conversation found without an id is looked for again when another request of
its family moved it between the finding and the lock."""

ASK_LOCK_SECONDS = 30.0
"""How long a thread's ask lock lasts unless renewed (every third of it while an answer is
made): the longest a crashed asker keeps a thread from being answered."""

Review = Callable[[str], Awaitable[str]]
"""A human (or a rule) reviews the model's answer and returns the text to store."""

AnswerFormat = Callable[[Message, "Completion | None"], "MessageIn | NativeItem"]
"""What to store for the answer: given it as a chat message (the text and the calls of the
client's tools) and the upstream's last completion (None after a review), the turn as another
API keeps it (a `NativeItem` whose view is that message): a Responses client's output items
with the ids it was shown, say."""


@dataclass(slots=True)
class _AskLock:
    """A thread's ask lock as held by one ask: its owner, the read of the thread made with
    it, and whether the answer's append gave it back."""

    owner: str
    newest: NewestRead
    opened: list[Turn] = field(default_factory=list)
    """The request's turns, when the lock's trip opened the (new) thread with them."""
    renewing: asyncio.Task[None] | None = None
    released: bool = False


@dataclass(frozen=True, slots=True)
class _Opening:
    """A request's turns for the ask lock's trip to open a new thread with: what `place`
    would append to a thread without turns (all of them)."""

    items: Sequence[MessageIn | NativeItem]
    user_id: str | None

    @classmethod
    def of(
        cls, request: _Request, user_id: str | None, expect_turns: int | None
    ) -> _Opening | None:
        """None when the ask could not start a thread with the request's turns: it has none,
        or it expects a thread that has turns (`expect_turns`)."""
        if not request.items or expect_turns:
            return None
        return cls(request.items, user_id)


@dataclass(slots=True)
class _Run:
    tenant_id: str
    thread_id: str
    user_id: str | None
    plan: CallPlan
    tools: list[dict[str, Any]]
    """The gateway's own agent-memory tools, offered while rounds are left."""
    client_tools: list[dict[str, Any]] = field(default_factory=list)
    options: dict[str, Any] = field(default_factory=dict)
    client_calls: tuple[dict[str, Any], ...] = ()
    passthrough: list[dict[str, Any]] | None = None
    """The client's own messages, sent instead of the memory (history "client")."""
    answer_format: AnswerFormat | None = None
    input_seq: int = 0
    turns: list[Turn] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    warnings: list[AssemblyWarning] = field(default_factory=list)
    context: AssembledContext | None = None
    answer: str | None = None
    rounds: int = 0
    completion: Completion | None = None
    recall_query: str | None = None
    """The rewriter's query recall searches for too (`recall_rewrite`), made once a run."""
    lock: _AskLock | None = None
    """The thread's ask lock, which the answer's append gives back."""
    newest: NewestRead | None = None
    """The lock's read, when the run's turns were appended after it: the thread's newest
    turns are that read and `turns` (`KnownThread.after`)."""


def _counted_per_tenant(
    method: Callable[P, Coroutine[Any, Any, T]],
) -> Callable[P, Coroutine[Any, Any, T]]:
    """Runs a gateway call in its tenant's counting scope (`counting_for`): the texts it
    counts are remembered for that tenant alone."""

    @functools.wraps(method)
    async def scoped(*args: P.args, **kwargs: P.kwargs) -> T:
        with counting_for(str(kwargs["tenant_id"])):
            return await method(*args, **kwargs)

    return scoped


class Gateway:
    """Threads, memory and an upstream model behind one call per user message."""

    def __init__(
        self,
        *,
        store: Store,
        llm: LLMClient | None = None,
        config: GatewayConfig | None = None,
        profiles: Sequence[Profile] = (),
        agent_memory: AgentMemory | AgentMemoryConfig | None = None,
        overrides: Overrides | None = None,
        queue: BackgroundQueue | None = None,
        guard: UsageGuard | None = None,
        templates: PromptTemplates | None = None,
        on_report: Callable[[UpdateReport], None] | None = None,
    ) -> None:
        """
        Args:
            store: threads, states and working-memory documents.
            llm: the upstream, for answers and (as the cheap model) for helper calls. None: a
                gateway that reads and forgets memory only (`ask` is a ValidationError).
            config: platform defaults; profiles override them.
            profiles: the profiles served; ``default`` always exists.
            agent_memory: the agent-editable working memory (spec 003), or its configuration.
            overrides: a host's own parts, e.g. its own WorkingMemory (R18).
            queue: the background queue for memory updates; the gateway owns one if None.
            guard: the usage guard for every model call (answers and helper calls).
            templates: the prompt templates of the helper calls.
            on_report: receives the report of every background memory update.
        """
        self.store = store
        self.config = config or GatewayConfig()
        self.profiles = Profiles(profiles)
        self._answers = llm is not None
        self.llm = GuardedClient(llm or _NoModel(), guard=guard)
        overridden = overrides.working_memory if overrides else None
        self.memory: WorkingMemoryProtocol = overridden or WorkingMemory(
            store=store,
            config=self.config.working_memory,
            llm=llm,
            templates=templates,
            guard=guard,
            on_report=on_report,
            models=self.config.models,
        )
        if isinstance(agent_memory, AgentMemoryConfig):
            if not isinstance(store, DocumentStore):  # a host's store of threads only
                raise ValidationError("agent_memory", "the store keeps no documents")
            agent_memory = AgentMemory(store=store, config=agent_memory)
        self.agent_memory = agent_memory
        self.assembler = ContextAssembler(memory=self.memory, agent_memory=agent_memory)
        self.rewriter = QueryRewriter(
            llm=self.llm, store=store, templates=templates, config=self.config.working_memory
        )
        self._turns: weakref.WeakValueDictionary[tuple[str, str], asyncio.Lock] = (
            weakref.WeakValueDictionary()
        )
        """The in-process ask locks of the threads being asked now (gone with their askers)."""
        self._owns_queue = queue is None
        self.queue = queue or BackgroundQueue()

    async def __aenter__(self) -> Self:
        """Starts the background queue and builds the profiles' tokenizers off the loop, so
        that the first request does not pay for them (an OpenAI vocabulary takes ~0.5-1 s)."""
        self.queue.start()
        await asyncio.to_thread(self._build_tokenizers)
        return self

    def _build_tokenizers(self) -> None:
        """A tokenizer that cannot be built (a missing local file) is the requests' error to
        report, not the start's: a profile no request uses must not stop the service."""
        for profile in self.profiles:
            model = self.plan(profile).model
            try:
                tokenizer_for(model)
            except WorkingMemoryError as exc:
                logger.warning("the tokenizer of %s is not ready: %s", model.id, exc)

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Drains the background queue (if the gateway owns it)."""
        if self._owns_queue:
            await self.queue.aclose()

    async def when_idle(self) -> None:
        """Waits until every submitted memory update has run."""
        await self.queue.when_idle()

    # -- ask ---------------------------------------------------------------------------------

    @_counted_per_tenant
    async def ask(
        self,
        *,
        tenant_id: str,
        thread_id: str | None = None,
        message: str | MessageIn | None = None,
        user_id: str | None = None,
        profile: Profile | str | None = None,
        system_prompt: str | None = None,
        model: str | None = None,
        review: Review | None = None,
        messages: Sequence[MessageIn | NativeItem] | None = None,
        tools: Sequence[dict[str, Any]] | None = None,
        options: Mapping[str, Any] | None = None,
        max_tokens: int | None = None,
        passthrough: Sequence[MessageIn] | None = None,
        answer_format: AnswerFormat | None = None,
        expect_turns: int | None = None,
        session: str | None = None,
    ) -> AskResult:
        """Answers the thread's newest user turn (or tool results) with the thread's memory.

        Args:
            thread_id: the thread; None finds the conversation by how `messages` open
                (`workingmem.conversations`: for clients that resend the whole history and
                name no thread), and `AskResult.thread_id` says which it is.
            message: the user's text, or a user message dict (content parts allowed).
            messages: instead of `message`, the request's turns as a client sends them: only
                the new ones, or the whole history, or a part of it, edited or without its
                last answer (`workingmem.messages.continuation`): each turn is stored once,
                an edit or a regenerate replaces the turns after the point it changes. The
                last is the user's, or the results of the client's tool calls.
            tools: the client's own tools (OpenAI function tools), offered to the model with
                the gateway's agent-memory tools. A call of one ends the answer: it is stored
                and returned (`AskResult.tool_calls`) for the client to run.
            options: other request fields for the upstream, sent as they are (``top_p``,
                ``stop``, ``tool_choice``, ``response_format``, ...).
            max_tokens: the answer's cap, and so the output reserve of the memory's budget;
                None takes the profile's.
            passthrough: the messages to send as they are instead of the thread's memory
                (a profile's ``history="client"``: the client's own history, system message
                included); the turns are still stored from `messages`, the memory updated.
            profile: a Profile, a profile id, or None for ``default``.
            system_prompt: overrides the profile's system prompt template for this call.
            model: overrides the profile's answering model for this call.
            review: called with the model's answer; what it returns is stored instead (a
                human-reviewed answer). The background update then reads it from the store.
            answer_format: what to store for the answer (see `AnswerFormat`); None stores
                the chat message.
            expect_turns: the thread must have exactly this many turns when its lock is
                taken, else `ConflictError` and nothing is stored: for a client continuing
                from a known point (a Responses ``previous_response_id``) that forks when
                the thread went on meanwhile.
            session: the client's own name for its session, for a conversation found without
                a thread id (a Responses ``prompt_cache_key``): two sessions that open alike
                are two threads.

        Raises:
            ValidationError, NotFoundError: bad input; nothing stored.
            ContextOverflowError: the message alone does not fit the model's window.
            LLMError, UsageRefusedError: the upstream failed or was refused; the user turn
                stays stored, and asking again with the same message (or messages) answers it.
        """
        request = self._checked_request(message, messages, tools)  # before any lock or write
        plan = self.plan(profile, model=model, system_prompt=system_prompt, max_tokens=max_tokens)
        opening = _Opening.of(request, user_id, expect_turns)
        window = self._window_read(plan, request, passthrough)
        found = self._conversation(
            tenant_id, thread_id, user_id, system_prompt, request, plan, session, opening, window
        )
        async with found as (on, lock):
            run = await self._begin(
                tenant_id, on, request, user_id, plan, options, passthrough, expect_turns, lock
            )
            run.answer_format = answer_format
            async for _ in self._answer(run, stream=False):
                pass
            answer = run.answer or ""
            reviewed = False
            if review is not None:
                edited = await review(answer)
                reviewed = edited != answer
                answer = edited
            return await self._finish(run, answer, reviewed=reviewed)

    def ask_stream(
        self,
        *,
        tenant_id: str,
        thread_id: str | None = None,
        message: str | MessageIn | None = None,
        user_id: str | None = None,
        profile: Profile | str | None = None,
        system_prompt: str | None = None,
        model: str | None = None,
        messages: Sequence[MessageIn | NativeItem] | None = None,
        tools: Sequence[dict[str, Any]] | None = None,
        options: Mapping[str, Any] | None = None,
        max_tokens: int | None = None,
        passthrough: Sequence[MessageIn] | None = None,
        answer_format: AnswerFormat | None = None,
        expect_turns: int | None = None,
        session: str | None = None,
    ) -> AnswerStream:
        """Like `ask`, yielding the answer's text as it arrives; see `AnswerStream`."""

        async def chunks() -> AsyncGenerator[str | NativeEvent, None]:
            request = self._checked_request(message, messages, tools)
            plan = self.plan(
                profile, model=model, system_prompt=system_prompt, max_tokens=max_tokens
            )
            opening = _Opening.of(request, user_id, expect_turns)
            window = self._window_read(plan, request, passthrough)
            found = self._conversation(
                tenant_id,
                thread_id,
                user_id,
                system_prompt,
                request,
                plan,
                session,
                opening,
                window,
            )
            async with found as (on, lock):
                stream.thread_id = on
                run = await self._begin(
                    tenant_id, on, request, user_id, plan, options, passthrough, expect_turns, lock
                )
                run.answer_format = answer_format
                async for text in self._answer(run, stream=True):
                    yield text
                stream.result = await self._finish(run, run.answer or "", reviewed=False)

        stream = AnswerStream(chunks(), tenant_id=tenant_id)
        return stream

    @asynccontextmanager
    async def _conversation(
        self,
        tenant_id: str,
        thread_id: str | None,
        user_id: str | None,
        system_prompt: str | None,
        request: _Request,
        plan: CallPlan,
        session: str | None = None,
        opening: _Opening | None = None,
        window: tuple[int, int | None] | None = None,
    ) -> AsyncIterator[tuple[str, _AskLock]]:
        """The thread to answer, its ask lock held: `thread_id`, or the conversation found by
        how the request opens. Found, it is checked again under its lock, since another
        request of the family may have moved it meanwhile; a fork that another request made
        first is found again. Bounded: a family this busy is a `ConflictError` (409). With
        it, the lock, and the read of the thread's newest turns made with it; `thread_id`
        new, the thread opened with `opening` in the same trip (a found conversation is
        checked before anything is written to it). `window`: the turns and tokens the lock's
        read takes beyond placement's, for the window to start from (`_window_read`)."""
        views = request.views
        newest = (tokenizer_for(plan.model), first_limit(views))  # placing reads this first
        if thread_id is not None:
            turn = self._thread_turn(tenant_id, thread_id, *newest, opening, window)
            async with turn as lock:
                yield thread_id, lock
            return
        for _ in range(FIND_ATTEMPTS):
            found = await find_conversation(
                self.store,
                tenant_id=tenant_id,
                user_id=user_id,
                system_prompt=system_prompt,
                request=views,
                session=session,
            )
            if found.fork is not None:
                source, through = found.fork
                try:
                    await self.store.fork_thread(
                        tenant_id=tenant_id,
                        source_id=source,
                        thread_id=found.thread_id,
                        through_seq=through,
                    )
                except ConflictError:
                    continue  # another request forked it first: find again
            async with self._thread_turn(tenant_id, found.thread_id, *newest) as lock:
                if await extends(
                    self.store,
                    tenant_id=tenant_id,
                    thread_id=found.thread_id,
                    request=views,
                    read=lock.newest,
                ):
                    yield found.thread_id, lock
                    return
        raise ConflictError("this conversation is busy in another request; ask again")

    @asynccontextmanager
    async def _thread_turn(
        self,
        tenant_id: str,
        thread_id: str,
        tokenizer: Tokenizer,
        limit: int,
        opening: _Opening | None = None,
        window: tuple[int, int | None] | None = None,
    ) -> AsyncIterator[_AskLock]:
        """One ask at a time per thread, across processes: held from the user turn's append to
        the answer's, so every answer is built with its own question newest and stored right
        after it. In-process askers queue on a lock; other processes' on the store's thread
        lock (renewed while held, so a crashed holder frees it within `ASK_LOCK_SECONDS`). A
        thread busy for longer than `busy_wait_seconds` is a `ConflictError` (409). The
        thread's `limit` newest turns are read with the lock, in the same trip where the store
        can (with `window`, as many more as the window's first read would take, where that
        saves a trip), and a new thread is opened with `opening`'s turns there too
        (`claim_and_open`).
        The answer's append may give the lock back (`_store_output`); else it is given back
        here."""
        local = self._turns.setdefault((tenant_id, thread_id), asyncio.Lock())
        # The lock lives while an asker holds a reference to it (a weak map).
        async with local:
            owner = uuid.uuid4().hex
            deadline = time.monotonic() + self.config.busy_wait_seconds
            delay = 0.01
            ids = {"tenant_id": tenant_id, "thread_id": thread_id, "owner": owner}
            while True:
                try:
                    claim = await claim_and_open(
                        self.store,
                        **ids,
                        ttl_seconds=ASK_LOCK_SECONDS,
                        tokenizer=tokenizer,
                        limit=limit,
                        window=window,
                        opening=opening.items if opening is not None else (),
                        user_id=opening.user_id if opening is not None else None,
                    )
                except BaseException:  # the lock may be taken (the read failed after it)
                    await asyncio.shield(self.store.release_thread(**ids))
                    raise
                if claim.taken:
                    break
                if time.monotonic() > deadline:
                    raise ConflictError(
                        f"thread {thread_id!r} is busy answering another message; "
                        "ask again once that answer is in"
                    )
                await asyncio.sleep(delay)  # another process holds it: a short backoff
                delay = min(delay * 2, 0.25)
            lock = _AskLock(owner, NewestRead(claim.tail), claim.opened)
            lock.renewing = renewing = asyncio.create_task(
                keep_renewed(
                    lambda: self.store.renew_thread(
                        tenant_id=tenant_id,
                        thread_id=thread_id,
                        owner=owner,
                        ttl_seconds=ASK_LOCK_SECONDS,
                    ),
                    seconds=ASK_LOCK_SECONDS,
                    what=f"ask lock of thread {thread_id!r}",
                )
            )
            try:
                yield lock
            finally:
                renewing.cancel()
                with suppress(asyncio.CancelledError):
                    await renewing
                if not lock.released:
                    await asyncio.shield(self.store.release_thread(**ids))

    def _window_read(
        self, plan: CallPlan, request: _Request, passthrough: Sequence[MessageIn] | None
    ) -> tuple[int, int | None] | None:
        """What the built-in memory's window reads first (`WorkingMemory.first_read`), at the
        largest budget the call can have (the model's window less the answer's reserve), for
        the ask lock's read to take along: the window then needs no read of its own. None
        where no window is loaded from the thread (a client's own history), where the
        memory is a host's own, and for a request of many messages (a resent history: the
        lock reads as many turns as it has, the whole thread, for placement already)."""
        memory = self.memory
        if passthrough is not None or len(request.items) > 1:
            return None
        if not isinstance(memory, WorkingMemory):
            return None
        budget = plan.model.context_window - plan.output_reserve_tokens
        if budget <= 0:
            return None
        return memory.first_read(model=plan.model, profile=plan.profile, budget_tokens=budget)

    def _checked_request(
        self,
        message: str | MessageIn | None,
        messages: Sequence[MessageIn | NativeItem] | None,
        tools: Sequence[dict[str, Any]] | None = None,
    ) -> _Request:
        """The request's turns and tools, validated once; a ValidationError before anything
        is locked or written."""
        self._require_model()
        request = _request_turns(message, messages)
        request.tools.extend(check_client_tools(list(tools) if tools is not None else None))
        return request

    async def _begin(
        self,
        tenant_id: str,
        thread_id: str,
        request: _Request,
        user_id: str | None,
        plan: CallPlan,
        options: Mapping[str, Any] | None,
        passthrough: Sequence[MessageIn] | None = None,
        expect_turns: int | None = None,
        lock: _AskLock | None = None,
    ) -> _Run:
        client_history = passthrough is not None
        run = _Run(
            tenant_id=tenant_id,
            thread_id=thread_id,
            user_id=user_id,
            plan=plan,
            # the client's own request keeps its own tools, unless the profile adds memory
            tools=[]
            if client_history and not plan.profile.client_history_memory
            else self._tools(user_id),
            client_tools=request.tools,
            options=dict(options or {}),
            passthrough=[dict(m) for m in passthrough] if passthrough is not None else None,
            lock=lock,
        )
        opened = lock.opened if lock is not None else []
        placed = (
            Placement(start=len(request.items))  # stored already, by the lock's own trip
            if opened
            else await place(
                self.store,
                tenant_id=tenant_id,
                thread_id=thread_id,
                request=request.views,
                tokenizer=tokenizer_for(run.plan.model),
                read=lock.newest if lock is not None else None,
            )
        )
        if expect_turns is not None and placed.turn_count != expect_turns:
            raise ConflictError(
                f"thread {thread_id!r} has {placed.turn_count} turns, not {expect_turns}: "
                "it went on since"
            )
        new = request.items[placed.start :]
        run.input_seq = placed.turn_count if placed.after_seq is None else placed.after_seq
        if opened:
            run.turns += opened
            run.input_seq = opened[-1].seq or run.input_seq
        if new or placed.after_seq is not None:
            try:
                run.turns += await self.store.append(
                    tenant_id=tenant_id,
                    thread_id=thread_id,
                    messages=new,
                    user_id=user_id,
                    after_seq=placed.after_seq,
                )
            except ValidationError as exc:  # its paths name the new turns: name the request's
                raise exc.shifted("messages", placed.start) from exc
            if run.turns:
                run.input_seq = run.turns[-1].seq or run.input_seq
        if lock is not None and placed.after_seq is None:
            run.newest = lock.newest
        return run

    def plan(
        self,
        profile: Profile | str | None = None,
        *,
        model: str | None = None,
        system_prompt: str | None = None,
        max_tokens: int | None = None,
    ) -> CallPlan:
        """The settings a call under `profile` runs with (see `GatewayConfig.plan`)."""
        return self.config.plan(
            self.profiles.get(profile),
            model=model,
            system_prompt=system_prompt,
            max_tokens=max_tokens,
        )

    def _require_model(self) -> None:
        if not self._answers:
            raise ValidationError(
                "llm",
                "this gateway has no model client: pass llm= to answer (reading and "
                "forgetting memory need none)",
            )

    async def _recall_query(self, run: _Run) -> str:
        """The query rewriter's standalone query, for recall to search for too, when the
        memory asks for it (`recall_rewrite`); "" otherwise. Only a thread with facts costs a
        model call (the rewriter returns the user's text unchanged without); a failed rewrite
        is the user's text too."""
        memory = run.plan.memory
        if not (memory.enabled and memory.recall_ratio > 0 and memory.recall_rewrite):
            return ""
        return await self.rewriter.rewrite(
            tenant_id=run.tenant_id,
            thread_id=run.thread_id,
            user_id=run.user_id,
            profile=run.plan.profile,
            cheap_model_id=run.plan.cheap_model.id,
        )

    def _tools(self, user_id: str | None) -> list[dict[str, Any]]:
        agent = self.agent_memory
        if agent is None or not agent.config.enabled:
            return []
        if agent.config.scope == "user" and user_id is None:
            return []
        return agent.openai_tools()

    async def _answer(self, run: _Run, *, stream: bool) -> AsyncGenerator[str | NativeEvent, None]:
        """The rounds of one answer: model call, working-memory tools, until a text answer or
        a call of the client's tools."""
        limit = self.config.max_tool_rounds
        while True:
            offer = [*(run.tools if run.rounds < limit else []), *run.client_tools]
            plan = run.plan
            if run.passthrough is not None:
                context = await self.assembler.pass_through(
                    tenant_id=run.tenant_id,
                    thread_id=run.thread_id,
                    user_id=run.user_id,
                    profile=plan.profile,
                    model=plan.model,
                    messages=run.passthrough,
                    with_memory=plan.profile.client_history_memory,
                    tools=offer,
                    output_reserve_tokens=plan.output_reserve_tokens,
                )
            else:
                if run.recall_query is None:
                    run.recall_query = await self._recall_query(run)
                known = None
                if run.newest is not None:  # the window from what the run holds first
                    tokenizer = tokenizer_for(plan.model)
                    known = KnownThread.after(run.newest.tail, run.turns, tokenizer)
                context = await self.assembler.build(
                    tenant_id=run.tenant_id,
                    thread_id=run.thread_id,
                    user_id=run.user_id,
                    profile=plan.profile,
                    model=plan.model,
                    system_prompt=plan.system_prompt,
                    output_reserve_tokens=plan.output_reserve_tokens,
                    tools=offer,
                    recall_query=run.recall_query or None,
                    known=known,
                )
            run.context = context
            run.warnings.extend(w for w in context.warnings if w not in run.warnings)
            meta = CallMeta(
                tenant_id=run.tenant_id,
                kind=CallKind.ANSWER,
                model=plan.model.id,
                thread_id=run.thread_id,
                user_id=run.user_id,
            )
            reserve = plan.output_reserve_tokens
            sent: Sequence[MessageIn] = context.messages
            if run.passthrough is None:
                sent = await self._upstream_messages(run.tenant_id, run.thread_id, context)
            if stream:
                completion: Completion | None = None
                events = self.llm.stream(
                    model=plan.model.id,
                    messages=sent,
                    meta=meta,
                    max_tokens=reserve,
                    tools=offer or None,
                    options=run.options or None,
                )
                async with aclosing(events):  # a disconnect closes the upstream stream now
                    async for event in events:
                        if isinstance(event, TextDelta):
                            yield event.text
                        elif isinstance(event, NativeEvent):
                            yield event
                        elif isinstance(event, StreamEnd):
                            completion = event.completion
                assert completion is not None, "a stream ends with StreamEnd"
            else:
                completion = await self.llm.complete(
                    model=run.plan.model.id,
                    messages=sent,
                    meta=meta,
                    max_tokens=reserve,
                    tools=offer or None,
                    options=run.options or None,
                )
            run.usage = run.usage + completion.usage
            run.completion = completion
            offered = {tool_name(tool) for tool in offer}
            calls = [c for c in completion.tool_calls if tool_name(c) in offered]
            ours = [c for c in calls if tool_name(c) in GATEWAY_TOOLS]
            run.client_calls = tuple(c for c in calls if tool_name(c) not in GATEWAY_TOOLS)
            if ours and self.agent_memory is not None:
                run.rounds += 1
                text = "" if run.client_calls else completion.text  # the client sees the text
                rounds = await self._run_tools(run, ours, text=text)
                run.turns += rounds
                if run.passthrough is not None:  # the next round reads this one too
                    run.passthrough.extend(self._as_sent(turn) for turn in rounds)
                if not run.client_calls:
                    continue
            run.answer = completion.text
            return

    async def _upstream_messages(
        self, tenant_id: str, thread_id: str, context: AssembledContext
    ) -> Sequence[MessageIn]:
        """The request's messages as the upstream takes them: for a client that speaks the
        format a window's turns were stored in (`native_format`: a Responses upstream), each
        such message carries its turn as stored (`formats.ORIGINAL_KEY`), so that
        what the chat view cannot say (a reasoning item's encrypted content) goes back too."""
        native = self.native_format
        loaded = context.loaded
        history = context.messages[1:]
        if native is None or loaded is None or not history:
            return context.messages
        seqs = loaded.seqs[len(loaded.seqs) - len(history) :] if loaded.seqs else ()
        if len(seqs) != len(history):
            return context.messages
        window = await read_turns(
            self.store,
            tenant_id=tenant_id,
            thread_id=thread_id,
            first=seqs[0],
            count=len(seqs),
        )
        stored = {turn.seq: turn for turn in window}
        sent: list[MessageIn] = [context.messages[0]]
        for seq, message in zip(seqs, history, strict=True):
            turn = stored.get(seq)
            sent.append(carrying(message, turn.in_format(native) if turn is not None else None))
        return sent

    @property
    def native_format(self) -> str | None:
        """The format the upstream's client sends stored turns in as they are
        (``openai.responses``, ``anthropic.messages``); None for a chat upstream."""
        native: str | None = getattr(self.llm.client, "native_format", None)
        return native

    def _as_sent(self, turn: Turn) -> dict[str, Any]:
        """A stored turn as a message to the upstream: its chat view, with the turn as stored
        for a client that speaks its format (see `_upstream_messages`)."""
        native = self.native_format
        return carrying(turn.to_message(), turn.in_format(native) if native else None)

    def _answer_item(
        self, completion: Completion | None, calls: Sequence[dict[str, Any]], *, text: bool
    ) -> NativeItem | None:
        """The upstream's answer in its own format, when its client keeps one (`answer_item`:
        an Anthropic upstream's thinking blocks, which must go back with the calls they made),
        restricted to `calls` and, unless `text`, without its text."""
        keep = getattr(self.llm.client, "answer_item", None)
        if keep is None or completion is None:
            return None
        item: NativeItem | None = keep(completion, calls={str(c["id"]) for c in calls}, text=text)
        return item

    async def _run_tools(
        self, run: _Run, calls: Sequence[dict[str, Any]], *, text: str
    ) -> list[Turn]:
        """Runs the model's agent-memory calls; stores them and their results as one unit. A
        call of the client's tools in the same answer goes into a turn of its own, after it:
        the client knows the thread without the gateway's rounds."""
        assert self.agent_memory is not None
        results: list[Message] = []
        for call in calls:
            function = call.get("function") or {}
            result = await self.agent_memory.execute_tool(
                str(function.get("name", "")),
                function.get("arguments"),
                tenant_id=run.tenant_id,
                conversation_id=run.thread_id,
                user_id=run.user_id,
            )
            results.append({"role": "tool", "tool_call_id": call["id"], "content": result})
        assistant: Message | NativeItem = {
            "role": "assistant",
            "content": text or None,
            "tool_calls": calls,
        }
        assistant = self._answer_item(run.completion, calls, text=bool(text)) or assistant
        return await self._store_output(run, [assistant, *results], from_model=True)

    async def _store_output(
        self,
        run: _Run,
        messages: Sequence[MessageIn | NativeItem],
        *,
        from_model: bool,
        last: bool = False,
    ) -> list[Turn]:
        """Stores what answers the user's turn; the `last` of the ask gives its lock back
        with it. An answer of the model that the store refuses (over the size of a turn, say)
        is the upstream's fault, not the client's: an `LLMError` (502), not a
        `ValidationError` (400). A reviewer's text stays the host's."""
        tenant_id, thread_id, user_id = run.tenant_id, run.thread_id, run.user_id
        lock = run.lock if last else None
        try:
            if lock is None:
                return await self.store.append(
                    tenant_id=tenant_id, thread_id=thread_id, messages=messages, user_id=user_id
                )
            if lock.renewing is not None:
                lock.renewing.cancel()  # nothing to renew once the lock is given back
            turns = await append_and_release(
                self.store,
                tenant_id=tenant_id,
                thread_id=thread_id,
                messages=messages,
                owner=lock.owner,
                user_id=user_id,
            )
            lock.released = True
            return turns
        except ValidationError as exc:
            if not from_model:
                raise
            raise LLMError(f"the upstream's answer cannot be stored: {exc}") from exc

    async def _finish(self, run: _Run, answer: str, *, reviewed: bool) -> AskResult:
        stored: Message = {"role": "assistant", "content": answer}
        if run.client_calls:
            stored = {"role": "assistant", "content": answer or None}
            stored["tool_calls"] = list(run.client_calls)
        turn: MessageIn | NativeItem = stored
        if run.answer_format is not None:
            turn = run.answer_format(stored, None if reviewed else run.completion)
        run.turns += await self._store_output(run, [turn], from_model=not reviewed, last=True)
        self._submit_update(run, reviewed)
        assert run.context is not None
        return AskResult(
            answer=answer,
            usage=run.usage,
            warnings=run.warnings,
            context=run.context,
            turns=run.turns,
            model=run.plan.model.id,
            tool_rounds=run.rounds,
            reviewed=reviewed,
            finish_reason="tool_calls" if run.client_calls else _finish_reason(run.completion),
            thread_id=run.thread_id,
            tool_calls=run.client_calls,
            response=run.completion.raw if run.completion is not None else None,
            input_seq=run.input_seq,
        )

    def _update_due(self, run: _Run) -> bool:
        """False when the built-in memory certainly has nothing to do: SLIDING_WINDOW, memory
        switched off, or fewer new turns than `update_every_turns` since the notes the request
        was built with (the state only moves forward, so a count that was not due then is not
        due now). A host's own memory is always asked."""
        if not isinstance(self.memory, WorkingMemory):
            return True
        config = run.plan.memory
        if not config.enabled or config.strategy is not Strategy.SUMMARY_BUFFER:
            return False
        loaded = run.context.loaded if run.context else None
        if loaded is None or loaded.covered_turns is None or not run.turns:
            return True
        return update_due(
            turn_count=run.turns[-1].seq or 0,
            covered_turns=loaded.covered_turns,
            every=config.update_every_turns,
        )

    def _submit_update(self, run: _Run, reviewed: bool) -> None:
        if not self._update_due(run):
            return
        cheap = run.plan.cheap_model.id
        meta = CallMeta(
            tenant_id=run.tenant_id,
            kind=CallKind.MEMORY_WORKING,
            model=cheap,
            thread_id=run.thread_id,
            user_id=run.user_id,
        )
        request = run.context.messages if run.context else None
        result = None if reviewed else run.completion

        async def update() -> None:
            with counting_for(run.tenant_id):
                await self.memory.save_context(
                    tenant_id=run.tenant_id,
                    thread_id=run.thread_id,
                    user_id=run.user_id,
                    profile=run.plan.profile,
                    cheap_model_id=cheap,
                    meta=meta,
                    request=request,
                    result=result,
                )

        self.queue.submit((run.tenant_id, run.thread_id), update)

    @_counted_per_tenant
    async def count_tokens(
        self,
        *,
        tenant_id: str,
        messages: Sequence[MessageIn | NativeItem],
        thread_id: str | None = None,
        user_id: str | None = None,
        profile: Profile | str | None = None,
        system_prompt: str | None = None,
        model: str | None = None,
        tools: Sequence[dict[str, Any]] | None = None,
        session: str | None = None,
        options: Mapping[str, Any] | None = None,
    ) -> int:
        """The input tokens of the request `ask` would send for these messages now: the
        thread's memory with the request's new turns after it, the system prompt, the tools
        (the gateway's own too). Nothing is stored and no model answers. Counted by the
        upstream when its client can count (`count_tokens`: an Anthropic upstream, with
        `options` such as ``thinking``), else with the model's tokenizer (an estimate, 4
        characters a token, for a model it does not know); a request that edits the thread
        is counted as if it extended it."""
        request = _request_turns(None, messages)
        client_tools = check_client_tools(list(tools) if tools is not None else None)
        plan = self.plan(profile, model=model, system_prompt=system_prompt)
        tokenizer = tokenizer_for(plan.model)
        if thread_id is None:
            found = await find_conversation(
                self.store,
                tenant_id=tenant_id,
                user_id=user_id,
                system_prompt=system_prompt,
                request=request.views,
                session=session,
            )
            thread_id = found.fork[0] if found.fork is not None else found.thread_id
        placed = await place(
            self.store,
            tenant_id=tenant_id,
            thread_id=thread_id,
            request=request.views,
            tokenizer=tokenizer,
        )
        # a thread with turns: its memory as the answer would read it; a new one: what it
        # opens with
        assemble = self.assembler.build if placed.turn_count else self.assembler.opening
        context = await assemble(
            tenant_id=tenant_id,
            thread_id=thread_id,
            user_id=user_id,
            profile=plan.profile,
            model=plan.model,
            system_prompt=plan.system_prompt,
            output_reserve_tokens=plan.output_reserve_tokens,
            tools=[*self._tools(user_id), *client_tools],
        )
        counter = getattr(self.llm.client, "count_tokens", None)
        if counter is not None:
            native = self.native_format
            sent = await self._upstream_messages(tenant_id, thread_id, context)
            new_items = request.items[placed.start :]  # one view per item
            counted: int = await counter(
                model=plan.model.id,
                messages=[*sent, *(_as_upstream_message(item, native) for item in new_items)],
                tools=[*self._tools(user_id), *client_tools] or None,
                options=options,
            )
            return counted
        new = sum(tokenizer.count_message(m) for m in request.views[placed.start :])
        return context.tokens + new + context.parts["tools"]

    # -- memory of a thread ------------------------------------------------------------------

    async def get_thread_memory(
        self, *, tenant_id: str, thread_id: str, profile: Profile | str | None = None
    ) -> ThreadMemory:
        """What the gateway remembers of a thread (R12): never calls a model.

        `NotFoundError` for an unknown thread or another tenant's.
        """
        plan = self.plan(profile)
        if isinstance(self.memory, WorkingMemory):  # its state is the store's: one snapshot
            thread, state, versions = await self.store.read_memory(
                tenant_id=tenant_id, thread_id=thread_id
            )
        else:  # a host's memory keeps its own state
            thread = await self.store.get_thread(tenant_id=tenant_id, thread_id=thread_id)
            state = await self.memory.get_state(tenant_id=tenant_id, thread_id=thread_id)
            versions = await self.store.list_memory_states(tenant_id=tenant_id, thread_id=thread_id)
        config = plan.memory
        strategy = config.strategy if config.enabled else None
        document = None
        agent = self.agent_memory
        if agent is not None and (agent.config.scope == "conversation" or thread.user_id):
            document = await agent.get_working_memory(  # the conversation's, or its user's
                tenant_id=tenant_id, conversation_id=thread_id, user_id=thread.user_id
            )
        window_tokens = budget = None
        try:
            context = await self.assembler.build(
                tenant_id=tenant_id,
                thread_id=thread_id,
                user_id=thread.user_id,
                profile=plan.profile,
                model=plan.model,
                system_prompt=plan.system_prompt,  # sized as a real request is
                output_reserve_tokens=plan.output_reserve_tokens,
            )
            window_tokens, budget = context.parts["history"], context.budget_tokens
        except ValidationError:
            raise
        except Exception as exc:  # an overflowing thread still has a memory to show
            logger.info("thread %r: no window to show (%s)", thread_id, exc)
        return ThreadMemory(
            thread=thread,
            strategy=strategy,
            state=state,
            notes=render_notes(state) if strategy is Strategy.SUMMARY_BUFFER else "",
            versions=versions,
            agent_memory=document,
            window_tokens=window_tokens,
            budget_tokens=budget,
        )

    async def reset_thread_memory(
        self,
        *,
        tenant_id: str,
        thread_id: str,
        agent_memory: bool = False,
        working_memory: bool = False,
    ) -> ResetResult:
        """Forgets the thread memory's summary and facts (R14); with `agent_memory` (or its
        spec-003 name `working_memory`), also erases the conversation's agent memory and its
        versions. The turns stay. Says what it cleared (a user-scope agent memory is the
        user's: never cleared here)."""
        await self.memory.reset(tenant_id=tenant_id, thread_id=thread_id)
        agent = self.agent_memory
        wanted = agent_memory or working_memory
        cleared = wanted and agent is not None and agent.config.scope == "conversation"
        if cleared:
            assert agent is not None
            await agent.clear_working_memory(
                tenant_id=tenant_id, conversation_id=thread_id, erase_history=True
            )
        return ResetResult(thread_id=thread_id, agent_memory_cleared=cleared)

    async def delete_thread(self, *, tenant_id: str, thread_id: str) -> None:
        """Deletes the thread and everything of it: turns, summary and its versions, the
        conversation's agent memory ("delete my conversation"); unlike a reset, nothing of it
        remains. A user-scope agent memory is the user's and stays. `NotFoundError` for an
        unknown thread or another tenant's."""
        await self.store.delete_thread(tenant_id=tenant_id, thread_id=thread_id)

    def add_report_hook(self, hook: Callable[[UpdateReport], None]) -> None:
        """Also sends every background update's report to `hook` (after those already set):
        a host's metrics, say. Needs the built-in thread memory; a host's own reports itself."""
        memory = self.memory
        if not isinstance(memory, WorkingMemory):
            return
        previous = memory.on_report
        if previous is None:
            memory.on_report = hook
            return

        def both(report: UpdateReport) -> None:
            previous(report)
            hook(report)

        memory.on_report = both

    async def rewrite_query(
        self,
        *,
        tenant_id: str,
        thread_id: str,
        user_id: str | None = None,
        profile: Profile | str | None = None,
    ) -> str:
        """A standalone search query for a knowledge base, from the latest user turn and the
        thread's facts (R19); the user's text unchanged when there are no facts."""
        self._require_model()
        plan = self.plan(profile)
        return await self.rewriter.rewrite(
            tenant_id=tenant_id,
            thread_id=thread_id,
            user_id=user_id,
            profile=plan.profile,
            cheap_model_id=plan.cheap_model.id,
        )


def _finish_reason(completion: Completion | None) -> str:
    """The answer's finish reason; a round that ended on tool calls the gateway ran (or ignored
    in the last round) still ended the answer with its text: "stop"."""
    reason = completion.finish_reason if completion is not None else None
    return reason if reason and reason != "tool_calls" else "stop"


class _NoModel:
    """The model client of a gateway made without one; `Gateway._require_model` keeps every
    call from reaching it."""

    async def complete(self, **_: Any) -> Completion:  # pragma: no cover - never called
        raise ValidationError("llm", "this gateway has no model client")


def _user_message(message: str | MessageIn) -> MessageIn:
    if isinstance(message, str):
        return {"role": "user", "content": message}
    if isinstance(message, dict) and message.get("role", "user") == "user":
        return {**message, "role": "user"}
    raise ValidationError("message", "must be the user's text or a user message dict")


@dataclass(frozen=True, slots=True)
class _Request:
    """A request's turns as given (native items kept) and their validated chat views."""

    items: list[MessageIn | NativeItem]
    views: list[Message]
    tools: list[dict[str, Any]] = field(default_factory=list)
    """The client's own tools."""


def _as_upstream_message(item: MessageIn | NativeItem, native: str | None) -> MessageIn:
    """A request's turn as a message to an upstream: a native item's view, carrying the item
    (`formats.ORIGINAL_KEY`) for a client that speaks its format (`native`)."""
    if not isinstance(item, NativeItem):
        return item
    return carrying(item.message, item.item if item.format == native else None)


def _request_turns(
    message: str | MessageIn | None, messages: Sequence[MessageIn | NativeItem] | None
) -> _Request:
    """The request's turns: `message` alone, or `messages`, whose last must be the user's."""
    if (message is None) == (messages is None):
        raise ValidationError("message", "give either message or messages")
    items: list[MessageIn | NativeItem] = (
        [_user_message(message)] if message is not None else list(messages or ())
    )
    views, _ = normalize_turns(items, "message" if message is not None else "messages")
    if not views or views[-1]["role"] not in ("user", "tool"):
        raise ValidationError(
            "messages",
            "the last message must be the user's, or the results of the client's tool calls: "
            "it is what the model answers",
        )
    return _Request(items=items, views=views)
