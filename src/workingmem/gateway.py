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

The ask's parts: its request checked (`_ask_request`), its thread's ask lock and the
conversation found without an id (`_ask_locks`), its steps under the lock (`_ask`).
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import (
    AsyncGenerator,
    AsyncIterator,
    Awaitable,
    Callable,
    Coroutine,
    Mapping,
    Sequence,
)
from contextlib import asynccontextmanager
from types import TracebackType
from typing import Any, ParamSpec, Self, TypeVar

from ._ask import AnswerFormat, Ask, agent_tools, upstream_messages
from ._ask_locks import AskLocks, Opening
from ._ask_request import AskRequest, as_upstream_message, request_turns
from .agent_memory import AgentMemory, AgentMemoryConfig
from .answers import AnswerStream, AskResult, ResetResult, ThreadMemory
from .background import BackgroundQueue
from .compaction import Compaction, compact_turns, starting_point
from .config import Profile
from .context import ContextAssembler
from .conversations import find_conversation, keeps_keys, newest_key
from .errors import ValidationError, WorkingMemoryError
from .gateway_config import CallPlan, GatewayConfig, Overrides, Profiles
from .llm import (
    CallKind,
    CallMeta,
    Completion,
    GuardedClient,
    LLMClient,
    NativeEvent,
    TextDelta,
    UsageGuard,
)
from .memory import WorkingMemory, WorkingMemoryProtocol
from .messages import normalize_turns
from .placement import check_client_tools, place, visible_turns
from .prompts import PromptTemplates
from .rewriter import QueryRewriter
from .served_tools import ServedTools
from .stores.base import Store
from .stores.documents import DocumentStore
from .strategies import render_notes
from .summarizer import Caps, Summarizer
from .tokens import tokenizer_for
from .tokens._recent import counting_for
from .types import (
    CHAT_FORMAT,
    MessageIn,
    NativeItem,
    Strategy,
    Turn,
    UpdateReport,
    WorkingMemoryState,
)

__all__ = ["AnswerFormat", "AnswerStream", "AskResult", "Gateway", "ResetResult", "ThreadMemory"]

P = ParamSpec("P")
T = TypeVar("T")

logger = logging.getLogger("workingmem.gateway")

Review = Callable[[str], Awaitable[str]]
"""A human (or a rule) reviews the model's answer and returns the text to store."""


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
        self.toolless_models: set[str] = set()
        """The models whose upstream refused the agent-memory tools (the model, or the server
        as it runs, takes none), learned from the first refusal: their answers show the
        working memory read-only, without the tools."""
        self.assembler = ContextAssembler(memory=self.memory, agent_memory=agent_memory)
        self._summarizer = Summarizer(llm=self.llm, templates=templates)
        self.rewriter = QueryRewriter(
            llm=self.llm, store=store, templates=templates, config=self.config.working_memory
        )
        self._locks = AskLocks(store, busy_wait_seconds=self.config.busy_wait_seconds)
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
        appends: bool = False,
        served: ServedTools | None = None,
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
                last is the user's, or the results of the client's tool calls, or an
                assistant's text after one of those (a prefill, a "continue"): stored as the
                turn it is, the model goes on from it, and the answer is the next turn.
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
            served: the request's tools its API layer runs (`workingmem.served_tools`: a
                Responses ``tool_search`` the server runs): a call of one is answered there,
                the round stored, and the model asked again.
            appends: the request only adds to the thread (a Responses request that continues
                a response or a conversation: its input is new items): it never edits or
                regenerates the thread, though turns that repeat the thread's newest (a
                retry of an answer that failed) are still stored once.

        Raises:
            ValidationError, NotFoundError: bad input; nothing stored.
            ContextOverflowError: the message alone does not fit the model's window.
            LLMError, UsageRefusedError: the upstream failed or was refused; the user turn
                stays stored, and asking again with the same message (or messages) answers it.
        """
        begun = self._begun(
            tenant_id=tenant_id,
            thread_id=thread_id,
            message=message,
            messages=messages,
            tools=tools,
            user_id=user_id,
            profile=profile,
            system_prompt=system_prompt,
            model=model,
            options=options,
            max_tokens=max_tokens,
            passthrough=passthrough,
            answer_format=answer_format,
            expect_turns=expect_turns,
            session=session,
            appends=appends,
            served=served,
        )
        async with begun as asked:
            async for _ in asked.answer(stream=False):
                pass
            answer = asked.answer_text or ""
            reviewed = False
            if review is not None:
                edited = await review(answer)
                reviewed = edited != answer
                answer = edited
            return await asked.finish(answer, reviewed=reviewed)

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
        appends: bool = False,
        served: ServedTools | None = None,
    ) -> AnswerStream:
        """Like `ask`, yielding the answer's text as it arrives; see `AnswerStream`."""

        async def chunks() -> AsyncGenerator[TextDelta | NativeEvent, None]:
            begun = self._begun(
                tenant_id=tenant_id,
                thread_id=thread_id,
                message=message,
                messages=messages,
                tools=tools,
                user_id=user_id,
                profile=profile,
                system_prompt=system_prompt,
                model=model,
                options=options,
                max_tokens=max_tokens,
                passthrough=passthrough,
                answer_format=answer_format,
                expect_turns=expect_turns,
                session=session,
                appends=appends,
                served=served,
            )
            async with begun as asked:
                stream.thread_id = asked.thread_id
                async for piece in asked.answer(stream=True):
                    yield piece
                stream.result = await asked.finish(asked.answer_text or "", reviewed=False)

        stream = AnswerStream(chunks(), tenant_id=tenant_id)
        return stream

    @asynccontextmanager
    async def _begun(
        self,
        *,
        tenant_id: str,
        thread_id: str | None,
        message: str | MessageIn | None,
        messages: Sequence[MessageIn | NativeItem] | None,
        tools: Sequence[dict[str, Any]] | None,
        user_id: str | None,
        profile: Profile | str | None,
        system_prompt: str | None,
        model: str | None,
        options: Mapping[str, Any] | None,
        max_tokens: int | None,
        passthrough: Sequence[MessageIn] | None,
        answer_format: AnswerFormat | None,
        expect_turns: int | None,
        session: str | None,
        appends: bool,
        served: ServedTools | None,
    ) -> AsyncIterator[Ask]:
        """An ask begun under its thread's ask lock (`AskLocks.conversation`), the request's
        new turns stored; the request is checked before any lock or write."""
        request = self._checked_request(message, messages, tools)
        plan = self.plan(profile, model=model, system_prompt=system_prompt, max_tokens=max_tokens)
        found = self._locks.conversation(
            tenant_id,
            thread_id,
            user_id,
            system_prompt,
            request,
            tokenizer_for(plan.model),
            session,
            Opening.of(request, user_id, expect_turns),
            self._window_read(plan, request, passthrough),
        )
        async with found as (on, lock):
            asked = await Ask.begin(
                self,
                tenant_id,
                on,
                request,
                user_id,
                plan,
                options,
                passthrough,
                expect_turns,
                lock,
                answer_format,
                appends,
                served,
            )
            yield asked
        if thread_id is None and asked.turns and keeps_keys(self.store):
            # found by how it opens: marked by its answer, for a client that trims its history
            # (after the lock, so only while that answer is the newest turn: see mark_awaiting)
            key = newest_key(
                tenant_id=tenant_id,
                user_id=user_id,
                system_prompt=system_prompt,
                newest=asked.turns[-1].to_message(),
                session=session,
            )
            await self.store.mark_awaiting(
                tenant_id=tenant_id, conversation_id=on, key=key, newest_seq=asked.turns[-1].seq
            )

    def takes_tools(self, model: str) -> bool:
        """Whether `model` is offered the agent-memory tools: not once its upstream refused
        them (`toolless_models`)."""
        return model not in self.toolless_models

    def _window_read(
        self, plan: CallPlan, request: AskRequest, passthrough: Sequence[MessageIn] | None
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
    ) -> AskRequest:
        """The request's turns and tools, validated once; a ValidationError before anything
        is locked or written."""
        self._require_model()
        request = request_turns(message, messages)
        request.tools.extend(check_client_tools(list(tools) if tools is not None else None))
        return request

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

    @property
    def native_format(self) -> str | None:
        """The format the upstream's client sends stored turns in as they are
        (``openai.responses``, ``anthropic.messages``); None for a chat upstream."""
        native: str | None = getattr(self.llm.client, "native_format", None)
        return native

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
        appends: bool = False,
    ) -> int:
        """The input tokens of the request `ask` would send for these messages now: the
        thread's memory with the request's new turns after it, the system prompt, the tools
        (the gateway's own too). Nothing is stored and no model answers. Counted by the
        upstream when its client can count (`count_tokens`: an Anthropic upstream, with
        `options` such as ``thinking``), else with the model's tokenizer (an estimate, 4
        characters a token, for a model it does not know); a request that edits the thread
        is counted as if it extended it; with `appends`, as `ask` places it (new turns, never
        an edit). No messages count the thread's memory alone (the Responses API's count of a
        conversation)."""
        if not messages and thread_id is None:
            raise ValidationError("messages", "nothing to count: give messages, or a thread_id")
        request = request_turns(None, messages) if messages else AskRequest(items=[], views=[])
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
                tokenizer=tokenizer,
            )
            thread_id = found.fork[0] if found.fork is not None else found.thread_id
        placed = await place(
            self.store,
            tenant_id=tenant_id,
            thread_id=thread_id,
            request=request.views,
            tokenizer=tokenizer,
            rewrites=bool(request.views) and not appends,
        )
        # a thread with turns: its memory as the answer would read it; a new one: what it
        # opens with
        assemble = (
            functools.partial(self.assembler.build, file_bytes=self.config.max_inline_file_bytes)
            if placed.turn_count
            else self.assembler.opening
        )
        editable = self.takes_tools(plan.model.id)
        offer = [*(agent_tools(self.agent_memory, user_id) if editable else []), *client_tools]
        context = await assemble(
            tenant_id=tenant_id,
            thread_id=thread_id,
            user_id=user_id,
            profile=plan.profile,
            model=plan.model,
            system_prompt=plan.system_prompt,
            output_reserve_tokens=plan.output_reserve_tokens,
            tools=offer,
            memory_tools=editable,
        )
        counter = getattr(self.llm.client, "count_tokens", None)
        if counter is not None:
            native = self.native_format
            limit = self.config.max_inline_file_bytes
            sent = await upstream_messages(self.store, native, tenant_id, thread_id, context, limit)
            new_items = request.items[placed.start :]  # one view per item
            counted: int = await counter(
                model=plan.model.id,
                messages=[*sent, *(as_upstream_message(item, native) for item in new_items)],
                tools=offer or None,
                options=options,
            )
            return counted
        new = sum(tokenizer.count_message(m) for m in request.views[placed.start :])
        return context.tokens + new + context.parts["tools"]

    @_counted_per_tenant
    async def compact(
        self,
        *,
        tenant_id: str,
        messages: Sequence[MessageIn | NativeItem] = (),
        thread_id: str | None = None,
        through_seq: int | None = None,
        user_id: str | None = None,
        profile: Profile | str | None = None,
        model: str | None = None,
    ) -> Compaction:
        """A conversation compacted (the Responses API's ``responses.compact``): the thread's
        turns the client saw (up to `through_seq`, else all), then `messages`, folded into a
        summary and facts by the profile's cheap model. The thread's stored summary, or a
        compaction of the gateway's in the conversation, is where it starts; only the turns
        after it are read. Nothing is stored. `NotFoundError` for an unknown thread (or
        another tenant's), `ValidationError` for a conversation without turns; the cheap
        model's failures as `Summarizer.update` raises them."""
        self._require_model()
        plan = self.plan(profile, model=model)
        history: list[Turn] = []
        versions: list[WorkingMemoryState] = []
        if thread_id is not None:
            thread, state, versions = await self.store.read_memory(
                tenant_id=tenant_id, thread_id=thread_id
            )
            last = thread.turn_count if through_seq is None else min(through_seq, thread.turn_count)
            history = await visible_turns(
                self.store, tenant_id=tenant_id, thread_id=thread_id, first=1, count=last
            )
            versions = [state, *versions]
        stored = (history[-1].seq or 0) if history else 0
        views, _ = normalize_turns(list(messages), "messages", limit=None, texts=False)  # read
        new = [
            Turn.from_message(
                view,
                seq=stored + number,
                format=item.format if isinstance(item, NativeItem) else CHAT_FORMAT,
                item=item.item if isinstance(item, NativeItem) else None,
            )
            for number, (item, view) in enumerate(zip(messages, views, strict=True), start=1)
        ]
        turns = (*history, *new)
        if not turns:
            raise ValidationError("messages", "nothing to compact: give messages, or a thread")
        meta = CallMeta(
            tenant_id=tenant_id,
            kind=CallKind.COMPACTION,
            model=plan.cheap_model.id,
            thread_id=thread_id,
            user_id=user_id,
        )
        compacted = await compact_turns(
            self._summarizer,
            turns,
            start=starting_point(versions, turns, stored=stored),
            caps=Caps.of(plan.memory),
            tokenizer=tokenizer_for(plan.cheap_model),
            max_input_tokens=plan.memory.helper_input_max_tokens,
            meta=meta,
        )
        return Compaction(turns, stored, compacted, thread_id)

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


class _NoModel:
    """The model client of a gateway made without one; `Gateway._require_model` keeps every
    call from reaching it."""

    async def complete(self, **_: Any) -> Completion:  # pragma: no cover - never called
        raise ValidationError("llm", "this gateway has no model client")
