"""ContextAssembler: one model request under the model's window (R16, R17).

    assembler = ContextAssembler(memory=memory, agent_memory=agent_memory)
    context = await assembler.build(tenant_id="t1", thread_id="th1", user_id="u1",
                                    profile=profile, model=ModelInfo(id="gpt-4o",
                                    context_window=128_000))
    context.messages   # system first, then the history; fits the window with the reserve

The system prompt is the profile's template with its ``{memory}`` slot filled by the agent's
working-memory instruction block and, under "About this conversation", the notes of
`WorkingMemory.load` (no such section without notes). A template without the slot gets the
memory appended, so a host's prompt never silently drops it.

`budget_tokens` = context window - the rendered system prompt - the tool definitions - the
output reserve (R16). The notes are only known after `load`, so they are added after it; if
the request is then over the window, the history is trimmed oldest unit first, with a
`turns_trimmed` warning (R17). The same trimming applies to a host's own WorkingMemory that
returns more than the budget, or a window that is not provider-valid (orphaned tool results,
calls without their results are dropped, the window opens on a user turn).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from .agent_memory import AgentMemory
from .config import Profile
from .errors import ContextOverflowError
from .memory import KnownThread, WorkingMemory, WorkingMemoryProtocol
from .strategies import select_window
from .tokens import Tokenizer, tokenizer_for
from .types import ChatMessage, CountedTurn, MessageIn, ModelInfo, SystemMessage, WorkingMemoryLoad

__all__ = [
    "DEFAULT_SYSTEM_PROMPT",
    "MEMORY_SLOT",
    "AssembledContext",
    "AssemblyWarning",
    "ContextAssembler",
    "output_reserve",
    "render_memory_slot",
]

MEMORY_SLOT = "{memory}"
DEFAULT_SYSTEM_PROMPT = "You are a helpful assistant.\n\n{memory}"
NOTES_HEADING = "## About this conversation"


@dataclass(frozen=True, slots=True)
class AssemblyWarning:
    """Something the assembler had to do that the host should know about."""

    code: str
    """``turns_trimmed``: history over the budget was dropped, oldest unit first."""
    detail: str
    count: int = 0


@dataclass(frozen=True, slots=True)
class AssembledContext:
    """The request for one model call, and what each part cost."""

    messages: list[ChatMessage]
    """System prompt first, then the history, the current user turn last."""
    tokens: int
    """The messages' tokens with the model's tokenizer (chat overhead included)."""
    budget_tokens: int
    """What was left for the history after the system prompt, tools and output reserve."""
    parts: dict[str, int]
    """Tokens per part: ``system``, ``working_memory``, ``notes``, ``history``, ``tools``."""
    warnings: list[AssemblyWarning] = field(default_factory=list)
    loaded: WorkingMemoryLoad | None = None
    """What `WorkingMemory.load` returned, before any trimming."""


def render_memory_slot(instructions: str, notes: str) -> str:
    """The text of the ``{memory}`` slot: the working-memory block, then the notes."""
    parts = [instructions.strip()] if instructions.strip() else []
    if notes.strip():
        parts.append(f"{NOTES_HEADING}\n{notes.strip()}")
    return "\n\n".join(parts)


def _render_system(template: str, memory: str) -> str:
    if MEMORY_SLOT in template:
        return template.replace(MEMORY_SLOT, memory).strip()
    return f"{template.rstrip()}\n\n{memory}".strip() if memory else template.strip()


def output_reserve(override: int | None, profile: Profile, model: ModelInfo) -> int:
    """The tokens a request keeps for its answer: the call's own, else the profile's, else the
    model's `max_output_tokens`."""
    return override or profile.output_reserve_tokens or model.max_output_tokens


class ContextAssembler:
    """Builds the model request: system prompt, memory, history, under the window."""

    def __init__(
        self, *, memory: WorkingMemoryProtocol, agent_memory: AgentMemory | None = None
    ) -> None:
        self.memory = memory
        self.agent_memory = agent_memory

    async def build(
        self,
        *,
        tenant_id: str,
        thread_id: str,
        user_id: str | None,
        profile: Profile,
        model: ModelInfo,
        system_prompt: str | None = None,
        tools: Sequence[dict[str, Any]] = (),
        output_reserve_tokens: int | None = None,
        recall_query: str | None = None,
        known: KnownThread | None = None,
        file_bytes: int | None = None,
        memory_tools: bool = True,
    ) -> AssembledContext:
        """Assembles the request; `ContextOverflowError` when even the current turn cannot fit.

        Args:
            system_prompt: overrides the profile's template for this call.
            tools: the tool definitions the call sends (their tokens count against the window).
            output_reserve_tokens: tokens kept for the answer; the profile's, else the model's
                `max_output_tokens`.
            recall_query: more words for the built-in memory's recall (`WorkingMemory.load`);
                a host's own memory is not given them.
            known: the thread's newest turns as the caller holds them under its ask lock,
                for the built-in memory to choose the window from, reading only older turns
                it still needs (`WorkingMemory.load`); a host's own memory is not given it.
            file_bytes: the most base64 of inline files the window holds, the newest first
                (`WorkingMemory.load`); a host's own memory is not given it.
            memory_tools: whether the model can be offered the agent-memory tools; False (a
                model that takes no tools) shows the working memory read-only.
        """
        tokenizer = tokenizer_for(model)
        template = system_prompt or profile.system_prompt or DEFAULT_SYSTEM_PROMPT
        instructions = await self._instructions(tenant_id, thread_id, user_id, memory_tools)
        reserve = output_reserve(output_reserve_tokens, profile, model)
        tools_tokens = tokenizer.count_text(json.dumps(list(tools))) if tools else 0

        bare = _render_system(template, render_memory_slot(instructions, ""))
        system_tokens = tokenizer.count_message(_system_message(bare))
        budget = model.context_window - system_tokens - tools_tokens - reserve
        if budget <= 0:
            raise ContextOverflowError(
                system_tokens + tools_tokens + reserve,
                model.context_window,
                "the system prompt, tools and output reserve alone fill the window",
            )
        load = self.memory.load
        if isinstance(self.memory, WorkingMemory):
            load = functools.partial(
                self.memory.load,
                recall_query=recall_query or None,
                known=known,
                file_bytes=file_bytes,
            )
        loaded = await load(
            tenant_id=tenant_id,
            thread_id=thread_id,
            model=model,
            profile=profile,
            budget_tokens=budget,
        )
        if loaded.notes:
            slot = render_memory_slot(instructions, loaded.notes)
            system = _system_message(_render_system(template, slot))
            full_system_tokens = tokenizer.count_message(system)
        else:  # the system message the budget was taken from, counted already
            system, full_system_tokens = _system_message(bare), system_tokens
        history_limit = model.context_window - full_system_tokens - tools_tokens - reserve
        history, history_tokens, dropped = _fit(
            loaded.messages, loaded.message_tokens, tokenizer, history_limit
        )
        warnings = []
        if dropped:
            warnings.append(
                AssemblyWarning(
                    "turns_trimmed",
                    f"{dropped} turns over the budget of {history_limit} tokens were left out",
                    dropped,
                )
            )
        messages = [system, *history]
        notes_tokens = tokenizer.count_text(loaded.notes) if loaded.notes else 0
        instructions_tokens = tokenizer.count_text(instructions) if instructions else 0
        return AssembledContext(
            messages=messages,
            tokens=full_system_tokens + history_tokens + tokenizer.reply_overhead,
            budget_tokens=budget,
            parts={
                "system": full_system_tokens - notes_tokens - instructions_tokens,
                "working_memory": instructions_tokens,
                "notes": notes_tokens,
                "history": history_tokens,
                "tools": tools_tokens,
            },
            warnings=warnings,
            loaded=loaded,
        )

    async def opening(
        self,
        *,
        tenant_id: str,
        thread_id: str,
        user_id: str | None,
        profile: Profile,
        model: ModelInfo,
        system_prompt: str | None = None,
        output_reserve_tokens: int | None = None,
        tools: Sequence[dict[str, Any]] = (),
        memory_tools: bool = True,
    ) -> AssembledContext:
        """What a request of a thread that has no turns yet starts with: the system prompt
        with the agent memory (no notes: nothing was said), and the tools' cost."""
        tokenizer = tokenizer_for(model)
        template = system_prompt or profile.system_prompt or DEFAULT_SYSTEM_PROMPT
        instructions = await self._instructions(tenant_id, thread_id, user_id, memory_tools)
        system = _system_message(_render_system(template, render_memory_slot(instructions, "")))
        tokens = tokenizer.count_message(system)
        tools_tokens = tokenizer.count_text(json.dumps(list(tools))) if tools else 0
        reserve = output_reserve(output_reserve_tokens, profile, model)
        return AssembledContext(
            messages=[system],
            tokens=tokens + tokenizer.reply_overhead,
            budget_tokens=model.context_window - tokens - tools_tokens - reserve,
            parts={"system": tokens, "history": 0, "tools": tools_tokens},
        )

    async def pass_through(
        self,
        *,
        tenant_id: str,
        thread_id: str,
        user_id: str | None,
        profile: Profile,
        model: ModelInfo,
        messages: Sequence[MessageIn],
        with_memory: bool = False,
        tools: Sequence[dict[str, Any]] = (),
        output_reserve_tokens: int | None = None,
        memory_tools: bool = True,
    ) -> AssembledContext:
        """The client's own messages as the request (a profile's ``history="client"``), as
        they were sent: nothing dropped, nothing reordered. `with_memory` adds the memory slot
        (the agent memory, the notes) to their system message, or puts one first."""
        tokenizer = tokenizer_for(model)
        sent = [cast(ChatMessage, dict(m)) for m in messages]
        loaded = None
        if with_memory:
            instructions = await self._instructions(tenant_id, thread_id, user_id, memory_tools)
            loaded = await self.memory.load(
                tenant_id=tenant_id,
                thread_id=thread_id,
                model=model,
                profile=profile,
                budget_tokens=model.context_window,
            )
            slot = render_memory_slot(instructions, loaded.notes)
            first = sent[0] if sent else None
            if slot and first is not None and first["role"] in ("system", "developer"):
                sent[0] = cast(
                    ChatMessage, {**first, "content": _ended_with(first["content"], slot)}
                )
            elif slot:
                sent.insert(0, _system_message(slot))
        tokens = sum(tokenizer.count_message(m) for m in sent) + tokenizer.reply_overhead
        tools_tokens = tokenizer.count_text(json.dumps(list(tools))) if tools else 0
        reserve = output_reserve(output_reserve_tokens, profile, model)
        return AssembledContext(
            messages=sent,
            tokens=tokens,
            budget_tokens=model.context_window - tools_tokens - reserve,
            parts={"history": tokens, "tools": tools_tokens},
            loaded=loaded,
        )

    async def _instructions(
        self, tenant_id: str, thread_id: str, user_id: str | None, editable: bool
    ) -> str:
        if self.agent_memory is None or not self.agent_memory.config.enabled:
            return ""
        return await self.agent_memory.get_working_memory_instructions(
            tenant_id=tenant_id, conversation_id=thread_id, user_id=user_id, editable=editable
        )


def _system_message(text: str) -> SystemMessage:
    return {"role": "system", "content": text}


def _ended_with(content: Any, text: str) -> Any:
    """A system message's content with `text` after it: a paragraph of a text, a part of
    parts (the client's own parts kept)."""
    if isinstance(content, str):
        return f"{content.rstrip()}\n\n{text}"
    return [*(content or ()), {"type": "text", "text": text}]


def _fit(
    messages: Sequence[ChatMessage], counts: Sequence[int], tokenizer: Tokenizer, limit: int
) -> tuple[list[ChatMessage], int, int]:
    """The longest provider-valid suffix of whole units within `limit`: the messages, their
    tokens (without the reply overhead), and how many messages were left out."""
    tokens = _fits_as_is(messages, counts, limit - tokenizer.reply_overhead)
    if tokens is not None:
        return list(messages), tokens, 0
    turns = _as_turns(messages, counts, tokenizer)
    if not turns:
        return [], 0, len(messages)
    selection = select_window(
        turns,
        limit_tokens=limit,
        reply_overhead=tokenizer.reply_overhead,
        at_thread_start=True,
    )
    tokens = sum(t.tokens for t in selection.turns)
    return [t.message for t in selection.turns], tokens, len(messages) - len(selection.turns)


def _fits_as_is(messages: Sequence[ChatMessage], counts: Sequence[int], limit: int) -> int | None:
    """The messages' tokens when they are already the window `_fit` would choose: counted,
    within `limit`, opening on a user turn, every call answered and every result answering a
    call. None when any of that is not so (or not known), and the units must be regrouped.

    The built-in memory's loads pass this (they were fitted and made valid in the store's
    read), and it walks them once without building anything: the second selection was a
    fifth of a long window's request."""
    if len(counts) != len(messages) or not messages or messages[0].get("role") != "user":
        return None
    tokens = sum(counts)
    if tokens > limit:
        return None
    open_calls: set[str] = set()
    for typed in messages:
        message: MessageIn = typed
        if message.get("role") == "tool":
            call_id = message.get("tool_call_id")
            if call_id not in open_calls:
                return None
            open_calls.discard(call_id)
            continue
        if open_calls:
            return None
        calls = message.get("tool_calls")
        if calls:
            open_calls = {c["id"] for c in calls}
    return None if open_calls else tokens


def _as_turns(
    messages: Sequence[ChatMessage], counts: Sequence[int], tokenizer: Tokenizer
) -> list[CountedTurn]:
    """Groups messages in units, with their counts (given, or counted here when the memory
    did not say); a tool result that answers no call of the assistant turn before it is
    dropped: no provider accepts it."""
    known = len(counts) == len(messages)
    turns: list[CountedTurn] = []
    unit_seq = 0
    open_calls: set[str] = set()
    for index, typed in enumerate(messages):
        message: MessageIn = typed
        role = message.get("role")
        if role == "tool":
            call_id = message.get("tool_call_id")
            if call_id not in open_calls:
                continue
            open_calls.discard(call_id)
        else:
            unit_seq = len(turns) + 1
            open_calls = {c["id"] for c in message.get("tool_calls") or ()}
        turns.append(
            CountedTurn(
                seq=len(turns) + 1,
                unit_seq=unit_seq,
                message=typed,
                tokens=counts[index] if known else tokenizer.count_message(message),
            )
        )
    return turns
