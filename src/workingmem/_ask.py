"""One ask of the gateway, under its thread's ask lock: its state and its steps.

    ask = await Ask.begin(gateway, tenant_id, thread_id, request, user_id, plan, ...)
    async for piece in ask.answer(stream=True): ...  # the rounds: model, memory tools, ...
    result = await ask.finish(ask.answer_text, reviewed=False)

`begin` stores the request's new turns (durable before anything else); `answer` runs the
rounds (the model's calls of the agent-memory tools are run and stored as turns); `finish`
stores the answer, gives the lock back with it and submits the memory's update to the
background queue.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator, Callable, Mapping, Sequence
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ._ask_locks import AskLock
from ._ask_request import AskRequest
from ._inline_files import within_file_bytes
from .agent_memory import AgentMemory
from .answers import AskResult
from .context import AssembledContext, AssemblyWarning
from .errors import ConflictError, ValidationError
from .formats import carrying
from .formats.breakpoints import newest_marks
from .formats.chat_answer import answer_item, chat_original, with_chat_original
from .formats.tool_choice import allowing
from .gateway_config import CallPlan
from .llm import CallKind, CallMeta, Completion, LLMError, NativeEvent, StreamEnd, TextDelta, Usage
from .llm._refused_fields import refuses_tools
from .memory import KnownThread, WorkingMemory
from .placement import GATEWAY_TOOLS, NewestRead, Placement, place, tool_name
from .served_tools import ServedTools
from .stores.base import Store, append_and_release, read_turns, read_turns_at
from .strategies import update_due
from .tokens import tokenizer_for
from .tokens._recent import counting_for
from .types import Message, MessageIn, NativeItem, Strategy, Turn

if TYPE_CHECKING:
    from .gateway import Gateway

__all__ = ["AnswerFormat", "Ask", "agent_tools", "upstream_messages"]

logger = logging.getLogger("workingmem.gateway")

AnswerFormat = Callable[[Message, "Completion | None"], "MessageIn | NativeItem"]
"""What to store for the answer: given it as a chat message (the text and the calls of the
client's tools) and the upstream's last completion (None after a review), the turn as another
API keeps it (a `NativeItem` whose view is that message): a Responses client's output items
with the ids it was shown, say."""


@dataclass(slots=True, kw_only=True)
class Ask:
    """One ask: what it was given, what it stored, what the model said."""

    gateway: Gateway
    tenant_id: str
    thread_id: str
    user_id: str | None
    plan: CallPlan
    tools: list[dict[str, Any]]
    """The gateway's own agent-memory tools, offered while rounds are left."""
    client_tools: list[dict[str, Any]] = field(default_factory=list)
    """The client's own tools: a call of one ends the answer, for the client to run."""
    options: dict[str, Any] = field(default_factory=dict)
    """The request's other fields, sent to the upstream as they are."""
    client_calls: tuple[dict[str, Any], ...] = ()
    """The model's calls of the client's tools in its last round."""
    served: ServedTools | None = None
    """The request's tools its API layer runs (a server's tool search): a call of one is
    answered there, and the model asked again."""
    served_rounds: int = 0
    """The rounds that ran `served` tools."""
    passthrough: list[dict[str, Any]] | None = None
    """The client's own messages, sent instead of the memory (history "client")."""
    answer_format: AnswerFormat | None = None
    input_seq: int = 0
    """The seq of the request's last turn: what the answer answers."""
    turns: list[Turn] = field(default_factory=list)
    """The turns the ask stored, in order: the request's new ones, the tool rounds', the
    answer."""
    usage: Usage = field(default_factory=Usage)
    """The upstream's usage over every round."""
    warnings: list[AssemblyWarning] = field(default_factory=list)
    context: AssembledContext | None = None
    """The last round's request, as assembled."""
    answer_text: str | None = None
    """The model's answer, once its rounds are done."""
    rounds: int = 0
    """The rounds that ran the agent-memory tools."""
    completion: Completion | None = None
    """The upstream's last completion."""
    recall_query: str | None = None
    """The rewriter's query recall searches for too (`recall_rewrite`), made once an ask."""
    lock: AskLock | None = None
    """The thread's ask lock, which the answer's append gives back."""
    newest: NewestRead | None = None
    """The lock's read, when the ask's turns were appended after it: the thread's newest
    turns are that read and `turns` (`KnownThread.after`)."""

    @classmethod
    async def begin(
        cls,
        gateway: Gateway,
        tenant_id: str,
        thread_id: str,
        request: AskRequest,
        user_id: str | None,
        plan: CallPlan,
        options: Mapping[str, Any] | None,
        passthrough: Sequence[MessageIn] | None = None,
        expect_turns: int | None = None,
        lock: AskLock | None = None,
        answer_format: AnswerFormat | None = None,
        appends: bool = False,
        served: ServedTools | None = None,
    ) -> Ask:
        """The ask, the request's new turns stored (placed after the thread's turns they
        continue; an edit replaces the turns after the point it changes)."""
        client_history = passthrough is not None
        ask = cls(
            gateway=gateway,
            tenant_id=tenant_id,
            thread_id=thread_id,
            user_id=user_id,
            plan=plan,
            # the client's own request keeps its own tools, unless the profile adds memory
            tools=[]
            if client_history and not plan.profile.client_history_memory
            else agent_tools(gateway.agent_memory, user_id),
            client_tools=request.tools,
            options=dict(options or {}),
            passthrough=[dict(m) for m in passthrough] if passthrough is not None else None,
            answer_format=answer_format,
            lock=lock,
            served=served,
        )
        store = gateway.store
        opened = lock.opened if lock is not None else []
        placed = (
            Placement(start=len(request.items))  # stored already, by the lock's own trip
            if opened
            else await place(
                store,
                tenant_id=tenant_id,
                thread_id=thread_id,
                request=request.views,
                tokenizer=tokenizer_for(plan.model),
                read=lock.newest if lock is not None else None,
                rewrites=not appends,
            )
        )
        if expect_turns is not None and placed.turn_count != expect_turns:
            raise ConflictError(
                f"thread {thread_id!r} has {placed.turn_count} turns, not {expect_turns}: "
                "it went on since"
            )
        new = request.items[placed.start :]
        ask.input_seq = placed.turn_count if placed.after_seq is None else placed.after_seq
        if opened:
            ask.turns += opened
            ask.input_seq = opened[-1].seq or ask.input_seq
        if new or placed.after_seq is not None:
            try:
                ask.turns += await store.append(
                    tenant_id=tenant_id,
                    thread_id=thread_id,
                    messages=new,
                    user_id=user_id,
                    after_seq=placed.after_seq,
                )
            except ValidationError as exc:  # its paths name the new turns: name the request's
                raise exc.shifted("messages", placed.start) from exc
            if ask.turns:
                ask.input_seq = ask.turns[-1].seq or ask.input_seq
        if lock is not None and placed.after_seq is None:
            ask.newest = lock.newest
        return ask

    async def answer(self, *, stream: bool) -> AsyncGenerator[TextDelta | NativeEvent, None]:
        """The rounds of one answer: model call, working-memory tools, until a text answer or
        a call of the client's tools (then in `answer_text`, `client_calls`)."""
        gateway = self.gateway
        limit = gateway.config.max_tool_rounds
        while True:
            ours_offered = self.rounds < limit and self._memory_tools()
            offer = [*(self.tools if ours_offered else []), *self._client_offer(limit)]
            context = self.context = await self._context(offer)
            self.warnings.extend(w for w in context.warnings if w not in self.warnings)
            plan = self.plan
            meta = CallMeta(
                tenant_id=self.tenant_id,
                kind=CallKind.ANSWER,
                model=plan.model.id,
                thread_id=self.thread_id,
                user_id=self.user_id,
            )
            sent: Sequence[MessageIn] = context.messages
            if self.passthrough is None:
                sent = await upstream_messages(
                    gateway.store,
                    gateway.native_format,
                    self.tenant_id,
                    self.thread_id,
                    context,
                    gateway.config.max_inline_file_bytes,
                )
            reserve = plan.output_reserve_tokens
            own = [str(tool_name(tool)) for tool in offer if tool_name(tool) in GATEWAY_TOOLS]
            options = allowing(self.options or None, own)
            completion: Completion | None = None
            shown = False
            call: dict[str, Any] = {
                "model": plan.model.id,
                "messages": sent,
                "meta": meta,
                "max_tokens": reserve,
                "tools": offer or None,
                "options": options,
            }
            try:
                if stream:
                    events = gateway.llm.stream(**call)
                    async with aclosing(events):  # a disconnect closes the upstream stream now
                        async for event in events:
                            if isinstance(event, TextDelta | NativeEvent):
                                shown = True
                                yield event
                            elif isinstance(event, StreamEnd):
                                completion = event.completion
                else:
                    completion = await gateway.llm.complete(**call)
            except LLMError as exc:
                if shown or not own or self.client_tools or not refuses_tools(exc):
                    raise
                self._learn_toolless(exc)  # and ask again, the memory shown read-only
                continue
            assert completion is not None, "a stream ends with StreamEnd"
            self.usage = self.usage + completion.usage
            self.completion = completion
            # The gateway runs its own tools while it offers them; every other call is the
            # client's, a name it never offered too (a model may make one up): the client
            # answers it as it would from the model directly, where dropping it would leave
            # an empty answer.
            offered = {tool_name(tool) for tool in offer}
            ours = [c for c in completion.tool_calls if tool_name(c) in GATEWAY_TOOLS]
            ours = [c for c in ours if tool_name(c) in offered]
            self.client_calls = tuple(
                c for c in completion.tool_calls if tool_name(c) not in GATEWAY_TOOLS
            )
            served = self._served_calls(limit)
            ran = False
            if ours and gateway.agent_memory is not None:
                self.rounds += 1
                # the client sees the text
                text = "" if self.client_calls or served else completion.text
                self._keep_round(await self._run_tools(ours, text=text))
                ran = True
            if served:
                await self._serve(served, text="" if self.client_calls or ran else completion.text)
                ran = True
            if ran and not self.client_calls:
                continue
            self.answer_text = completion.text
            return

    async def finish(self, answer: str, *, reviewed: bool) -> AskResult:
        """Stores the answer (giving the thread's lock back with it) and submits the memory's
        update; the ask's result."""
        stored: Message = {"role": "assistant", "content": answer}
        if self.client_calls:
            stored = {"role": "assistant", "content": answer or None}
            stored["tool_calls"] = list(self.client_calls)
        turn: MessageIn | NativeItem = stored
        if self.answer_format is not None:
            turn = self.answer_format(stored, None if reviewed else self.completion)
        if not reviewed and self.completion is not None:  # what a chat upstream asks back
            turn = with_chat_original(turn, stored, self.completion.own_fields)
        self.turns += await self._store_output([turn], from_model=not reviewed, last=True)
        self._submit_update(reviewed)
        assert self.context is not None
        return AskResult(
            answer=answer,
            usage=self.usage,
            warnings=self.warnings,
            context=self.context,
            turns=self.turns,
            model=self.plan.model.id,
            tool_rounds=self.rounds,
            reviewed=reviewed,
            finish_reason="tool_calls" if self.client_calls else _finish_reason(self.completion),
            thread_id=self.thread_id,
            tool_calls=self.client_calls,
            response=self.completion.raw if self.completion is not None else None,
            input_seq=self.input_seq,
            logprobs=self.completion.logprobs if self.completion is not None else None,
            answered_by=self.completion.model if self.completion is not None else None,
        )

    def _client_offer(self, limit: int) -> list[dict[str, Any]]:
        """The client's tools as offered this round: the served ones while rounds are left."""
        served = self.served
        if served is None or self.served_rounds < limit:
            return self.client_tools
        return [tool for tool in self.client_tools if not served.serves(str(tool_name(tool)))]

    def _served_calls(self, limit: int) -> list[dict[str, Any]]:
        """The last round's calls of `served` tools, taken from the client's calls; none to
        run once the rounds are spent (a model that calls the tool no longer offered)."""
        served = self.served
        if served is None:
            return []
        ran: list[dict[str, Any]] = []
        kept: list[dict[str, Any]] = []
        for call in self.client_calls:
            (ran if served.serves(str(tool_name(call))) else kept).append(call)
        self.client_calls = tuple(kept)
        return ran if self.served_rounds < limit else []

    async def _serve(self, calls: Sequence[dict[str, Any]], *, text: str) -> None:
        """Runs a round of `served` calls: stores what it made, offers the tools it leaves."""
        assert self.served is not None
        self.served_rounds += 1
        done = self.served.run(calls, text=text)
        self._keep_round(await self._store_output(done.turns, from_model=True))
        self.client_tools = list(done.tools)

    def _keep_round(self, stored: list[Turn]) -> None:
        """A round the gateway ran, stored: the ask's turns, and what the next round reads
        of a client's own history."""
        self.turns += stored
        if self.passthrough is not None:
            self.passthrough.extend(self._as_sent(turn) for turn in stored)

    def _memory_tools(self) -> bool:
        return self.gateway.takes_tools(self.plan.model.id)

    def _learn_toolless(self, refusal: LLMError) -> None:
        model = self.plan.model.id
        self.gateway.toolless_models.add(model)
        logger.warning(
            "the upstream refused the agent-memory tools for %s (%s): its answers show the "
            "working memory read-only from now on",
            model,
            refusal,
        )

    async def _context(self, offer: list[dict[str, Any]]) -> AssembledContext:
        """A round's request: the client's own messages (history "client"), or the thread's
        memory, its window starting from what the ask holds already."""
        assembler, plan = self.gateway.assembler, self.plan
        if self.passthrough is not None:
            return await assembler.pass_through(
                tenant_id=self.tenant_id,
                thread_id=self.thread_id,
                user_id=self.user_id,
                profile=plan.profile,
                model=plan.model,
                messages=self.passthrough,
                with_memory=plan.profile.client_history_memory,
                tools=offer,
                output_reserve_tokens=plan.output_reserve_tokens,
                memory_tools=self._memory_tools(),
            )
        if self.recall_query is None:
            self.recall_query = await self._recall_query()
        known = None
        if self.newest is not None:
            tokenizer = tokenizer_for(plan.model)
            known = KnownThread.after(self.newest.tail, self.turns, tokenizer)
        return await assembler.build(
            tenant_id=self.tenant_id,
            thread_id=self.thread_id,
            user_id=self.user_id,
            profile=plan.profile,
            model=plan.model,
            system_prompt=plan.system_prompt,
            output_reserve_tokens=plan.output_reserve_tokens,
            tools=offer,
            recall_query=self.recall_query or None,
            known=known,
            file_bytes=self.gateway.config.max_inline_file_bytes,
            memory_tools=self._memory_tools(),
        )

    async def _recall_query(self) -> str:
        """The query rewriter's standalone query, for recall to search for too, when the
        memory asks for it (`recall_rewrite`); "" otherwise. Only a thread with facts costs a
        model call (the rewriter returns the user's text unchanged without); a failed rewrite
        is the user's text too."""
        memory = self.plan.memory
        if not (memory.enabled and memory.recall_ratio > 0 and memory.recall_rewrite):
            return ""
        return await self.gateway.rewriter.rewrite(
            tenant_id=self.tenant_id,
            thread_id=self.thread_id,
            user_id=self.user_id,
            profile=self.plan.profile,
            cheap_model_id=self.plan.cheap_model.id,
        )

    def _as_sent(self, turn: Turn) -> dict[str, Any]:
        """A stored turn as a message to the upstream: its chat view (as stored when it was
        stored in chat's own format), with the turn as stored for a client that speaks its
        format (see `upstream_messages`)."""
        native = self.gateway.native_format
        view = chat_original(turn) or turn.to_message()
        return carrying(view, turn.in_format(native) if native else None)

    def _answer_item(self, calls: Sequence[dict[str, Any]], *, text: bool) -> NativeItem | None:
        """The upstream's answer in its own format, when its client keeps one (`answer_item`:
        an Anthropic upstream's thinking blocks, which must go back with the calls they made),
        restricted to `calls` and, unless `text`, without its text."""
        keep = getattr(self.gateway.llm.client, "answer_item", None)
        if keep is None or self.completion is None:
            return None
        item: NativeItem | None = keep(
            self.completion, calls={str(c["id"]) for c in calls}, text=text
        )
        return item

    async def _run_tools(self, calls: Sequence[dict[str, Any]], *, text: str) -> list[Turn]:
        """Runs the model's agent-memory calls; stores them and their results as one unit. A
        call of the client's tools in the same answer goes into a turn of its own, after it:
        the client knows the thread without the gateway's rounds."""
        agent = self.gateway.agent_memory
        assert agent is not None
        results: list[Message] = []
        for call in calls:
            function = call.get("function") or {}
            result = await agent.execute_tool(
                str(function.get("name", "")),
                function.get("arguments"),
                tenant_id=self.tenant_id,
                conversation_id=self.thread_id,
                user_id=self.user_id,
            )
            results.append({"role": "tool", "tool_call_id": call["id"], "content": result})
        said: Message = {"role": "assistant", "content": text or None, "tool_calls": calls}
        own = self.completion.own_fields if self.completion is not None else None
        assistant = self._answer_item(calls, text=bool(text)) or answer_item(said, own)
        return await self._store_output([assistant, *results], from_model=True)

    async def _store_output(
        self,
        messages: Sequence[MessageIn | NativeItem],
        *,
        from_model: bool,
        last: bool = False,
    ) -> list[Turn]:
        """Stores what answers the user's turn; the `last` of the ask gives its lock back
        with it. An answer of the model that the store refuses (over the size of a turn, say)
        is the upstream's fault, not the client's: an `LLMError` (502), not a
        `ValidationError` (400). A reviewer's text stays the host's."""
        tenant_id, thread_id, user_id = self.tenant_id, self.thread_id, self.user_id
        store = self.gateway.store
        lock = self.lock if last else None
        try:
            if lock is None:
                return await store.append(
                    tenant_id=tenant_id, thread_id=thread_id, messages=messages, user_id=user_id
                )
            lock.stop_renewing()
            turns = await append_and_release(
                store,
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

    def _update_due(self) -> bool:
        """False when the built-in memory certainly has nothing to do: SLIDING_WINDOW, memory
        switched off, or fewer new turns than `update_every_turns` since the notes the request
        was built with (the state only moves forward, so a count that was not due then is not
        due now). A host's own memory is always asked."""
        if not isinstance(self.gateway.memory, WorkingMemory):
            return True
        config = self.plan.memory
        if not config.enabled or config.strategy is not Strategy.SUMMARY_BUFFER:
            return False
        loaded = self.context.loaded if self.context else None
        if loaded is None or loaded.covered_turns is None or not self.turns:
            return True
        return update_due(
            turn_count=self.turns[-1].seq or 0,
            covered_turns=loaded.covered_turns,
            every=config.update_every_turns,
        )

    def _submit_update(self, reviewed: bool) -> None:
        """The memory's update, to the background queue: the answer never waits for it."""
        if not self._update_due():
            return
        memory, tenant_id, thread_id = self.gateway.memory, self.tenant_id, self.thread_id
        user_id, profile, cheap = self.user_id, self.plan.profile, self.plan.cheap_model.id
        meta = CallMeta(
            tenant_id=tenant_id,
            kind=CallKind.MEMORY_WORKING,
            model=cheap,
            thread_id=thread_id,
            user_id=user_id,
        )
        request = self.context.messages if self.context else None
        result = None if reviewed else self.completion

        async def update() -> None:
            with counting_for(tenant_id):
                await memory.save_context(
                    tenant_id=tenant_id,
                    thread_id=thread_id,
                    user_id=user_id,
                    profile=profile,
                    cheap_model_id=cheap,
                    meta=meta,
                    request=request,
                    result=result,
                )

        self.gateway.queue.submit((tenant_id, thread_id), update)


def agent_tools(agent: AgentMemory | None, user_id: str | None) -> list[dict[str, Any]]:
    """The agent-memory tools offered to the model: none when it is off, or kept per user
    and the request names no user."""
    if agent is None or not agent.config.enabled:
        return []
    if agent.config.scope == "user" and user_id is None:
        return []
    return agent.openai_tools()


async def upstream_messages(
    store: Store,
    native: str | None,
    tenant_id: str,
    thread_id: str,
    context: AssembledContext,
    file_bytes: int,
) -> Sequence[MessageIn]:
    """The request's messages as the upstream takes them: for a client that speaks the
    format a window's turns were stored in (`native`: a Responses upstream), each such
    message carries its turn as stored (`formats.ORIGINAL_KEY`), so that what the chat view
    cannot say (a reasoning item's encrypted content) goes back too; the files of older
    messages named once the newer ones' pass `file_bytes` (`within_file_bytes`); the client's
    cache breakpoints but the newest few left out (`newest_marks`)."""
    sent = await _with_originals(store, native, tenant_id, thread_id, context)
    return newest_marks(within_file_bytes(sent, file_bytes))


async def _with_originals(
    store: Store, native: str | None, tenant_id: str, thread_id: str, context: AssembledContext
) -> Sequence[MessageIn]:
    loaded = context.loaded
    history = context.messages[1:]
    if native is None or loaded is None or not history:
        return context.messages
    seqs = loaded.seqs[len(loaded.seqs) - len(history) :] if loaded.seqs else ()
    if len(seqs) != len(history):
        return context.messages
    named = set(loaded.named_files)  # their files stay in the store: sent as named
    if named:
        wanted = [seq for seq in seqs if seq not in named]
        window = await read_turns_at(store, tenant_id=tenant_id, thread_id=thread_id, seqs=wanted)
    else:
        window = await read_turns(
            store, tenant_id=tenant_id, thread_id=thread_id, first=seqs[0], count=len(seqs)
        )
    stored = {turn.seq: turn for turn in window}
    sent: list[MessageIn] = [context.messages[0]]
    for seq, message in zip(seqs, history, strict=True):
        turn = stored.get(seq)
        sent.append(carrying(message, turn.in_format(native) if turn is not None else None))
    return sent


def _finish_reason(completion: Completion | None) -> str:
    """The answer's finish reason; a round that ended on tool calls the gateway ran (or ignored
    in the last round) still ended the answer with its text: "stop"."""
    reason = completion.finish_reason if completion is not None else None
    return reason if reason and reason != "tool_calls" else "stop"
