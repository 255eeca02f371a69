"""The HTTP shapes: OpenAI's chat completion, and the memory REST resources.

    body = ChatCompletionRequest.model_validate(request_json)
    ThreadOut.of(thread)      # a library value as its HTTP resource

The chat shapes follow OpenAI's (fields a client may send and this service does not forward are
accepted: `extra="allow"`). The REST shapes give times as ISO 8601 UTC.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt

from ..gateway import ThreadMemory
from ..stores.documents import WorkingMemoryDocument
from ..types import Thread, Turn, WorkingMemoryState

__all__ = [
    "ChatCompletion",
    "ChatCompletionRequest",
    "ChatMessage",
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


# -- chat completions ------------------------------------------------------------------------


class ChatMessage(BaseModel):
    """One message of a request; other OpenAI fields are accepted and checked by the library."""

    model_config = ConfigDict(extra="allow")

    role: Literal["system", "developer", "user", "assistant", "tool", "function"]
    content: str | list[dict[str, Any]] | None = None
    name: str | None = None


class StreamOptions(BaseModel):
    include_usage: bool = False
    """Send a last chunk with the usage (and ``"usage": null`` on the others)."""


class ChatCompletionRequest(BaseModel):
    """OpenAI's request. `messages` are the NEW turns of the thread named by ``X-Thread-Id``."""

    model_config = ConfigDict(
        extra="allow",
        json_schema_extra={
            "examples": [
                {
                    "model": "gpt-4o-mini",
                    "messages": [{"role": "user", "content": "What did I say my budget was?"}],
                }
            ]
        },
    )

    model: str | None = Field(default=None, max_length=256)
    """The upstream model; the name of a served profile picks that profile (and its model)."""
    messages: list[ChatMessage] = Field(min_length=1, max_length=1000)
    """An optional leading system (or developer) message, then the new turns, a user one last."""
    stream: StrictBool = False
    """A JSON boolean: ``"yes"`` is refused, not read as true."""
    stream_options: StreamOptions | None = None
    user: str | None = None
    """The user; else the ``X-User-Id`` header."""
    n: StrictInt | None = Field(default=None, ge=1, le=128)
    """Only 1 is supported."""
    max_tokens: StrictInt | None = Field(default=None, ge=1, le=1_000_000)
    max_completion_tokens: StrictInt | None = Field(default=None, ge=1, le=1_000_000)
    temperature: float | None = Field(default=None, ge=0, le=2, strict=True)
    top_p: float | None = Field(default=None, ge=0, le=1, strict=True)
    presence_penalty: float | None = Field(default=None, ge=-2, le=2, strict=True)
    frequency_penalty: float | None = Field(default=None, ge=-2, le=2, strict=True)
    seed: StrictInt | None = None
    tools: list[Any] | None = None
    """Client-side tools are not supported yet: a request with tools is refused (400)."""
    tool_choice: Any = None
    functions: list[Any] | None = None
    function_call: Any = None
    response_format: dict[str, Any] | None = None
    """Only ``{"type": "text"}`` is supported."""


class AssistantMessage(BaseModel):
    role: Literal["assistant"] = "assistant"
    content: str
    refusal: None = None


class Choice(BaseModel):
    index: int = 0
    message: AssistantMessage
    finish_reason: str = "stop"
    logprobs: None = None


class CompletionUsage(BaseModel):
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int


class ChatCompletion(BaseModel):
    """OpenAI's response."""

    id: str
    object: Literal["chat.completion"] = "chat.completion"
    created: int
    model: str
    choices: list[Choice]
    usage: CompletionUsage


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
