"""The HTTP shapes of the memory REST resources (OpenAI's chat shapes: `chat_schemas`).

    ThreadOut.of(thread)      # a library value as its HTTP resource

The REST shapes give times as ISO 8601 UTC; errors have OpenAI's shape.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ..gateway import ThreadMemory
from ..stores.documents import WorkingMemoryDocument
from ..types import Thread, Turn, WorkingMemoryState
from .chat_schemas import (
    ChatCompletion,
    ChatCompletionRequest,
)

__all__ = [
    "ChatCompletion",
    "ChatCompletionRequest",
    "ErrorResponse",
    "FactOut",
    "Health",
    "MessageList",
    "MessageOut",
    "ResetOut",
    "SummaryVersionOut",
    "ThreadList",
    "ThreadMemoryOut",
    "ThreadOut",
    "WorkingMemoryOut",
    "WorkingMemoryPut",
    "WorkingMemoryUpdateOut",
]


class ErrorDetail(BaseModel):
    message: str
    type: str
    param: str | None = None
    code: str | None = None


class ErrorResponse(BaseModel):
    """Every error: OpenAI's shape."""

    error: ErrorDetail


# -- threads and memory ----------------------------------------------------------------------


class ThreadOut(BaseModel):
    id: str
    user_id: str | None
    turn_count: int
    created_at: datetime
    updated_at: datetime

    @classmethod
    def of(cls, thread: Thread) -> ThreadOut:
        return cls(
            id=thread.thread_id,
            user_id=thread.user_id,
            turn_count=thread.turn_count,
            created_at=thread.created_at,
            updated_at=thread.updated_at,
        )


class ThreadList(BaseModel):
    object: Literal["list"] = "list"
    data: list[ThreadOut]
    has_more: bool
    next_offset: int | None
    """The `offset` of the next page; None on the last page."""


class MessageOut(BaseModel):
    seq: int
    role: str
    content: str | list[dict[str, Any]] | None
    name: str | None = None
    tool_calls: list[dict[str, Any]] | None = None
    tool_call_id: str | None = None
    created_at: datetime | None

    @classmethod
    def of(cls, turn: Turn) -> MessageOut:
        return cls(
            seq=turn.seq or 0,
            role=turn.role,
            content=turn.content,
            name=turn.name,
            tool_calls=[dict(call.to_message()) for call in turn.tool_calls] or None,
            tool_call_id=turn.tool_call_id,
            created_at=turn.created_at,
        )


class MessageList(BaseModel):
    object: Literal["list"] = "list"
    data: list[MessageOut]
    has_more: bool
    next_after: int | None
    """The `after` of the next page (the last seq of this one); None on the last page."""


class FactOut(BaseModel):
    text: str
    first_turn: int | None
    """The first turn (seq) the fact came from, when known."""
    last_turn: int | None

    @classmethod
    def of_state(cls, state: WorkingMemoryState) -> list[FactOut]:
        return [
            cls(text=f.text, first_turn=f.first_turn, last_turn=f.last_turn) for f in state.facts
        ]


class SummaryVersionOut(BaseModel):
    version: int
    summary: str
    facts: list[FactOut]
    turn_count: int
    """The turns this version covers."""
    updated_at: datetime | None

    @classmethod
    def of(cls, state: WorkingMemoryState) -> SummaryVersionOut:
        return cls(
            version=state.version,
            summary=state.summary,
            facts=FactOut.of_state(state),
            turn_count=state.turn_count,
            updated_at=state.updated_at,
        )


class WorkingMemoryOut(BaseModel):
    scope: Literal["conversation", "user"]
    owner_id: str
    """The thread id (scope conversation) or the user id (scope user)."""
    content: str | None
    """The document (a JSON text in schema mode); None when empty."""
    version: int
    """0 for a document never written; the `expected_version` of a compare-and-set PUT."""
    updated_at: datetime | None
    format: Literal["markdown", "json"] | None

    @classmethod
    def of(cls, document: WorkingMemoryDocument, fmt: str | None) -> WorkingMemoryOut:
        return cls(
            scope=document.scope,
            owner_id=document.owner_id,
            content=document.content,
            version=document.version,
            updated_at=document.updated_at,
            format="markdown" if fmt == "markdown" else "json" if fmt == "json" else None,
        )


class WorkingMemoryUpdateOut(WorkingMemoryOut):
    changed: bool
    """False when the update left the document as it was."""
    ignored_nulls: list[str] = Field(default_factory=list)


class WorkingMemoryPut(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={"examples": [{"content": "# User\n- Name: Ada\n"}]},
    )

    content: str | dict[str, Any]
    """Text (template and free-form modes), or an object merged in (schema mode)."""
    replace: bool = False
    """Schema mode: store `content` as the whole document instead of merging it."""
    expected_version: int | None = Field(default=None, ge=0, le=2**31)
    """Apply only to this version, else 409; None re-applies after a concurrent write."""


class ThreadMemoryOut(BaseModel):
    """What the gateway remembers of a thread."""

    thread_id: str
    user_id: str | None
    turn_count: int
    strategy: str | None
    """SLIDING_WINDOW or SUMMARY_BUFFER; None when memory is switched off."""
    notes: str
    """The notes as the model sees them now ("" under SLIDING_WINDOW)."""
    summary: str
    facts: list[FactOut]
    covered_turns: int
    """The turns the summary and facts cover (the state's turn count)."""
    state_version: int
    working_memory: WorkingMemoryOut | None
    summary_versions: list[SummaryVersionOut]
    """Newest first."""
    window_tokens: int | None
    """The tokens of the next request's history window; None if it cannot be assembled."""
    budget_tokens: int | None

    @classmethod
    def of(cls, memory: ThreadMemory, working: WorkingMemoryOut | None) -> ThreadMemoryOut:
        thread, state = memory.thread, memory.state
        return cls(
            thread_id=thread.thread_id,
            user_id=thread.user_id,
            turn_count=thread.turn_count,
            strategy=memory.strategy.value if memory.strategy else None,
            notes=memory.notes,
            summary=state.summary,
            facts=FactOut.of_state(state),
            covered_turns=state.turn_count,
            state_version=state.version,
            working_memory=working,
            summary_versions=[SummaryVersionOut.of(v) for v in memory.versions],
            window_tokens=memory.window_tokens,
            budget_tokens=memory.budget_tokens,
        )


class ResetOut(BaseModel):
    thread_id: str
    reset: Literal[True] = True
    working_memory_cleared: bool


class Health(BaseModel):
    status: Literal["ok"] = "ok"
    version: str
    queue_depth: int
