"""OpenAI's Responses and Conversations APIs on the wire: the requests, as the `openai` SDK's
types define them.

    body = ResponseCreateRequest.model_validate(request_json)

Input items are typed where the thread needs them to be right (a message's role and content
parts, a call's ``call_id``, ``name`` and ``arguments``, an output's ``call_id``); every other
item type (``reasoning``, hosted tool calls, ...) is kept as it was sent, and so are fields an
item has beyond those named. Request fields this service does not act on are accepted
(``extra="allow"``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Discriminator, Field, StrictBool, Tag

from ..formats.client_tools import ADDITIONAL, Loaded, Offered, offer
from ..formats.responses import LOGPROBS, is_reference
from ..messages import MAX_PARTS
from .chat_schemas import (
    Metadata,
    ResponseFormatJSONObject,
    ResponseFormatText,
    Tokens,
    TopLogprobs,
)
from .params import ID_SCHEMA
from .wire import Id, LongText, NotClientTool, NotFunctionOrCustom, OpenShape, type_is

__all__ = [
    "ContextManagement",
    "ConversationCreateRequest",
    "ConversationUpdateRequest",
    "InputTokenCountRequest",
    "ItemsCreateRequest",
    "ResponseCompactRequest",
    "ResponseCreateRequest",
    "ResponseInputRequest",
    "StoredPrompt",
    "dumped",
]

_CLIENT_TOOLS = ("function", "custom", "namespace", "tool_search", "shell", "apply_patch")
"""The types of the Responses tools the gateway offers (any other is refused, named)."""
_LOADING = ("tool_search_output", ADDITIONAL)
"""The input items whose tools are offered from there on."""
MAX_ITEMS = 2000
"""The input items of one request (a whole history resent fits; a runaway client does not)."""


class InputText(OpenShape):
    type: Literal["input_text"]
    text: LongText


class OutputText(OpenShape):
    type: Literal["output_text"]
    text: LongText
    annotations: list[Any] | None = None


class Refusal(OpenShape):
    type: Literal["refusal"]
    refusal: LongText


class InputImage(OpenShape):
    type: Literal["input_image"]
    image_url: str | None = None
    file_id: str | None = None
    detail: Literal["low", "high", "auto", "original"] | None = None


class InputFile(OpenShape):
    type: Literal["input_file"]
    file_id: Annotated[str, Field(min_length=1)] | None = None
    file_data: Annotated[str, Field(min_length=1)] | None = None
    """The file's data (base64, as a ``data:`` URL); an empty id or data names no file."""
    file_url: str | None = None
    filename: str | None = None


Part = Annotated[
    InputText | OutputText | Refusal | InputImage | InputFile, Field(discriminator="type")
]
Parts = Annotated[list[Part], Field(max_length=MAX_PARTS)]


class MessageItem(OpenShape):
    """A message: the user's (or a system / developer message), or an answer's text."""

    type: Literal["message"] | None = None
    role: Literal["user", "assistant", "system", "developer"]
    content: LongText | Parts
    id: Id | None = None


ToolName = Annotated[str, Field(pattern=r"^[a-zA-Z0-9_-]{1,64}$")]
"""A tool's name, as OpenAI checks it."""


class FunctionCallItem(OpenShape):
    type: Literal["function_call"]
    call_id: Id
    name: Annotated[str, Field(min_length=1, max_length=256)]
    arguments: LongText
    id: Id | None = None
    namespace: ToolName | None = None
    """The namespace tool whose function is called."""


class FunctionCallOutputItem(OpenShape):
    type: Literal["function_call_output"]
    call_id: Id
    output: LongText | Parts
    id: Id | None = None


class ItemReferenceItem(OpenShape):
    """An item of the thread the request continues, named by its id (its ``type`` may be
    left out): the request holds that item, as it was stored, in its place."""

    # without its type, an item with a role is a message (`formats.responses.is_reference`)
    model_config = ConfigDict(
        json_schema_extra={"not": {"required": ["role"], "properties": {"type": {"type": "null"}}}}
    )

    type: Literal["item_reference"] | None = None
    id: Id


KNOWN_TYPES = ("message", "function_call", "function_call_output", "item_reference")


class OtherItem(OpenShape):
    """Any other item (``reasoning``, a hosted tool's call, a custom tool's output): kept
    verbatim; a ``*_output`` item answers the call its ``call_id`` names."""

    type: Annotated[
        str,
        Field(min_length=1, max_length=64, json_schema_extra={"not": {"enum": list(KNOWN_TYPES)}}),
    ]
    call_id: Id | None = None


def _item_kind(value: Any) -> str:
    if isinstance(value, dict):  # as sent: OpenAI's types leave out a message's type, and a
        # reference's
        kind = "item_reference" if is_reference(value) else value.get("type") or "message"
    else:
        kind = getattr(value, "type", None) or (
            "message" if isinstance(value, MessageItem) else "item_reference"
        )
    return kind if kind in KNOWN_TYPES else "other"


InputItem = Annotated[
    Annotated[MessageItem, Tag("message")]
    | Annotated[FunctionCallItem, Tag("function_call")]
    | Annotated[FunctionCallOutputItem, Tag("function_call_output")]
    | Annotated[ItemReferenceItem, Tag("item_reference")]
    | Annotated[OtherItem, Tag("other")],
    Discriminator(_item_kind),
]
Items = Annotated[list[InputItem], Field(min_length=1, max_length=MAX_ITEMS)]


def dumped(items: Sequence[BaseModel]) -> list[dict[str, Any]]:
    """The items as they were sent (the fields left out stay out)."""
    return [item.model_dump(mode="json", exclude_unset=True) for item in items]


class FunctionToolIn(OpenShape):
    type: Literal["function"]
    name: ToolName
    description: str | None = None
    parameters: dict[str, Any] | None = None
    strict: StrictBool | None = None


class CustomToolIn(OpenShape):
    """A tool of free-form text input, maybe in a grammar (``format``), run by the client: the
    upstream is offered a function of one string parameter, ``input``."""

    type: Literal["custom"]
    name: ToolName
    description: str | None = None
    format: dict[str, Any] | None = None


class ToolSearchToolIn(OpenShape):
    """A tool search. The client's (``execution: "client"``; the Codex CLI offers one to the
    models it knows): the upstream is offered a function ``tool_search`` of its
    ``parameters``; the client answers its calls with ``tool_search_output`` items, whose
    tools are offered from then on. The server's (the API's default; the OpenAI Agents SDK's
    `ToolSearchTool()`): the gateway runs it over the tools marked ``defer_loading``."""

    type: Literal["tool_search"]
    execution: Literal["server", "client"] | None = None
    description: str | None = None
    parameters: dict[str, Any] | None = None


class LocalToolIn(OpenShape):
    """A ``shell`` (its ``environment`` ``local``) or an ``apply_patch`` the client runs on its
    machine (the OpenAI Agents SDK's `ShellTool`, `ApplyPatchTool`): the upstream is offered a
    function of that name; a call comes back as a ``shell_call`` or an ``apply_patch_call``. A
    shell in a container (one the server runs) is refused, named."""

    type: Literal["shell", "apply_patch"]
    environment: dict[str, Any] | None = None


class UnservedTool(OpenShape):
    """A tool of another type (a hosted tool such as ``web_search``, which the upstream would
    run): refused with a 400 that names it."""

    type: NotClientTool


class GroupedTool(OpenShape):
    """A tool in a namespace of another type than a function or a custom tool: refused with a
    400 that names it."""

    type: NotFunctionOrCustom


class NamespaceToolIn(OpenShape):
    """Function and custom tools grouped under a name (the Codex CLI sends its agents' tools
    so), run by the client: a call names its ``namespace`` beside its ``name``."""

    type: Literal["namespace"]
    name: ToolName
    description: Annotated[str, Field(max_length=100_000)]
    tools: Annotated[
        list[
            Annotated[
                Annotated[FunctionToolIn, Tag("function")]
                | Annotated[CustomToolIn, Tag("custom")]
                | Annotated[GroupedTool, Tag("other")],
                Discriminator(type_is("function", "custom")),
            ]
        ],
        Field(min_length=1, max_length=128),
    ]


Tool = Annotated[
    Annotated[FunctionToolIn, Tag("function")]
    | Annotated[CustomToolIn, Tag("custom")]
    | Annotated[NamespaceToolIn, Tag("namespace")]
    | Annotated[ToolSearchToolIn, Tag("tool_search")]
    | Annotated[LocalToolIn, Tag("shell")]
    | Annotated[LocalToolIn, Tag("apply_patch")]
    | Annotated[UnservedTool, Tag("other")],
    Discriminator(type_is(*_CLIENT_TOOLS)),
]


class NamedTool(BaseModel):
    """A function or a custom tool the model must call."""

    model_config = ConfigDict(extra="forbid")
    type: Literal["function", "custom"]
    name: Annotated[str, Field(min_length=1, max_length=64)]


class OtherToolChoice(OpenShape):
    """An ``allowed_tools`` choice (checked), or a hosted tool's or an MCP server's, refused
    with a 400 that names it (`chat_options`)."""

    type: NotFunctionOrCustom


ToolChoice = Annotated[
    Annotated[NamedTool, Tag("function")]
    | Annotated[NamedTool, Tag("custom")]
    | Annotated[OtherToolChoice, Tag("other")],
    Discriminator(type_is("function", "custom")),
]


class FormatJSONSchema(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)
    type: Literal["json_schema"]
    name: Annotated[str, Field(pattern=r"^[a-zA-Z0-9_-]{1,64}$")]
    schema_: dict[str, Any] = Field(alias="schema")
    description: str | None = None
    strict: StrictBool | None = None


class TextConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    format: (
        Annotated[
            ResponseFormatText | ResponseFormatJSONObject | FormatJSONSchema,
            Field(discriminator="type"),
        ]
        | None
    ) = None
    verbosity: Literal["low", "medium", "high"] | None = None


class ReasoningConfig(BaseModel):
    model_config = ConfigDict(extra="allow")
    effort: Literal["none", "minimal", "low", "medium", "high", "xhigh", "max"] | None = None
    summary: Literal["auto", "concise", "detailed"] | None = None
    generate_summary: Literal["auto", "concise", "detailed"] | None = None


class ConversationParam(BaseModel):
    id: Annotated[str, Field(json_schema_extra=ID_SCHEMA)]


class ResponseInputRequest(BaseModel):
    """What a request to create a response and a request to count its input tokens share:
    the input, the thread it continues, the instructions and the tools."""

    model_config = ConfigDict(extra="allow")

    model: Annotated[str, Field(max_length=256)] | None = None
    input: str | Items | None = None
    """The user's text, or items: messages, function calls and their outputs, and any other
    item, kept verbatim."""
    instructions: str | None = None
    """This call's system prompt (the memory is still added to it); not carried over to
    the next response, as at OpenAI."""
    previous_response_id: Id | None = None
    conversation: Id | ConversationParam | None = None
    tools: Annotated[list[Tool], Field(max_length=128)] | None = None
    """Function tools, run by the client: their calls come back as ``function_call`` items
    (custom tools, namespaces of them, a client's tool search: as the schema says)."""
    tool_choice: Literal["none", "auto", "required"] | ToolChoice | None = None
    parallel_tool_calls: StrictBool | None = None
    text: TextConfig | None = None
    reasoning: ReasoningConfig | None = None
    metadata: Metadata | None = None
    truncation: Literal["auto", "disabled"] | None = None

    def conversation_id(self) -> str | None:
        """The conversation named, as an id."""
        if isinstance(self.conversation, ConversationParam):
            return self.conversation.id
        return self.conversation

    def items(self) -> list[dict[str, Any]]:
        """The input as items, as sent (a text is one user message; none, no items)."""
        if self.input is None:
            return []
        if isinstance(self.input, str):
            return [{"role": "user", "content": self.input}]
        return dumped(self.input)

    def offered_tools(
        self, carried: list[dict[str, Any]] | None = None
    ) -> tuple[list[dict[str, Any]], dict[str, Offered]]:
        """The tools as the upstream is offered them (`formats.client_tools.offer`): the
        request's, then those the chain it continues loaded (`carried`), then those its
        ``tool_search_output`` and ``additional_tools`` items load."""
        return offer(self.given_tools(), loaded=self.loaded_tools(carried))

    def offers_search(self) -> bool:
        """Whether the request offers a ``tool_search`` (the server's or the client's): the
        one tool that loads others."""
        return any(tool.type == "tool_search" for tool in self.tools or ())

    def given_tools(self) -> list[dict[str, Any]]:
        """The request's ``tools``, as sent."""
        return [tool.model_dump(exclude_unset=True) for tool in self.tools or ()]

    def loaded_tools(self, carried: list[dict[str, Any]] | None = None) -> list[Loaded]:
        """The tools loaded before the request: those the chain it continues loaded
        (`carried`: `StoredResponse.carried_tools`), then those its input's
        ``tool_search_output`` and ``additional_tools`` items load."""
        items = self.input if isinstance(self.input, list) else ()
        return [
            *([Loaded("", carried)] if carried else []),
            *(
                Loaded(f"input[{index}].", item.model_dump(mode="json").get("tools"))
                for index, item in enumerate(items)
                if item.type in _LOADING  # an `OtherItem`: the others' types are known
            ),
        ]

    def sent(self, name: str) -> Any:
        """A field as the client sent it (None when left out)."""
        value = getattr(self, name)
        return (
            value.model_dump(mode="json", exclude_unset=True, by_alias=True)
            if isinstance(value, BaseModel)
            else value
        )


class InputTokenCountRequest(ResponseInputRequest):
    """``POST /v1/responses/input_tokens``: the request whose input tokens to count."""

    model_config = ConfigDict(
        extra="allow",
        json_schema_extra={"examples": [{"model": "gpt-4o-mini", "input": "And in May?"}]},
    )


class ResponseCompactRequest(ResponseInputRequest):
    """``POST /v1/responses/compact``: the conversation to compact (the thread the request
    names, then its input)."""

    model_config = ConfigDict(
        extra="allow",
        json_schema_extra={
            "examples": [
                {
                    "model": "gpt-4o-mini",
                    "input": [
                        {"role": "user", "content": "My budget is 4,000 euros."},
                        {"role": "assistant", "content": "Noted: 4,000 euros."},
                    ],
                }
            ]
        },
    )


class ContextManagement(BaseModel):
    """A ``context_management`` entry: ``compaction``, the one type OpenAI defines (see
    `workingmem.service.server_compaction`)."""

    model_config = ConfigDict(extra="forbid")
    type: Literal["compaction"]
    compact_threshold: Tokens | None = None
    """The input tokens past which a response ends with a compaction item; None: 80% of the
    answering model's context window."""


class StoredPrompt(BaseModel):
    """A ``prompt``: a prompt template stored at OpenAI, by its id, with its variables."""

    model_config = ConfigDict(extra="forbid")
    id: Annotated[str, Field(min_length=1, max_length=256)]
    version: Annotated[str, Field(max_length=64)] | None = None
    variables: dict[str, Any] | None = None


class ResponseCreateRequest(ResponseInputRequest):
    """``POST /v1/responses``: what the model is asked, and which thread it continues."""

    model_config = ConfigDict(
        extra="allow",
        json_schema_extra={
            "examples": [{"model": "gpt-4o-mini", "input": "What did I say my budget was?"}]
        },
    )

    input: str | Items
    """The user's text, or items: messages, function calls and their outputs, and any other
    item, kept verbatim."""
    store: StrictBool = True
    """False keeps no response object (the turns are still the thread's memory)."""
    stream: StrictBool = False
    max_output_tokens: Tokens | None = None
    temperature: float | None = Field(default=None, ge=0, le=2, strict=True)
    top_p: float | None = Field(default=None, ge=0, le=1, strict=True)
    user: Id | None = None
    """The user (deprecated at OpenAI for `safety_identifier`) when no ``X-User-Id`` header
    names one (the header wins, as on every API)."""
    safety_identifier: Annotated[str, Field(max_length=256)] | None = None
    prompt_cache_key: Annotated[str, Field(max_length=256)] | None = None
    prompt_cache_retention: Literal["in_memory", "24h"] | None = None
    prompt_cache_options: dict[str, Any] | None = None
    """OpenAI's prompt-cache settings: an upstream that speaks OpenAI's APIs gets them."""
    service_tier: Literal["auto", "default", "flex", "scale", "priority"] | None = None
    include: Annotated[list[str], Field(max_length=16)] | None = None
    """``message.output_text.logprobs`` asks for the answer's tokens with their log
    probabilities; the others are what the gateway gives anyway (it keeps reasoning items
    whole) or what it has not (server tools' outputs)."""
    top_logprobs: TopLogprobs | None = None
    """The likeliest tokens given at each position, with the logprobs ``include`` asks for."""
    background: Literal[False] | None = None
    """Background responses are not served."""
    prompt: StoredPrompt | None = None
    """Read by an upstream that speaks Responses (OpenAI's, where it is stored); a 400 naming
    it on any other, which could not read it."""
    context_management: Annotated[list[ContextManagement], Field(max_length=8)] | None = None
    """Server-side compaction: a client that resends its history gets a compaction item to
    send in place of what came before it."""

    @property
    def wants_logprobs(self) -> bool:
        """Whether the answer's output text carries its tokens' log probabilities."""
        return LOGPROBS in (self.include or ())


class ConversationCreateRequest(BaseModel):
    """``POST /v1/conversations``."""

    model_config = ConfigDict(extra="forbid")
    items: Annotated[list[InputItem], Field(max_length=20)] | None = None
    """Up to 20 initial items, as at OpenAI."""
    metadata: Metadata | None = None


class ConversationUpdateRequest(BaseModel):
    """``POST /v1/conversations/{id}``."""

    model_config = ConfigDict(extra="forbid")
    metadata: Metadata


class ItemsCreateRequest(BaseModel):
    """``POST /v1/conversations/{id}/items``."""

    model_config = ConfigDict(extra="forbid")
    items: Annotated[list[InputItem], Field(min_length=1, max_length=20)]
