"""WorkingMemory: the four methods of spec 000 over the two strategies of spec 001.

    config = WorkingMemoryConfig(strategy=Strategy.SLIDING_WINDOW)
    memory = WorkingMemory(store=store, config=config)
    loaded = await memory.load(tenant_id="t1", thread_id="th1", model=ModelInfo(id="gpt-4o",
                               context_window=128_000), profile=Profile(id="default"),
                               budget_tokens=4_000)
    loaded.messages, loaded.notes

It sits between the ThreadStore (turns and state) and the ContextAssembler (the request).
`load` never calls a model and never changes what the thread or its memory hold; its only
write is the token-count cache, once per turn and tokenizer. With `recall_ratio`, it also asks
its `Retriever` for older turns that bear on the current one (`recall.py`).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Protocol, cast, runtime_checkable

from ._window_read import KnownThread, first_batch, read_window
from .config import DISABLED_WINDOW_TURNS, Profile, WorkingMemoryConfig
from .errors import ConflictError, ContextOverflowError, NotFoundError, ValidationError
from .llm import CallMeta, Completion, GuardedClient, LLMClient, UsageGuard
from .messages import normalize_messages
from .prompts import PromptTemplates
from .recall import LexicalRetriever, Recalled, Retriever, recall_before
from .stores.base import StateWrite, ThreadStore, TurnSearchStore
from .strategies import render_notes
from .summarizer import Summarizer
from .tokens import Tokenizer, tokenizer_for
from .types import (
    ChatMessage,
    CountedTurn,
    MessageIn,
    ModelInfo,
    Strategy,
    UpdateOutcome,
    UpdateReport,
    WorkingMemoryLoad,
    WorkingMemoryState,
)
from .updater import SummaryUpdater

__all__ = ["KnownThread", "WorkingMemory", "WorkingMemoryProtocol"]

logger = logging.getLogger("workingmem.memory")

_QUIET = frozenset(
    {UpdateOutcome.UPDATED, UpdateOutcome.NOT_DUE, UpdateOutcome.SKIPPED, UpdateOutcome.BUSY}
)
_RESET_ATTEMPTS = 5


@runtime_checkable
class WorkingMemoryProtocol(Protocol):
    """What the gateway asks of a thread memory; a host may pass its own (R18)."""

    async def load(
        self,
        *,
        tenant_id: str,
        thread_id: str,
        model: ModelInfo,
        profile: Profile,
        budget_tokens: int,
    ) -> WorkingMemoryLoad: ...

    async def save_context(
        self,
        *,
        tenant_id: str,
        thread_id: str,
        user_id: str | None,
        profile: Profile,
        cheap_model_id: str,
        meta: CallMeta | None = None,
        request: Sequence[MessageIn] | None = None,
        result: Completion | None = None,
    ) -> None:
        """Learns from one answered call. `meta` is the helper call's (whose tokens the guard
        counts), `request` the messages that were sent, `result` the upstream's answer (None
        when a human reviewed it: the stored turn is then what counts)."""
        ...

    async def get_state(self, *, tenant_id: str, thread_id: str) -> WorkingMemoryState: ...

    async def reset(self, *, tenant_id: str, thread_id: str) -> None: ...


class WorkingMemory:
    """The built-in thread memory: SLIDING_WINDOW and SUMMARY_BUFFER behind one interface."""

    def __init__(
        self,
        *,
        store: ThreadStore,
        config: WorkingMemoryConfig | None = None,
        llm: LLMClient | None = None,
        templates: PromptTemplates | None = None,
        guard: UsageGuard | None = None,
        on_report: Callable[[UpdateReport], None] | None = None,
        structured_output: str = "json_schema",
        models: Mapping[str, ModelInfo] | None = None,
        update_lease_seconds: float = 30.0,
        retriever: Retriever | None = None,
    ) -> None:
        """
        Args:
            store: where threads and states live.
            config: the memory's settings; a profile may override them per call.
            llm: the client for SUMMARY_BUFFER's helper calls; without one, SUMMARY_BUFFER
                serves the stored notes but never updates them (reported as skipped).
            templates: the prompt templates (MEMORY_WORKING); the package's defaults if None.
            guard: the usage guard every helper call passes (R10); allow-all if None.
            on_report: called with the report of every save_context (also logged).
            structured_output: how JSON is requested: "json_schema", "json_object", "none".
            models: what is known of the helper models by id (their tokenizers cut the
                summary's chunks); an unknown id counts with its own tokenizer or an estimate.
            update_lease_seconds: how long an updater's lease on a thread lasts unless renewed
                (it renews every third of it while it works): the longest a crashed updater
                keeps others from updating the thread.
            retriever: what finds the turns `recall_ratio` recalls; the store's full-text
                search (`LexicalRetriever`) when the store has one and None is given.
        """
        self.store = store
        self.config = config or WorkingMemoryConfig()
        self.on_report = on_report
        if retriever is None and isinstance(store, TurnSearchStore):
            retriever = LexicalRetriever(store)
        self.retriever = retriever
        self._updater = (
            None
            if llm is None
            else SummaryUpdater(
                store=store,
                models=models,
                lease_seconds=update_lease_seconds,
                summarizer=Summarizer(
                    llm=GuardedClient(llm, guard=guard),
                    templates=templates,
                    structured_output=structured_output,
                ),
            )
        )

    async def load(
        self,
        *,
        tenant_id: str,
        thread_id: str,
        model: ModelInfo,
        profile: Profile,
        budget_tokens: int,
        recall_query: str | None = None,
        pending: Sequence[MessageIn] = (),
        known: KnownThread | None = None,
        file_bytes: int | None = None,
    ) -> WorkingMemoryLoad:
        """The history part of one model request: the window and the notes.

        `recall_query`: more words for recall to search for besides the newest user turn's
        (the query rewriter's, `recall_rewrite`); ignored when recall is off.

        `pending`: messages the request sends after the stored thread that are not stored yet
        (a framework that stores a run's input after the model call). The window ends with
        them, as if they were the thread's newest turns: they count within its share, and with
        a user turn among them they are the current exchange, which recall searches for and
        which older stored units make room for. The load's `messages`, `seqs` and `tokens`
        are the stored turns' alone; the caller sends the pending ones itself.

        `known`: the thread's newest turns as the caller holds them under its ask lock (the
        gateway's ask): the window is chosen from them, and older turns are read only when it
        needs more (none when they came from a read as large as `first_read`'s). Ignored when
        they are counted with another tokenizer than the model's.

        `file_bytes`: the most base64 of inline files (images, PDFs, recordings) the window's
        messages hold, walking back from the newest, whose own files always stay (the
        gateway's `max_inline_file_bytes`): an older message's files past it are named where
        they stood (``[image, attached earlier]``; `WorkingMemoryLoad.named_files`), and the
        store does not read them. None: every file of the window.

        Raises:
            ValidationError: a budget that is not a positive integer, or a wrong argument type.
            NotFoundError: no such thread for this tenant (with `pending`, once they fit).
            ContextOverflowError: the current exchange alone does not fit the history share.
        """
        _check_budget(budget_tokens)
        if not isinstance(model, ModelInfo):
            raise ValidationError("model", "must be a ModelInfo")
        if not isinstance(profile, Profile):
            raise ValidationError("profile", "must be a Profile")
        config = profile.resolve(self.config)
        tokenizer = tokenizer_for(model)
        new = _pending_messages(pending)
        if known is not None and known.tokenizer_key != tokenizer.key:
            known = None
        if not config.enabled:
            window, tokens, total, _ = await read_window(
                self.store,
                tenant_id,
                thread_id,
                tokenizer,
                limit=None,
                reach=DISABLED_WINDOW_TURNS,
                pending=new,
                known=known,
                file_bytes=file_bytes,
            )
            stored, tokens = _stored_part(window, tokens, total)
            return _loaded(stored, tokens, total, notes="", strategy=None)
        history = _history_share(config, budget_tokens)
        if self.retriever is not None and config.recall_ratio > 0:
            try:
                return await self._load(
                    tenant_id,
                    thread_id,
                    tokenizer,
                    config,
                    history,
                    recall=True,
                    query=recall_query,
                    pending=new,
                    known=known,
                    file_bytes=file_bytes,
                )
            except ContextOverflowError:
                pass  # the current exchange needs recall's share too: it goes first
        return await self._load(
            tenant_id,
            thread_id,
            tokenizer,
            config,
            history,
            recall=False,
            pending=new,
            known=known,
            file_bytes=file_bytes,
        )

    def first_read(
        self, *, model: ModelInfo, profile: Profile, budget_tokens: int
    ) -> tuple[int, int | None]:
        """What `load` reads of the thread first for a budget of at most `budget_tokens`: at
        most this many turns, through the newest that pass this many tokens (None: no token
        goal), so that a caller who reads the thread anyway (the gateway's ask lock) can read
        that and hand it over (`known`)."""
        config = profile.resolve(self.config)
        if not config.enabled:
            return first_batch(None, DISABLED_WINDOW_TURNS), None
        history = _history_share(config, budget_tokens)
        return first_batch(history, _reach(config)), history

    async def _load(
        self,
        tenant_id: str,
        thread_id: str,
        tokenizer: Tokenizer,
        config: WorkingMemoryConfig,
        history: int,
        *,
        recall: bool,
        query: str | None = None,
        pending: Sequence[ChatMessage] = (),
        known: KnownThread | None = None,
        file_bytes: int | None = None,
    ) -> WorkingMemoryLoad:
        """One strategy's load within `history` tokens; with `recall`, the window leaves
        `recall_ratio` of them to the turns recalled from before it, which also take what
        the window leaves unused."""
        limit = history - math.floor(config.recall_ratio * history) if recall else history
        summary = config.strategy is Strategy.SUMMARY_BUFFER
        window, tokens, total, state = await read_window(
            self.store,
            tenant_id,
            thread_id,
            tokenizer,
            limit=limit,
            reach=_reach(config),
            step=0 if summary else math.floor(config.window_step_ratio * limit),
            pending=pending,
            known=known,
            file_bytes=file_bytes,
        )
        notes = ""
        if summary:
            if state is None:  # a store that reads it apart
                state = await self.store.get_memory_state(tenant_id=tenant_id, thread_id=thread_id)
            notes = render_notes(state)
        recalled = Recalled()
        stored, stored_tokens = _stored_part(window, tokens, total)
        if recall and window:
            recalled = await recall_before(
                self.store,
                self.retriever,
                tenant_id,
                thread_id,
                tokenizer,
                window,
                stored,
                history - tokens,
                query,
            )
        return _loaded(
            stored,
            stored_tokens,
            total,
            notes="\n\n".join(part for part in (notes, recalled.text) if part),
            strategy=config.strategy or Strategy.SUMMARY_BUFFER,
            covered_turns=state.turn_count if summary and state is not None else None,
            recalled=recalled,
        )

    async def save_context(
        self,
        *,
        tenant_id: str,
        thread_id: str,
        user_id: str | None,
        profile: Profile,
        cheap_model_id: str,
        meta: CallMeta | None = None,
        request: Sequence[MessageIn] | None = None,
        result: Completion | None = None,
    ) -> None:
        """Learns from one answered call (R7-R10); never raises (R9).

        Under SUMMARY_BUFFER, rewrites the summary + facts when `update_every_turns` turns are
        due since the state's turn count, reading the new turns from the store (`request` and
        `result` are not needed: a human-edited answer is already stored). SLIDING_WINDOW and
        switched-off memory store nothing (R2, R5). The outcome goes to `on_report` and the log.
        """
        await self.update_summary(
            tenant_id=tenant_id,
            thread_id=thread_id,
            user_id=user_id,
            profile=profile,
            cheap_model_id=cheap_model_id,
            meta=meta,
        )

    async def update_summary(
        self,
        *,
        tenant_id: str,
        thread_id: str,
        user_id: str | None,
        profile: Profile,
        cheap_model_id: str,
        meta: CallMeta | None = None,
    ) -> UpdateReport:
        """`save_context`'s work, returning its report instead of only reporting it."""
        try:
            config = profile.resolve(self.config)
            if not config.enabled or config.strategy is Strategy.SLIDING_WINDOW:
                report = UpdateReport(
                    tenant_id, thread_id, UpdateOutcome.SKIPPED, "not SUMMARY_BUFFER"
                )
            elif self._updater is None:
                report = UpdateReport(tenant_id, thread_id, UpdateOutcome.SKIPPED, "no LLM client")
            else:
                report = await self._updater.run(
                    tenant_id=tenant_id,
                    thread_id=thread_id,
                    user_id=user_id,
                    config=config,
                    cheap_model_id=cheap_model_id,
                    meta=meta if isinstance(meta, CallMeta) else None,
                )
        except NotFoundError:  # deleted while the update waited its turn: nothing to write
            report = UpdateReport(
                tenant_id, thread_id, UpdateOutcome.SKIPPED, "no such thread (deleted meanwhile?)"
            )
        except Exception as exc:
            logger.exception("summary update of thread %r failed", thread_id)
            report = UpdateReport(tenant_id, thread_id, UpdateOutcome.FAILED, repr(exc))
        self._report(report)
        return report

    def _report(self, report: UpdateReport) -> None:
        level = logging.INFO if report.outcome in _QUIET else logging.WARNING
        logger.log(
            level,
            "summary update %s: tenant=%s thread=%s calls=%d %s",
            report.outcome.value,
            report.tenant_id,
            report.thread_id,
            report.helper_calls,
            report.detail,
        )
        if self.on_report is not None:
            try:
                self.on_report(report)
            except Exception:
                logger.exception("on_report raised")

    async def get_state(self, *, tenant_id: str, thread_id: str) -> WorkingMemoryState:
        """The stored summary, facts and turn count; the empty state when never written (R12)."""
        return await self.store.get_memory_state(tenant_id=tenant_id, thread_id=thread_id)

    async def reset(self, *, tenant_id: str, thread_id: str) -> None:
        """Forgets the summary and facts and marks the turns so far as seen (R14).

        The thread and its turns stay. The earlier versions of the summary are purged in the
        same transaction: what was forgotten cannot come back through the history or a
        rollback.
        """
        for _ in range(_RESET_ATTEMPTS):
            thread = await self.store.get_thread(tenant_id=tenant_id, thread_id=thread_id)
            state = await self.store.get_memory_state(tenant_id=tenant_id, thread_id=thread_id)
            write = StateWrite(
                expected_version=state.version,
                summary="",
                facts=(),
                turn_count=max(thread.turn_count, state.turn_count),
                reason="reset",
            )
            try:
                await self.store.write_memory_state(
                    tenant_id=tenant_id, thread_id=thread_id, write=write
                )
                return
            except ConflictError:
                continue
        raise ConflictError(f"thread {thread_id!r}: reset kept losing to concurrent updates")

    async def history(
        self, *, tenant_id: str, thread_id: str, limit: int = 20
    ) -> list[WorkingMemoryState]:
        """The state's versions, newest first: every update, reset and rollback."""
        return await self.store.list_memory_states(
            tenant_id=tenant_id, thread_id=thread_id, limit=limit
        )

    async def rollback(self, *, tenant_id: str, thread_id: str, version: int) -> WorkingMemoryState:
        """Restores an earlier version as a new one, turn count included.

        The turns after the restored turn count become due again, so the next update re-reads
        them from the good summary instead of the wrong one. `NotFoundError` for a version
        the thread never had; `ConflictError` if the state changed meanwhile.
        """
        state = await self.store.get_memory_state(tenant_id=tenant_id, thread_id=thread_id)
        versions = await self.store.list_memory_states(
            tenant_id=tenant_id, thread_id=thread_id, limit=1_000
        )
        target = next((v for v in versions if v.version == version), None)
        if target is None:
            raise NotFoundError("memory state version", str(version))
        return await self.store.write_memory_state(
            tenant_id=tenant_id,
            thread_id=thread_id,
            write=StateWrite(
                expected_version=state.version,
                summary=target.summary,
                facts=target.facts,
                turn_count=target.turn_count,
                reason="rollback",
            ),
        )


def _check_budget(budget_tokens: object) -> None:
    if isinstance(budget_tokens, bool) or not isinstance(budget_tokens, int):
        raise ValidationError(
            "budget_tokens", f"must be an integer, got {type(budget_tokens).__name__}"
        )
    if budget_tokens <= 0:
        raise ValidationError("budget_tokens", f"must be positive, got {budget_tokens}")


def _history_share(config: WorkingMemoryConfig, budget_tokens: int) -> int:
    """The tokens of the budget the history may take (R16's budget, `chat_history_ratio`)."""
    return math.floor(config.chat_history_ratio * budget_tokens)


def _reach(config: WorkingMemoryConfig) -> int | None:
    """The newest turns a strategy's window takes whatever their tokens: SUMMARY_BUFFER's
    `recent_turns` (None: the tokens alone decide)."""
    return config.recent_turns if config.strategy is Strategy.SUMMARY_BUFFER else None


def _pending_messages(pending: Sequence[MessageIn]) -> list[ChatMessage]:
    """The pending messages, validated and in their canonical form (as they will be stored,
    and so counted)."""
    if not pending:
        return []
    return cast(list[ChatMessage], normalize_messages(pending, "pending"))


def _stored_part(
    window: list[CountedTurn], tokens: int, total: int
) -> tuple[list[CountedTurn], int]:
    """The window's stored turns (those numbered within the thread's `total`) and their
    tokens, reply overhead included (0 for none)."""
    if not window or window[-1].seq <= total:  # no pending turn: the load's usual case
        return window, tokens
    stored = [turn for turn in window if turn.seq <= total]
    if not stored:
        return [], 0
    return stored, tokens - sum(turn.tokens for turn in window[len(stored) :])


def _loaded(
    window: list[CountedTurn],
    tokens: int,
    total: int,
    *,
    notes: str,
    strategy: Strategy | None,
    covered_turns: int | None = None,
    recalled: Recalled | None = None,
) -> WorkingMemoryLoad:
    return WorkingMemoryLoad(
        messages=[turn.sent for turn in window],
        notes=notes,
        tokens=tokens,
        strategy=strategy,
        dropped_turns=total - len(window),
        message_tokens=tuple(turn.tokens for turn in window),
        seqs=tuple(turn.seq for turn in window),
        named_files=tuple(turn.seq for turn in window if turn.held),
        covered_turns=covered_turns,
        recalled_seqs=recalled.seqs if recalled else (),
        recalled_tokens=recalled.tokens if recalled else 0,
    )
