"""OpenAI's chat completions on the wire: the request as the official SDK's types define it,
per role, and the response.

    body = ChatCompletionRequest.model_validate(request_json)

The request's shape is stated exactly (the OpenAPI document is generated from it): every role
with its own fields, content parts by type, tool calls, the sampling parameters with their
ranges. What the gateway does not own reaches the upstream as it was sent (`forwarded`), fields
this service does not know included (``extra="allow"`` at the top level). Ids (a message's
``name``, a tool call's id, ``user``) follow the library's id rule; a few rules about the order
of messages cannot be written in JSON Schema and are the operation's description.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Discriminator,
    Field,
    JsonValue,
    StrictBool,
    StrictInt,
    Tag,
)

from ..errors import ValidationError
from ..formats import unserved_choice, unserved_tool
from ..formats.tool_choice import ALLOWED_TOOLS, checked
from ..llm import Usage
from ..llm.usage import to_chat
from ..messages import MAX_PARTS
from .params import ID_SCHEMA
from .wire import NotFunctionOrCustom, type_is

__all__ = [
    "ORDER_RULES",
    "AssistantMessage",
    "ChatCompletion",
    "ChatCompletionRequest",
    "ChatMessageIn",
    "Choice",
    "CompletionUsage",
    "ToolCallOut",
    "forwarded",
    "unserved",
]

Id = Annotated[str, Field(json_schema_extra=ID_SCHEMA)]


def _integral(value: object) -> object:
    """JSON Schema's integer: 3 and 3.0 alike (a bool or a string is still refused)."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


_JSON_INT = BeforeValidator(_integral)
"""Integers as JSON means them: ``3.0`` is ``3``; ``"3"``, ``true`` and ``3.5`` are not. The
bounds come before it in each alias, so that the schema states them (minimum, maximum)."""

JSONInt = Annotated[StrictInt, _JSON_INT]
Choices = Annotated[StrictInt, Field(ge=1, le=128), _JSON_INT]
Tokens = Annotated[StrictInt, Field(ge=1, le=1_000_000), _JSON_INT]
Bias = Annotated[StrictInt, Field(ge=-100, le=100), _JSON_INT]
TopLogprobs = Annotated[StrictInt, Field(ge=0, le=20), _JSON_INT]
"""Checked by the library (`check_id`), with its message; the pattern is published here."""

ORDER_RULES = (
    "Messages: the conversation, with system (or developer) messages anywhere in it: their "
    "texts, in order, are the call's system prompt, never turns of the thread. The last of the "
    "other messages is the user's, or the results of the tool calls of the assistant message "
    "before them, or an assistant's text after one of those, which the model goes on from (a "
    "front end's 'continue'). A tool result follows the assistant message whose call it "
    "answers (with only other results of that message in between) and answers each call once. "
    "The newest turns and `max_tokens` must fit the model's window with the system prompt and "
    "the tools, else the answer is a 400 `context_length_exceeded`, as at OpenAI. `n` > 1 is "
    "served without `stream`. Tools and `tool_choice` (`allowed_tools` too): function and "
    "custom tools only (the client runs them; a custom tool is offered to the upstream as a "
    "function of one string parameter, `input`, whose name is no other tool's, and its calls "
    "come back as `custom` calls); "
    "any other type, and the deprecated `functions`, `function_call` and `function` "
    "messages, is a 400 that names it."
)
"""What JSON Schema cannot say of a request; published as the operation's description."""


class _Part(BaseModel):
    model_config = ConfigDict(extra="forbid")


class _Marked(_Part):
    prompt_cache_breakpoint: dict[str, Any] | None = None
    """OpenAI's explicit cache mark: stored with the part; the newest few are sent."""


class TextPart(_Marked):
    type: Literal["text"]
    text: str


class ImageURL(_Part):
    url: str
    detail: Literal["auto", "low", "high", "original"] | None = None


class ImagePart(_Marked):
    type: Literal["image_url"]
    image_url: ImageURL


class InputAudio(_Part):
    data: str
    format: Literal["wav", "mp3"]


class AudioPart(_Marked):
    type: Literal["input_audio"]
    input_audio: InputAudio


_FILLED: dict[str, JsonValue] = {"type": "string", "minLength": 1}


class FileRef(_Part):
    """A file: its data (base64, as a ``data:`` URL) or the id of an uploaded file, or both."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "anyOf": [
                {"required": ["file_data"], "properties": {"file_data": _FILLED}},
                {"required": ["file_id"], "properties": {"file_id": _FILLED}},
            ]
        },
    )
    file_data: str | None = None
    file_id: str | None = None
    filename: str | None = None


class FilePart(_Marked):
    type: Literal["file"]
    file: FileRef


class RefusalPart(_Part):
    type: Literal["refusal"]
    refusal: str


_Parts = Field(min_length=1, max_length=MAX_PARTS)
"""A content-part list: 1 to MAX_PARTS parts."""

TextParts = Annotated[list[TextPart], _Parts]
UserParts = Annotated[
    list[Annotated[TextPart | ImagePart | AudioPart | FilePart, Field(discriminator="type")]],
    _Parts,
]
ToolParts = Annotated[
    list[Annotated[TextPart | ImagePart | FilePart, Field(discriminator="type")]], _Parts
]
"""A tool result's parts: OpenAI's are text; images and files (a screenshot an MCP tool took,
as LangChain's MCP adapters return it) are taken too, and reach a chat upstream after the
results (`workingmem.formats.tool_files`), any other as its own tool result's."""
AssistantParts = Annotated[
    list[Annotated[TextPart | RefusalPart, Field(discriminator="type")]], _Parts
]


class _Message(BaseModel):
    model_config = ConfigDict(extra="forbid")


class SystemMessageIn(_Message):
    role: Literal["system", "developer"]
    content: str | TextParts
    name: Id | None = None


class UserMessageIn(_Message):
    role: Literal["user"]
    content: str | UserParts
    name: Id | None = None


class FunctionCall(_Message):
    name: Annotated[str, Field(min_length=1)]
    arguments: str
    """The arguments as the model wrote them: a JSON text."""


class ToolCallIn(_Message):
    id: Id
    type: Literal["function"] = "function"
    function: FunctionCall
    index: Annotated[int | None, Field(exclude=True)] = None
    """A call's place as a streamed answer numbered it (Mistral's answers carry it too), in a
    history resent: taken, not stored."""
    extra_content: dict[str, Any] | None = None
    """A provider's own data on the call (Gemini's thought signature), resent: kept for the
    upstream with a turn the thread does not hold yet, never shown in the thread."""


class CustomCall(_Message):
    name: Annotated[str, Field(min_length=1)]
    input: str
    """The tool's input, free-form text."""


class CustomToolCallIn(_Message):
    """A call of a custom tool, as an answer gave it (`formats.chat_custom_tools`)."""

    id: Id
    type: Literal["custom"]
    custom: CustomCall
    index: Annotated[int | None, Field(exclude=True)] = None


ToolCall = Annotated[
    Annotated[ToolCallIn, Tag("function")] | Annotated[CustomToolCallIn, Tag("custom")],
    Discriminator(type_is("function", "custom", untyped=True)),
]


class AssistantMessageIn(_Message):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={  # what the library requires of an assistant turn, published
            "anyOf": [
                {"required": ["content"], "properties": {"content": {"not": {"type": "null"}}}},
                {
                    "required": ["tool_calls"],
                    "properties": {"tool_calls": {"type": "array", "minItems": 1}},
                },
            ]
        },
    )

    role: Literal["assistant"]
    content: str | AssistantParts | None = None
    """None (or absent) only when the message calls tools."""
    name: Id | None = None
    tool_calls: Annotated[list[ToolCall], Field(max_length=128)] | None = None
    refusal: str | None = None
    """The model's refusal, as a history resent carries it: the library stores it as a
    refusal part after the content."""
    audio: None = None
    function_call: None = None
    annotations: Annotated[list[Any], Field(max_length=0)] | None = None
    reasoning_content: str | None = None
    """A reasoning model's thinking, as a chat upstream gave it (vLLM, Ollama, DeepSeek) and a
    client resends its answers: kept for the upstream with a turn the thread does not hold
    yet (DeepSeek asks it back after a tool call), never shown in the thread, which holds
    what was said."""
    reasoning: str | None = None
    """The same, under the name newer servers give it."""
    reasoning_details: list[Any] | None = None
    """The same, in parts (OpenRouter's)."""


class ToolMessageIn(_Message):
    role: Literal["tool"]
    content: str | ToolParts
    tool_call_id: Id
    name: Annotated[str | None, Field(exclude=True)] = None
    """The tool's name, as some clients send it with the result: taken, not stored (the call
    names its tool)."""


class FunctionMessageIn(_Message):
    """A result of the deprecated ``functions``: refused with a 400 that names it
    (`unserved`), as ``functions`` is."""

    model_config = ConfigDict(extra="allow")
    role: Literal["function"]


ChatMessageIn = Annotated[
    SystemMessageIn | UserMessageIn | AssistantMessageIn | ToolMessageIn | FunctionMessageIn,
    Field(discriminator="role"),
]


class FunctionDefinition(BaseModel):
    model_config = ConfigDict(extra="allow")

    name: Annotated[str, Field(pattern=r"^[a-zA-Z0-9_-]{1,64}$")]
    description: str | None = None
    parameters: dict[str, Any] | None = None
    strict: StrictBool | None = None


class FunctionTool(BaseModel):
    model_config = ConfigDict(extra="forbid")

    type: Literal["function"]
    function: FunctionDefinition


class CustomFormat(BaseModel):
    """A custom tool's input format: free text, or a grammar (``lark`` or ``regex``), which
    the model is told (no upstream offered a function can enforce it)."""

    model_config = ConfigDict(extra="allow")

    type: Literal["text", "grammar"]


class CustomDefinition(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: Annotated[str, Field(pattern=r"^[a-zA-Z0-9_-]{1,64}$")]
    description: str | None = None
    format: CustomFormat | None = None


class CustomTool(BaseModel):
    """A tool whose input is free-form text (GPT-5's custom tools): offered to the upstream
    as a function of one string parameter, its calls shown as ``custom`` calls."""

    model_config = ConfigDict(extra="forbid")

    type: Literal["custom"]
    custom: CustomDefinition


class NamedFunction(BaseModel):
    name: str


class NamedToolChoice(BaseModel):
    model_config = ConfigDict(extra="forbid")

    type: Literal["function"]
    function: NamedFunction


class NamedCustomChoice(BaseModel):
    model_config = ConfigDict(extra="forbid")

    type: Literal["custom"]
    custom: NamedFunction


class OtherKind(BaseModel):
    """A tool or a tool choice of another type than ``function`` or ``custom``: an
    ``allowed_tools`` choice (checked), or one the gateway does not serve (a hosted tool's),
    refused with a 400 that names it (`unserved`)."""

    model_config = ConfigDict(extra="allow")

    type: NotFunctionOrCustom


Tool = Annotated[
    Annotated[FunctionTool, Tag("function")]
    | Annotated[CustomTool, Tag("custom")]
    | Annotated[OtherKind, Tag("other")],
    Discriminator(type_is("function", "custom")),
]
ToolChoice = Annotated[
    Annotated[NamedToolChoice, Tag("function")]
    | Annotated[NamedCustomChoice, Tag("custom")]
    | Annotated[OtherKind, Tag("other")],
    Discriminator(type_is("function", "custom")),
]


class StreamOptions(BaseModel):
    include_usage: StrictBool = False
    """Send a last chunk with the usage (and ``"usage": null`` on the others)."""


class ResponseFormatText(BaseModel):
    model_config = ConfigDict(extra="forbid")
    type: Literal["text"]


class ResponseFormatJSONObject(BaseModel):
    model_config = ConfigDict(extra="forbid")
    type: Literal["json_object"]


class JSONSchemaFormat(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)
    name: Annotated[str, Field(pattern=r"^[a-zA-Z0-9_-]{1,64}$")]
    description: str | None = None
    schema_: dict[str, Any] | None = Field(default=None, alias="schema")
    strict: StrictBool | None = None


class ResponseFormatJSONSchema(BaseModel):
    model_config = ConfigDict(extra="forbid")
    type: Literal["json_schema"]
    json_schema: JSONSchemaFormat


ResponseFormat = Annotated[
    ResponseFormatText | ResponseFormatJSONObject | ResponseFormatJSONSchema,
    Field(discriminator="type"),
]

Metadata = Annotated[
    dict[Annotated[str, Field(max_length=64)], Annotated[str, Field(max_length=512)]],
    Field(
        max_length=16,
        json_schema_extra={"properties": {"thread_id": {"type": "string", **ID_SCHEMA}}},
    ),
]


class ChatCompletionRequest(BaseModel):
    """OpenAI's request. `messages` are the new turns of the thread, or its whole history."""

    model_config = ConfigDict(
        extra="allow",
        json_schema_extra={
            "examples": [
                {
                    "model": "gpt-4o-mini",
                    "messages": [{"role": "user", "content": "What did I say my budget was?"}],
                }
            ],
        },
    )

    model: Annotated[str, Field(max_length=256)] | None = None
    """The upstream model; the name of a served profile picks that profile (and its model)."""
    messages: Annotated[list[ChatMessageIn], Field(min_length=1, max_length=1000)]
    stream: StrictBool = False
    """A JSON boolean: ``"yes"`` is refused, not read as true."""
    stream_options: StreamOptions | None = None
    user: Id | None = None
    """The user when no ``X-User-Id`` header names one (the header wins, as on every API).
    Forwarded too."""
    metadata: Metadata | None = None
    """Forwarded (the stored completion's, with ``store``); ``thread_id`` in it names the
    thread when no ``X-Thread-Id`` does."""
    store: StrictBool | None = None
    """Whether the gateway keeps the completion, as OpenAI does, for this tenant to list,
    retrieve, tag and delete (``/v1/chat/completions/{id}``); never forwarded."""
    n: Choices | None = None
    """How many choices: the first is stored, all are returned (not with ``stream``)."""
    max_tokens: Tokens | None = None
    """The answer's cap: the output reserve of the memory's budget."""
    max_completion_tokens: Tokens | None = None
    temperature: float | None = Field(default=None, ge=0, le=2, strict=True)
    top_p: float | None = Field(default=None, ge=0, le=1, strict=True)
    presence_penalty: float | None = Field(default=None, ge=-2, le=2, strict=True)
    frequency_penalty: float | None = Field(default=None, ge=-2, le=2, strict=True)
    seed: JSONInt | None = None
    stop: str | Annotated[list[str], Field(max_length=4)] | None = None
    logit_bias: dict[str, Bias] | None = None
    logprobs: StrictBool | None = None
    top_logprobs: TopLogprobs | None = None
    response_format: ResponseFormat | None = None
    reasoning_effort: str | None = None
    service_tier: str | None = None
    tools: Annotated[list[Tool], Field(max_length=128)] | None = None
    """The client's own function and custom tools: calls of them come back to the client
    (``tool_calls``)."""
    tool_choice: Literal["none", "auto", "required"] | ToolChoice | None = None
    parallel_tool_calls: StrictBool | None = None
    functions: list[Any] | None = None
    """Deprecated by OpenAI: refused, send ``tools``."""
    function_call: str | dict[str, Any] | None = None


OWNED = frozenset(
    {
        "model",
        "messages",
        "store",
        "stream",
        "stream_options",
        "tools",
        "max_tokens",
        "max_completion_tokens",
    }
)
"""The fields the gateway itself acts on; every other one is the upstream's."""


def unserved(body: ChatCompletionRequest) -> None:
    """Refuses, naming it, what the gateway does not serve: a tool or a tool choice of
    another type than ``function`` or ``custom`` (the client runs its tools; the gateway has
    no others), and the deprecated ``functions`` / ``function_call``."""
    for index, tool in enumerate(body.tools or ()):
        if isinstance(tool, OtherKind):
            raise unserved_tool(index, tool.type, "function and custom")
    choice = body.tool_choice
    if isinstance(choice, OtherKind) and choice.type == ALLOWED_TOOLS:
        checked(choice.model_dump().get(ALLOWED_TOOLS), "tool_choice.allowed_tools")
    elif isinstance(choice, OtherKind):
        raise unserved_choice(choice.type)
    for name in ("functions", "function_call"):
        if getattr(body, name) is not None:
            raise ValidationError(name, "is deprecated by OpenAI and not served: send tools")
    for index, message in enumerate(body.messages):
        if isinstance(message, FunctionMessageIn):
            raise ValidationError(
                f"messages[{index}].role",
                "'function' messages are deprecated by OpenAI and not served: send tool "
                "messages, with the tool_call_id of the call they answer",
            )


def forwarded(body: ChatCompletionRequest) -> dict[str, Any]:
    """The request's fields for the upstream, as they were sent (unknown ones included), but
    ``metadata.thread_id``, which names the gateway's thread: OpenAI takes ``metadata`` only
    with ``store``, so a client that names its thread there still reaches it. With ``store``
    the metadata is the gateway's stored completion's, and stays here too."""
    fields = {
        name: value
        for name, value in body.model_dump(mode="json", exclude_unset=True, by_alias=True).items()
        if name not in OWNED
    }
    if body.store:
        fields.pop("metadata", None)
    metadata = fields.get("metadata")
    if isinstance(metadata, dict) and "thread_id" in metadata:
        rest = {key: value for key, value in metadata.items() if key != "thread_id"}
        if rest:
            fields["metadata"] = rest
        else:
            del fields["metadata"]
    return fields


# -- the response ----------------------------------------------------------------------------


class FunctionCallOut(BaseModel):
    name: str
    arguments: str


class ToolCallOut(BaseModel):
    id: str
    type: Literal["function"] = "function"
    function: FunctionCallOut


class AssistantMessage(BaseModel):
    role: Literal["assistant"] = "assistant"
    content: str | None
    refusal: str | None = None
    tool_calls: list[ToolCallOut] | None = None
    """The calls of the client's tools (never the gateway's own)."""


class Choice(BaseModel):
    index: int = 0
    message: AssistantMessage
    finish_reason: str = "stop"
    logprobs: dict[str, Any] | None = None


class PromptTokensDetails(BaseModel):
    cached_tokens: int = 0
    cache_write_tokens: int = 0


class CompletionTokensDetails(BaseModel):
    reasoning_tokens: int = 0


class CompletionUsage(BaseModel):
    """What the upstream reported, its prompt cache's share and its reasoning included."""

    prompt_tokens: int
    completion_tokens: int
    total_tokens: int
    prompt_tokens_details: PromptTokensDetails
    completion_tokens_details: CompletionTokensDetails

    @classmethod
    def of(cls, usage: Usage) -> CompletionUsage:
        return cls.model_validate(to_chat(usage))


class ChatCompletion(BaseModel):
    """OpenAI's response: the upstream's own (every choice, the fields it adds), the gateway's
    agent-memory rounds taken out, the usage summed over them."""

    id: str
    object: Literal["chat.completion"] = "chat.completion"
    created: int
    model: str
    choices: list[Choice]
    usage: CompletionUsage
    system_fingerprint: str | None = None
    service_tier: str | None = None
