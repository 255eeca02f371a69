"""SUMMARY_BUFFER's background update: due or not, single flight, chunked, compare-and-set.

    updater = SummaryUpdater(store=store, summarizer=Summarizer(llm=client))
    report = await updater.run(tenant_id="t1", thread_id="th1", user_id="u1", config=config,
                               cheap_model_id="gpt-4o-mini")

The state tells what is due: the turns after its `turn_count`. So a crash between turns loses
nothing (the next run catches up), and the input is bounded whatever the thread's length: the
old summary, the old facts and only the new turns, folded in chunks of at most
`helper_input_max_tokens` tokens when many are due, oldest first, each chunk's result stored
before the next is read (R7). One updater per thread at a time, across processes (a lease in
the store); each write is a compare-and-set on the state's version, so a reset that lands
mid-update wins and the update is dropped (R14).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Mapping
from dataclasses import replace

from .config import WorkingMemoryConfig
from .errors import ConflictError, NotFoundError
from .leases import keep_renewed
from .llm import CallKind, CallMeta, LLMError, UsageRefusedError
from .stores.base import StateWrite, ThreadStore
from .strategies import update_due
from .summarizer import Caps, InvalidOutputError, Summarizer, input_cost
from .tokens import Tokenizer, tokenizer_for
from .types import ModelInfo, Turn, UpdateOutcome, UpdateReport

__all__ = ["SummaryUpdater"]

logger = logging.getLogger("workingmem.updater")

_PAGE = 500


class SummaryUpdater:
    """Runs one due update of a thread's summary + facts; never raises into the caller."""

    def __init__(
        self,
        *,
        store: ThreadStore,
        summarizer: Summarizer,
        lease_seconds: float = 30.0,
        models: Mapping[str, ModelInfo] | None = None,
    ) -> None:
        self.store = store
        self.summarizer = summarizer
        self.lease_seconds = lease_seconds
        self.models = dict(models or {})
        """The helper models by id: a configured tokenizer cuts the chunks it reads."""

    async def run(
        self,
        *,
        tenant_id: str,
        thread_id: str,
        user_id: str | None,
        config: WorkingMemoryConfig,
        cheap_model_id: str,
        meta: CallMeta | None = None,
    ) -> UpdateReport:
        """Updates the state if due. Every failure is a report, never an exception."""
        base = meta or CallMeta(
            tenant_id=tenant_id, kind=CallKind.MEMORY_WORKING, model=cheap_model_id
        )
        call_meta = replace(
            base,
            kind=CallKind.MEMORY_WORKING,
            model=cheap_model_id,
            thread_id=thread_id,
            user_id=user_id if user_id is not None else base.user_id,
        )
        if not await self._due(tenant_id, thread_id, config):
            return UpdateReport(tenant_id, thread_id, UpdateOutcome.NOT_DUE, "nothing due")
        owner = uuid.uuid4().hex
        claimed = await self.store.claim_memory_update(
            tenant_id=tenant_id, thread_id=thread_id, owner=owner, ttl_seconds=self.lease_seconds
        )
        if not claimed:
            return UpdateReport(tenant_id, thread_id, UpdateOutcome.BUSY, "another updater runs")
        renewing = asyncio.create_task(
            keep_renewed(
                lambda: self.store.renew_memory_update(
                    tenant_id=tenant_id,
                    thread_id=thread_id,
                    owner=owner,
                    ttl_seconds=self.lease_seconds,
                ),
                seconds=self.lease_seconds,
                what=f"update lease of thread {thread_id!r}",
            )
        )
        try:
            return await self._run_claimed(tenant_id, thread_id, config, call_meta)
        finally:
            renewing.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await renewing
            with contextlib.suppress(NotFoundError):  # the thread was deleted: the lease too
                await self.store.release_memory_update(
                    tenant_id=tenant_id, thread_id=thread_id, owner=owner
                )

    async def _due(self, tenant_id: str, thread_id: str, config: WorkingMemoryConfig) -> bool:
        """A read-only look first: most calls find nothing due and need no lease (a write)."""
        state = await self.store.get_memory_state(tenant_id=tenant_id, thread_id=thread_id)
        thread = await self.store.get_thread(tenant_id=tenant_id, thread_id=thread_id)
        return update_due(
            turn_count=thread.turn_count,
            covered_turns=state.turn_count,
            every=config.update_every_turns,
        )

    async def _run_claimed(
        self, tenant_id: str, thread_id: str, config: WorkingMemoryConfig, meta: CallMeta
    ) -> UpdateReport:
        state = await self.store.get_memory_state(tenant_id=tenant_id, thread_id=thread_id)
        thread = await self.store.get_thread(tenant_id=tenant_id, thread_id=thread_id)
        if not update_due(
            turn_count=thread.turn_count,
            covered_turns=state.turn_count,
            every=config.update_every_turns,
        ):
            new = thread.turn_count - state.turn_count
            return UpdateReport(tenant_id, thread_id, UpdateOutcome.NOT_DUE, f"{new} new turns")

        caps = Caps.of(config)
        tokenizer = tokenizer_for(
            self.models.get(meta.model) or ModelInfo(id=meta.model, context_window=1_000_000)
        )
        summary, facts, version = state.summary, tuple(state.facts), state.version
        calls = prompt_tokens = completion_tokens = 0
        stalled: list[str] = []
        notes: list[str] = []
        after = state.turn_count
        while after < thread.turn_count:
            chunk = await self._chunk(
                tenant_id,
                thread_id,
                after,
                thread.turn_count,
                tokenizer,
                config.helper_input_max_tokens,
            )
            outcome, detail = UpdateOutcome.UPDATED, ""
            try:
                calls += 1
                result = await self.summarizer.update(
                    summary=summary, facts=facts, turns=chunk, caps=caps, meta=meta
                )
            except UsageRefusedError as exc:
                calls -= 1
                outcome, detail = UpdateOutcome.REFUSED, str(exc)
            except InvalidOutputError as exc:
                outcome, detail = UpdateOutcome.INVALID_OUTPUT, str(exc)
            except LLMError as exc:
                outcome, detail = UpdateOutcome.UPSTREAM_ERROR, str(exc)
            if outcome is not UpdateOutcome.UPDATED:
                return UpdateReport(
                    tenant_id,
                    thread_id,
                    outcome,
                    detail,
                    calls,
                    prompt_tokens,
                    completion_tokens,
                )
            prompt_tokens += result.usage.prompt_tokens
            completion_tokens += result.usage.completion_tokens
            covered = chunk[-1].seq or after
            try:
                written = await self.store.write_memory_state(
                    tenant_id=tenant_id,
                    thread_id=thread_id,
                    write=StateWrite(
                        expected_version=version,
                        summary=result.summary,
                        facts=result.facts,
                        turn_count=covered,
                        reason="update",
                    ),
                )
            except ConflictError as exc:
                return UpdateReport(
                    tenant_id,
                    thread_id,
                    UpdateOutcome.CONFLICT,
                    str(exc),
                    calls,
                    prompt_tokens,
                    completion_tokens,
                )
            if result.stalled:
                stalled.append(f"{chunk[0].seq}-{covered}")
            notes.extend(note for note in result.notes if note not in notes)
            summary, facts, version, after = result.summary, result.facts, written.version, covered
        if stalled:
            notes.insert(0, f"the summary did not change over turns {', '.join(stalled)}")
        return UpdateReport(
            tenant_id,
            thread_id,
            UpdateOutcome.STALLED if stalled else UpdateOutcome.UPDATED,
            "; ".join(notes),
            calls,
            prompt_tokens,
            completion_tokens,
            turn_count=after,
        )

    async def _chunk(
        self,
        tenant_id: str,
        thread_id: str,
        after: int,
        upto: int,
        tokenizer: Tokenizer,
        max_tokens: int,
    ) -> list[Turn]:
        """The oldest due turns whose rendering fits `max_tokens` (at least one turn)."""
        chunk: list[Turn] = []
        used = 0
        while after < upto:
            page = await self.store.list_turns(
                tenant_id=tenant_id,
                thread_id=thread_id,
                after_seq=after,
                limit=min(_PAGE, upto - after),
            )
            if not page:
                break
            for turn in page:
                cost = input_cost(turn, tokenizer)
                if chunk and used + cost > max_tokens:
                    return chunk
                chunk.append(turn)
                used += cost
            after = page[-1].seq or upto
        return chunk
