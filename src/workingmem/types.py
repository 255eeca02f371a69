"""The domain types: turns, threads, models, memory states and loads.

    turn = Turn.from_message({"role": "user", "content": "hi"})
    turn.to_message()  # {"role": "user", "content": "hi"}

A *turn* is one stored message of a thread. A *unit* is a user turn, or an assistant turn
together with every tool turn that answers its calls: windows are cut between units, never
inside one. Messages in and out are OpenAI chat-format dicts; `Turn` is their typed twin.

*Thread memory* (spec 000/001) is what the library keeps of a thread by itself: its window,
summary and facts (`WorkingMemoryState`, whose names the spec fixes). *Agent memory* (spec
003) is the document the model edits through its tools, which the spec calls the "working
memory"; its types live in `agent_memory`.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, NotRequired, cast

from pydantic import BaseModel, ConfigDict, Field
from pydantic import ValidationError as PydanticValidationError
from typing_extensions import TypedDict  # pydantic reads only this one before Python 3.12

from .errors import ValidationError

__all__ = [
    "CHAT_FORMAT",
    "AssistantMessage",
    "ChatMessage",
    "Content",
    "CountedTurn",
    "Fact",
    "FunctionCallDict",
    "Message",
    "MessageIn",
    "ModelInfo",
    "NativeItem",
    "Role",
    "Settings",
    "Strategy",
    "SystemMessage",
    "Thread",
    "ToolCall",
    "ToolCallDict",
    "ToolMessage",
    "Turn",
    "UpdateOutcome",
    "UpdateReport",
    "UserMessage",
    "WorkingMemoryLoad",
    "WorkingMemoryState",
]

Message = dict[str, Any]
"""An OpenAI chat-format message as code builds it: ``{"role": ..., "content": ..., ...}``.
What the library hands out is typed by role (`ChatMessage`); what it takes is any mapping
(`MessageIn`), checked at the door."""

MessageIn = Mapping[str, Any]
"""A message the library takes: any chat-format mapping (a `ChatMessage`, the OpenAI SDK's
``ChatCompletionMessageParam``, a plain dict); validated, never trusted for its type."""

Content = str | list[dict[str, Any]]
"""A message's content: a string or a list of content parts (``{"type": "text", ...}``)."""


class FunctionCallDict(TypedDict):
    name: str
    arguments: str
    """A JSON text, as the model wrote it."""


class ToolCallDict(TypedDict):
    """One call an assistant message asks for."""

    id: str
    type: Literal["function"]
    function: FunctionCallDict


class SystemMessage(TypedDict):
    role: Literal["system", "developer"]
    content: Content
    name: NotRequired[str]


class UserMessage(TypedDict):
    role: Literal["user"]
    content: Content
    name: NotRequired[str]


class AssistantMessage(TypedDict):
    role: Literal["assistant"]
    content: Content | None
    """None when the message only calls tools."""
    name: NotRequired[str]
    tool_calls: NotRequired[list[ToolCallDict]]


class ToolMessage(TypedDict):
    role: Literal["tool"]
    content: Content
    tool_call_id: str
    """The call it answers."""


ChatMessage = SystemMessage | UserMessage | AssistantMessage | ToolMessage
"""An OpenAI chat-format message, typed by role: what the library hands out (a load's
window, `Turn.to_message`, an assembled request)."""

CHAT_FORMAT = "openai.chat"
"""The format of a turn given as a plain chat message: its chat view is its original."""
CHAT_ORIGINAL_KEY = "workingmem_chat"
"""Where an item of another format (a Responses client's output, an Anthropic client's blocks)
keeps the chat upstream's answer it stands for, when that answer has fields of the upstream's
own to send back (`workingmem.formats.chat_answer`): the item's first key, so that the store's
tail read finds it at the start of the item's text; `Turn.in_format` leaves it out."""

Role = Literal["user", "assistant", "tool"]
"""The roles a thread stores. System prompts belong to the profile, not to the thread."""


class Strategy(enum.StrEnum):
    """The ways a thread's history reaches the model (spec 001)."""

    SLIDING_WINDOW = "SLIDING_WINDOW"
    """The newest turns verbatim that fit a share of the budget; nothing stored, no helper call."""

    SUMMARY_BUFFER = "SUMMARY_BUFFER"
    """A rolling summary + facts written by a cheap model, then the last turns verbatim."""


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One function call an assistant turn asks for."""

    id: str
    """The call id; the tool turn that answers it carries the same `tool_call_id`."""
    name: str
    """The function's name."""
    arguments: str
    """The arguments as the model wrote them: a JSON text, not parsed."""

    def to_message(self) -> ToolCallDict:
        return {
            "id": self.id,
            "type": "function",
            "function": {"name": self.name, "arguments": self.arguments},
        }


@dataclass(frozen=True, slots=True)
class NativeItem:
    """A turn as a client or a framework gave it, in its own format, with its chat view.

    The formats carry what OpenAI's chat format cannot (a Responses ``reasoning`` item's
    ``encrypted_content``, an Anthropic ``thinking`` block's ``signature``, a framework's
    message id), and a lossy conversion would lose it silently. So the store keeps `item`
    exactly as given beside `message`, the chat view that token counts, units and windows use.
    """

    format: str
    """Whose shape `item` has: ``openai.chat``, ``openai.responses``, ``anthropic.messages``,
    or a framework's name (1-64 of ``a-z 0-9 . _ -``)."""
    item: dict[str, Any]
    """The original, JSON-serializable; read back unchanged (`Turn.item`)."""
    message: Message
    """Its OpenAI chat-format view, validated like any message."""


@dataclass(frozen=True, slots=True)
class Turn:
    """One stored message of a thread."""

    role: Role
    """user, assistant or tool."""
    content: str | list[dict[str, Any]] | None
    """A string, a list of content parts, or None (an assistant turn that only calls tools)."""
    tool_calls: tuple[ToolCall, ...] = ()
    """The calls of an assistant turn; empty otherwise."""
    tool_call_id: str | None = None
    """The call a tool turn answers."""
    name: str | None = None
    """The optional participant name of a user or assistant turn."""
    seq: int | None = None
    """The turn's position in its thread, from 1; None before it is stored."""
    created_at: datetime | None = None
    """When it was stored (UTC); None before it is stored."""
    format: str = CHAT_FORMAT
    """The format it was given in (see `NativeItem`)."""
    item: dict[str, Any] | None = None
    """The original item as it was given, in `format`; None when the chat view is the
    original (a plain chat message)."""

    def in_format(self, format: str) -> dict[str, Any] | None:
        """The turn as it was written, when it was written in `format`: the original item,
        unchanged (the chat message for ``openai.chat``); None for another format."""
        if format != self.format:
            return None
        if self.item is None:
            return dict(self.to_message())
        if CHAT_ORIGINAL_KEY in self.item:
            return {k: v for k, v in self.item.items() if k != CHAT_ORIGINAL_KEY}
        return self.item

    def to_message(self) -> ChatMessage:
        """The OpenAI chat-format dict of this turn."""
        message: Message = {"role": self.role, "content": self.content}
        if self.name is not None:
            message["name"] = self.name
        if self.tool_calls:
            message["tool_calls"] = [call.to_message() for call in self.tool_calls]
        if self.tool_call_id is not None:
            message["tool_call_id"] = self.tool_call_id
        return cast(ChatMessage, message)  # a stored turn was validated by role

    @classmethod
    def from_message(
        cls,
        message: MessageIn,
        *,
        seq: int | None = None,
        created_at: datetime | None = None,
        format: str = CHAT_FORMAT,
        item: dict[str, Any] | None = None,
    ) -> Turn:
        """Builds a turn from a message that `workingmem.messages.normalize_message` accepted."""
        calls = tuple(
            ToolCall(
                id=call["id"],
                name=call["function"]["name"],
                arguments=call["function"]["arguments"],
            )
            for call in message.get("tool_calls") or ()
        )
        return cls(
            role=message["role"],
            content=message.get("content"),
            tool_calls=calls,
            tool_call_id=message.get("tool_call_id"),
            name=message.get("name"),
            seq=seq,
            created_at=created_at,
            format=format,
            item=item,
        )


@dataclass(frozen=True, slots=True)
class CountedTurn:
    """A stored turn as a window sees it: its place, its unit and its token count."""

    seq: int
    """The turn's position in its thread, from 1."""
    unit_seq: int
    """The seq of the first turn of the unit it belongs to."""
    message: ChatMessage
    """The OpenAI chat-format message."""
    tokens: int
    """Its tokens with the call's tokenizer, per-message overhead included."""
    original: dict[str, Any] | None = None
    """The turn as a chat upstream takes it when that is not `message`: `message` with the
    fields of the upstream's own that the turn's item kept (a reasoning model's
    ``reasoning_content``, a call's ``extra_content``), which that upstream asks back; None
    when `message` is what is sent."""
    held: int = 0
    """The bytes of base64 of the large files a read left in the store: `message` names them
    (``[image, attached earlier]``), and the stored turn holds them (`WorkingMemory.load`
    reads it whole when they are sent). 0 for a turn read whole."""

    @property
    def sent(self) -> ChatMessage:
        """The message a window sends: `original` when there is one, else `message`."""
        return cast(ChatMessage, self.original) if self.original is not None else self.message


@dataclass(frozen=True, slots=True)
class Thread:
    """A conversation, keyed by (tenant_id, thread_id)."""

    tenant_id: str
    thread_id: str
    user_id: str | None
    """The user who opened the thread, when the host said."""
    turn_count: int
    """How many turns are stored; the newest turn's seq."""
    created_at: datetime
    updated_at: datetime


class Settings(BaseModel):
    """The base of the library's settings: a value they refuse raises `ValidationError`
    (naming the field), like every other misuse, not pydantic's own error."""

    def __init__(self, /, **data: Any) -> None:
        try:
            super().__init__(**data)
        except PydanticValidationError as exc:
            error = exc.errors(include_url=False)[0]
            field = ".".join(str(part) for part in error["loc"]) or type(self).__name__
            reason = str(error["msg"]).removeprefix("Value error, ")
            raise ValidationError(field, reason) from exc


class ModelInfo(Settings):
    """The model a request is built for: its window and how it counts tokens.

    Defaults: `max_output_tokens` 4,096 (what the assembler reserves for the answer);
    `tokenizer` None, which means "the model's own, from its id" (tiktoken for OpenAI model
    ids, a documented estimate otherwise).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str = Field(min_length=1, max_length=256)
    """The model id, as the upstream knows it (``gpt-4o``, ``gpt-4.1-mini``, ...)."""
    context_window: int = Field(gt=0)
    """The model's context window, in tokens."""
    max_output_tokens: int = Field(default=4_096, gt=0)
    """The tokens reserved for the answer."""
    tokenizer: str | None = None
    """``o200k_base`` / ``cl100k_base``, or the path of a Hugging Face ``tokenizer.json``;
    None picks the model's own from its id."""


class Fact(str):
    """One fact the summary keeps: its text, with the turns it came from.

    A fact *is* its text (a `str`: it compares, joins and prints as one), so that
    `WorkingMemoryState.facts` is one field a reader uses as a list of strings or, when they
    want it, as the facts with their turn ranges. Immutable, like the state that holds it.
    """

    __slots__ = ("first_turn", "last_turn")

    first_turn: int | None
    """The seq of the first turn the fact came from, when known."""
    last_turn: int | None
    """The seq of the last turn the fact came from, when known."""

    def __new__(
        cls, text: str, first_turn: int | None = None, last_turn: int | None = None
    ) -> Fact:
        fact = super().__new__(cls, text)
        object.__setattr__(fact, "first_turn", first_turn)
        object.__setattr__(fact, "last_turn", last_turn)
        return fact

    @property
    def text(self) -> str:
        """The fact as a plain `str`."""
        return str.__str__(self)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"a Fact is immutable: cannot set {name!r}")

    def __reduce__(self) -> tuple[type[Fact], tuple[str, int | None, int | None]]:
        return (Fact, (self.text, self.first_turn, self.last_turn))

    def __repr__(self) -> str:
        return f"Fact({self.text!r}, first_turn={self.first_turn}, last_turn={self.last_turn})"


@dataclass(frozen=True, slots=True)
class WorkingMemoryState:
    """What the memory has stored about one thread (spec 000, getState)."""

    summary: str = ""
    """The rolling summary; "" when none was written."""
    facts: list[Fact] = field(default_factory=list)
    """The facts, oldest first: each a `str` with the turn range it came from (`Fact`)."""
    turn_count: int = 0
    """The thread's turn count when the summary was written (or the thread was reset)."""
    version: int = 0
    """Bumped by every write of the state; 0 for a state never written."""
    updated_at: datetime | None = None

    def __post_init__(self) -> None:
        facts = [f if isinstance(f, Fact) else Fact(f) for f in self.facts]
        object.__setattr__(self, "facts", facts)

    @property
    def fact_details(self) -> tuple[Fact, ...]:
        """The facts, as a tuple: the name earlier versions had for them with their turn
        ranges. Kept for those callers; `facts` is the same thing."""
        return tuple(self.facts)


@dataclass(frozen=True, slots=True)
class WorkingMemoryLoad:
    """The history part of one model request (spec 000, load)."""

    messages: list[ChatMessage]
    """The window, oldest first, the current user turn last; OpenAI chat format (a turn
    stored in it with fields of its upstream's own, as it was stored: `CountedTurn.original`)."""
    notes: str = ""
    """The text for the "About this conversation" part of the {memory} slot; "" for nothing."""
    tokens: int = 0
    """The window's tokens with the model's tokenizer, chat overhead included."""
    strategy: Strategy | None = None
    """The strategy that made this load; None when memory is switched off."""
    dropped_turns: int = 0
    """Turns of the thread that are not in the window."""
    covered_turns: int | None = None
    """SUMMARY_BUFFER: the thread's turn count the notes were written at (the state's), so a
    caller can tell whether an update is due without reading it again; None otherwise."""
    message_tokens: tuple[int, ...] = ()
    """Each message's tokens (per-message overhead included), when the memory knows them:
    the assembler then need not count them again. Empty for "unknown"."""
    seqs: tuple[int, ...] = ()
    """Each message's seq in its thread, when the memory knows them: an integration reads the
    window's turns in their own format by them (`Turn.in_format`). Empty for "unknown"."""
    recalled_seqs: tuple[int, ...] = ()
    """The seqs of the turns recall put in the notes (`recall_ratio`), in the thread's order;
    none of them is in the window."""
    recalled_tokens: int = 0
    """The tokens of the notes' recall section, with the model's tokenizer."""
    named_files: tuple[int, ...] = ()
    """The seqs of the window's turns whose large files were left in the store because the
    newer ones filled the load's `file_bytes`: their messages name the files
    (``[image, attached earlier]``) instead of holding them."""


class UpdateOutcome(enum.StrEnum):
    """How one summary update ended."""

    UPDATED = "updated"
    """A new summary + facts was stored."""
    NOT_DUE = "not_due"
    """Fewer than `update_every_turns` new turns: nothing to do."""
    SKIPPED = "skipped"
    """Nothing to do by configuration: SLIDING_WINDOW, memory switched off, no LLM client."""
    BUSY = "busy"
    """Another updater holds the thread's lease; it covers these turns."""
    REFUSED = "refused"
    """The usage guard refused the helper call."""
    INVALID_OUTPUT = "invalid_output"
    """The helper's answer failed validation; the state is untouched; a later call retries."""
    UPSTREAM_ERROR = "upstream_error"
    """The helper call failed (after retries); the state is untouched; a later call retries."""
    CONFLICT = "conflict"
    """The state changed meanwhile (a reset, another writer): the update was dropped."""
    STALLED = "stalled"
    """The helper answered, its facts were applied and the turns marked as read, but the
    summary came back unchanged although the new turns said something: a model that stopped
    taking in the conversation (reported and logged, not a success)."""
    FAILED = "failed"
    """Anything else (the database, a bug): reported, never raised."""


@dataclass(frozen=True, slots=True)
class UpdateReport:
    """What one `save_context` did, for logs, metrics and tests."""

    tenant_id: str
    thread_id: str
    outcome: UpdateOutcome
    detail: str = ""
    helper_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    turn_count: int | None = None
    """The state's turn count after the update, when one was written."""
