"""Anthropic's Messages API on the wire: the request as the `anthropic` SDK's types define it.

    body = MessageCreateRequest.model_validate(request_json)

Content blocks are typed where the thread relies on them (text, image, document, tool_use,
tool_result, thinking with its signature, redacted_thinking); any other block (a server tool's
use and result, ...) and any field a block has beyond those named is kept as sent.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Discriminator, Field, StrictBool, Tag

from .chat_schemas import Tokens
from .wire import Id, LongText, NotCustom, NotText, OpenShape, type_is

__all__ = [
    "AnthropicErrorResponse",
    "MessageCountTokensRequest",
    "MessageCreateRequest",
    "dumped_messages",
]


class TextBlock(OpenShape):
    type: Literal["text"]
    text: LongText


class ImageBlock(OpenShape):
    type: Literal["image"]
    source: dict[str, Any]


class DocumentBlock(OpenShape):
    type: Literal["document"]
    source: dict[str, Any]
    title: str | None = None


class ToolUseBlock(OpenShape):
    type: Literal["tool_use"]
    id: Id
    name: Annotated[str, Field(min_length=1, max_length=256)]
    input: dict[str, Any]


class ToolResultBlock(OpenShape):
    type: Literal["tool_result"]
    tool_use_id: Id
    content: LongText | list[dict[str, Any]] | None = None
    is_error: StrictBool | None = None


class ThinkingBlock(OpenShape):
    type: Literal["thinking"]
    thinking: LongText
    signature: str


class RedactedThinkingBlock(OpenShape):
    type: Literal["redacted_thinking"]
    data: str


KNOWN_BLOCKS = (
    "text",
    "image",
    "document",
    "tool_use",
    "tool_result",
    "thinking",
    "redacted_thinking",
)


class OtherBlock(OpenShape):
    """Any other block (a server tool's use or result, ...): kept as sent."""

    type: Annotated[
        str,
        Field(min_length=1, max_length=64, json_schema_extra={"not": {"enum": list(KNOWN_BLOCKS)}}),
    ]


def _block_kind(value: Any) -> str:
    kind = value.get("type") if isinstance(value, dict) else getattr(value, "type", None)
    return kind if kind in KNOWN_BLOCKS else "other"


Block = Annotated[
    Annotated[TextBlock, Tag("text")]
    | Annotated[ImageBlock, Tag("image")]
    | Annotated[DocumentBlock, Tag("document")]
    | Annotated[ToolUseBlock, Tag("tool_use")]
    | Annotated[ToolResultBlock, Tag("tool_result")]
    | Annotated[ThinkingBlock, Tag("thinking")]
    | Annotated[RedactedThinkingBlock, Tag("redacted_thinking")]
    | Annotated[OtherBlock, Tag("other")],
    Discriminator(_block_kind),
]
Blocks = Annotated[list[Block], Field(min_length=1, max_length=1000)]


class TurnParam(BaseModel):
    model_config = ConfigDict(extra="forbid")
    role: Literal["user", "assistant"]
    content: LongText | Blocks


class SystemBlock(OpenShape):
    type: Literal["text"]
    text: LongText


class ToolChangeBlock(OpenShape):
    """A block of a system message that changes the tools (``tool_addition``,
    ``tool_removal``, ...): refused with a 400 that names it."""

    type: NotText


SystemMessageBlock = Annotated[
    Annotated[TextBlock, Tag("text")] | Annotated[ToolChangeBlock, Tag("other")],
    Discriminator(type_is("text")),
]


class SystemMessageParam(OpenShape):
    """A system message among the messages: instructions for the call from where it stands
    (Claude Code sends its environment so), which join the system prompt; see
    `workingmem.formats.anthropic_system`."""

    role: Literal["system"]
    content: LongText | Annotated[list[SystemMessageBlock], Field(min_length=1, max_length=100)]
    clear_at: Literal["next_user_message", "never"] | None = None
    output_config: dict[str, Any] | None = None


def _role_kind(value: Any) -> str:
    role = value.get("role") if isinstance(value, dict) else getattr(value, "role", None)
    return "system" if role == "system" else "turn"


MessageParam = Annotated[
    Annotated[TurnParam, Tag("turn")] | Annotated[SystemMessageParam, Tag("system")],
    Discriminator(_role_kind),
]


class CustomTool(OpenShape):
    """A tool the client runs: its calls come back as ``tool_use`` blocks."""

    type: Literal["custom"] | None = None
    name: Annotated[str, Field(pattern=r"^[a-zA-Z0-9_-]{1,64}$")]
    description: str | None = None
    input_schema: dict[str, Any]


class ServerTool(OpenShape):
    """A tool Anthropic runs (``web_search_20250305``, ``code_execution_...``, ...): refused
    with a 400 that names it, since the gateway's upstream may have none."""

    type: NotCustom


Tool = Annotated[
    Annotated[CustomTool, Tag("custom")] | Annotated[ServerTool, Tag("other")],
    Discriminator(type_is("custom", untyped=True)),
]


class ToolChoiceAny(BaseModel):
    """``auto``, ``any`` (a tool must be called) or ``none``."""

    model_config = ConfigDict(extra="forbid")
    type: Literal["auto", "any", "none"]
    disable_parallel_tool_use: StrictBool | None = None


class ToolChoiceTool(BaseModel):
    """This tool must be called."""

    model_config = ConfigDict(extra="forbid")
    type: Literal["tool"]
    name: Annotated[str, Field(min_length=1, max_length=64)]
    disable_parallel_tool_use: StrictBool | None = None


ToolChoice = Annotated[ToolChoiceAny | ToolChoiceTool, Field(discriminator="type")]


class Metadata(BaseModel):
    model_config = ConfigDict(extra="forbid")
    user_id: Id | None = None
    """The end user: the thread's user when no ``X-User-Id`` header names one (the header
    wins, as on every API)."""


class MessageCountTokensRequest(BaseModel):
    """``POST /v1/messages/count_tokens``: a transcript to count, as it would be sent."""

    model_config = ConfigDict(extra="allow")

    model: Annotated[str, Field(min_length=1, max_length=256)]
    messages: Annotated[list[MessageParam], Field(min_length=1, max_length=2000)]
    system: LongText | Annotated[list[SystemBlock], Field(max_length=100)] | None = None
    tools: Annotated[list[Tool], Field(max_length=128)] | None = None
    tool_choice: ToolChoice | None = None
    thinking: dict[str, Any] | None = None

    def system_text(self) -> str | None:
        """The request's ``system`` as one text (None: the profile's); the system messages
        among the messages follow it in the call's (`anthropic_system.instructions`)."""
        if self.system is None:
            return None
        if isinstance(self.system, str):
            return self.system or None
        return "\n\n".join(block.text for block in self.system) or None


class MessageCreateRequest(MessageCountTokensRequest):
    """``POST /v1/messages``: the transcript (the new turns, or all of them) to answer."""

    model_config = ConfigDict(
        extra="allow",
        json_schema_extra={
            "examples": [
                {
                    "model": "claude-sonnet-4-5",
                    "max_tokens": 1024,
                    "messages": [{"role": "user", "content": "What did I say my budget was?"}],
                }
            ]
        },
    )

    max_tokens: Tokens
    temperature: float | None = Field(default=None, ge=0, le=1, strict=True)
    top_p: float | None = Field(default=None, ge=0, le=1, strict=True)
    top_k: Annotated[int, Field(ge=0, le=1000)] | None = None
    stop_sequences: Annotated[list[str], Field(max_length=16)] | None = None
    metadata: Metadata | None = None
    stream: StrictBool = False


def dumped_messages(body: MessageCountTokensRequest) -> list[dict[str, Any]]:
    """The messages as they were sent (the fields left out stay out)."""
    return [message.model_dump(mode="json", exclude_unset=True) for message in body.messages]


class AnthropicError(BaseModel):
    type: str
    message: str


class AnthropicErrorResponse(BaseModel):
    """Anthropic's error shape."""

    type: Literal["error"] = "error"
    error: AnthropicError
