"""Server-side compaction of the Responses API (``context_management``).

    threshold = compact_threshold(body.context_management, plan.model)
    if is_due(threshold, result, sent, instructions, plan.model):
        item = await compaction_after(gateway, tenant_id=..., thread_id=..., through=answer.seq)

A client that resends its history (the OpenAI Agents SDK's compaction capability, LangChain's
``ChatOpenAI(context_management=...)``) asks for a ``compaction`` item once what it sends
grows past a threshold, and sends that item in place of everything before it from then on
(OpenAI's guide). The gateway's memory already bounds what the model reads; the item bounds
what the client resends, which otherwise grows without end, until the request is refused.

The item is the gateway's own (`workingmem.formats.compaction`), made by `Gateway.compact`
from the thread through the answer, and comes last in the response's output: it stands for
the whole exchange, so a history resent from it continues the thread after the answer
(`workingmem.compaction.restored`). The count is of what the client sent from its newest
compaction item on, its instructions and the answer: what its next request repeats. A request
that continues a response or a conversation resends nothing and is never over.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from ..compaction import newest_compaction
from ..config import Profile
from ..errors import WorkingMemoryError
from ..gateway import AskResult, Gateway
from ..tokens import tokenizer_for
from ..types import ModelInfo, NativeItem
from .compacted_response import item_of
from .responses_schemas import ContextManagement

__all__ = ["DEFAULT_SHARE", "compact_threshold", "compaction_after", "is_due"]

DEFAULT_SHARE = 0.8
"""An entry without ``compact_threshold``: this share of the answering model's window."""

logger = logging.getLogger("workingmem.service")


def compact_threshold(entries: Sequence[ContextManagement] | None, model: ModelInfo) -> int | None:
    """The lowest threshold the request's compaction entries ask for; None without one."""
    default = int(model.context_window * DEFAULT_SHARE)
    return min((entry.compact_threshold or default for entry in entries or ()), default=None)


def is_due(
    threshold: int | None,
    result: AskResult,
    sent: Sequence[NativeItem],
    instructions: str | None,
    model: ModelInfo,
) -> bool:
    """Whether the answer ends with a compaction item: asked for, the exchange over (an
    answer that calls the client's tools goes on), and what the client's next request repeats
    past the threshold: its input (`sent`, less its instructions) from its newest compaction
    item on, the item counted as the text a model reads for it; its instructions; the answer."""
    if threshold is None or result.finish_reason == "tool_calls":
        return False
    tokenizer = tokenizer_for(model)  # the answering model's: what the client resends to it
    start = newest_compaction(sent) or 0
    total = sum(tokenizer.count_message(turn.message) for turn in sent[start:])
    total += tokenizer.count_message(result.turns[-1].to_message())
    total += tokenizer.count_text(instructions) if instructions else 0
    return total > threshold


async def compaction_after(
    gateway: Gateway,
    *,
    tenant_id: str,
    thread_id: str,
    through: int,
    user_id: str | None,
    profile: Profile | str | None,
    model: str | None,
) -> dict[str, Any] | None:
    """The compaction item of the thread through the answer (`through`), or None when the
    cheap model failed: the answer stands, and the next request over the threshold asks
    again."""
    try:
        compaction = await gateway.compact(
            tenant_id=tenant_id,
            thread_id=thread_id,
            through_seq=through,
            user_id=user_id,
            profile=profile,
            model=model,
        )
    except WorkingMemoryError as exc:
        logger.warning("server-side compaction of thread %s failed: %s", thread_id, exc)
        return None
    return item_of(compaction)  # of the thread's turns alone: it names the thread
