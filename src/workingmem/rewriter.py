"""QueryRewriter: a standalone search query for a knowledge base (R19).

    rewriter = QueryRewriter(llm=client, store=store)
    query = await rewriter.rewrite(tenant_id="t1", thread_id="th1", user_id="u1",
                                   profile=profile, cheap_model_id="gpt-4o-mini")

"Is it vegetarian?" means nothing to a search index; with the thread's facts ("looking for a
restaurant in Lyon"), the cheap model writes "vegetarian restaurants in Lyon". The facts are
SUMMARY_BUFFER's: without them (SLIDING_WINDOW, a new thread, a reset) the user's own text is
returned unchanged and no model is called. A failed rewrite also returns the user's text: a
search with the raw question beats no search.
"""

from __future__ import annotations

import logging

from .config import Profile, WorkingMemoryConfig
from .llm import CallKind, CallMeta, LLMClient, LLMError, UsageRefusedError
from .prompts import PromptKind, PromptTemplates
from .stores.base import ThreadStore
from .summarizer import render_facts
from .types import Strategy, Turn

__all__ = ["QueryRewriter"]

logger = logging.getLogger("workingmem.rewriter")

_MAX_QUERY_CHARS = 1_000
_SCAN = 50


class QueryRewriter:
    """Rewrites the latest user turn into a standalone query, using the thread's facts."""

    def __init__(
        self,
        *,
        llm: LLMClient,
        store: ThreadStore,
        templates: PromptTemplates | None = None,
        config: WorkingMemoryConfig | None = None,
    ) -> None:
        self.llm = llm
        self.store = store
        self.templates = templates or PromptTemplates()
        self.config = config or WorkingMemoryConfig()

    async def rewrite(
        self,
        *,
        tenant_id: str,
        thread_id: str,
        user_id: str | None,
        profile: Profile,
        cheap_model_id: str,
    ) -> str:
        """The query; the latest user turn's text unchanged when there are no facts.

        `NotFoundError` for an unknown thread or another tenant's; "" for a thread with no
        user turn yet.
        """
        question = await self._latest_user_text(tenant_id, thread_id)
        config = profile.resolve(self.config)
        if not question or not config.enabled or config.strategy is not Strategy.SUMMARY_BUFFER:
            return question
        state = await self.store.get_memory_state(tenant_id=tenant_id, thread_id=thread_id)
        if not state.facts:
            return question
        prompt = self.templates.render(
            PromptKind.QUERY_REWRITE,
            tenant_id=tenant_id,
            facts=render_facts(state.facts),
            question=question,
        )
        meta = CallMeta(
            tenant_id=tenant_id,
            kind=CallKind.QUERY_REWRITE,
            model=cheap_model_id,
            thread_id=thread_id,
            user_id=user_id,
        )
        try:
            completion = await self.llm.complete(
                model=cheap_model_id,
                messages=[{"role": "user", "content": prompt}],
                meta=meta,
                max_tokens=200,
                temperature=0.0,
            )
        except (LLMError, UsageRefusedError) as exc:
            logger.warning("query rewrite failed for thread %r: %s", thread_id, exc)
            return question
        query = completion.text.strip().strip('"').strip()
        if not query or len(query) > _MAX_QUERY_CHARS:
            return question
        return query

    async def _latest_user_text(self, tenant_id: str, thread_id: str) -> str:
        thread = await self.store.get_thread(tenant_id=tenant_id, thread_id=thread_id)
        turns = await self.store.list_turns(
            tenant_id=tenant_id,
            thread_id=thread_id,
            after_seq=max(0, thread.turn_count - _SCAN),
            limit=_SCAN,
        )
        for turn in reversed(turns):
            if turn.role == "user":
                return _text(turn)
        return ""


def _text(turn: Turn) -> str:
    if isinstance(turn.content, str):
        return turn.content
    return " ".join(p["text"] for p in turn.content or () if p.get("type") == "text")
