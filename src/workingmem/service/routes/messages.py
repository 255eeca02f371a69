"""``POST /v1/messages``: Anthropic's Messages API, with the thread's memory.

    client = anthropic.Anthropic(base_url="http://127.0.0.1:8080", api_key="wm_...")
    client.messages.create(model="claude-sonnet-4-5", max_tokens=1024,
                           messages=[{"role": "user", "content": "And in May?"}],
                           extra_headers={"X-Thread-Id": "trip-42"})

Send the new turns or the whole transcript (Claude Code resends it every call): each turn is
stored once, its blocks verbatim (thinking and its signature included), and the model reads
the thread's memory. The thread: ``X-Thread-Id``, else the conversation the transcript opens,
Claude Code's ``X-Claude-Code-Session-Id`` keeping its sessions apart. In front of a
chat-completions upstream the request and the answer are translated; errors have Anthropic's
shape. In front of an Anthropic upstream (``--upstream-api anthropic``) the request goes on
natively: its fields as they came (``thinking``, ``top_k``, ``stop_sequences``, fields this
gateway does not know), the ``anthropic-version`` and ``anthropic-beta`` headers, the stored
messages verbatim, and the answer's blocks (thinking and its signature) are stored as given.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

from fastapi import APIRouter, Header, Request
from fastapi.responses import JSONResponse, Response

from ...errors import ValidationError
from ...formats import carrying
from ...formats.anthropic import (
    FORMAT,
    answer_item,
    answer_turn,
    blocks_of,
    chat_options,
    chat_tools,
    stop_reason,
    turns_of,
)
from ...formats.anthropic_system import in_force, instructions, output_config
from ...formats.chat_answer import reasoning_of
from ...formats.responses_chat import new_id
from ...gateway import AskResult
from ...llm import Completion
from ...llm.anthropic_client import HEADERS_OPTION, SYSTEM_CACHE_OPTION
from ...llm.usage import to_anthropic
from ...messages import check_id
from ...types import Message, MessageIn, NativeItem
from ..auth import Tenant
from ..disconnect import ClientDisconnectedError, EventStreamResponse, unless_disconnected
from ..message_events import MessageInfo, message_events
from ..messages_schemas import (
    AnthropicErrorResponse,
    MessageCountTokensRequest,
    MessageCreateRequest,
    dumped_messages,
)
from ..params import ASK_HEADERS_DOC, AskHeaders, thread_header
from ..sse import first_event
from ..state import get_services

__all__ = ["RULES", "router"]

RULES = (
    "Messages: the last user or assistant message is the user's (its text, or the "
    "tool_result blocks that answer the tool_use blocks of the assistant message before it), "
    "or an assistant's text after it, which the model goes on from (a prefill); "
    "a `system` message among them is an instruction for the call, joined to the system "
    "prompt and never stored (a block of it that adds or withdraws a tool is a 400). "
    "Tools: client tools only (with an "
    "input_schema); a server tool (a type other than custom), or `mcp_servers` (their tools "
    "run by the upstream), is a 400 that names it. The "
    "newest turns and max_tokens must fit the model's window with the system prompt and the "
    "tools, else a 400."
)
"""What JSON Schema cannot say of a request; published as the operation's description."""

_ERRORS: dict[int | str, dict[str, Any]] = {
    status: {"model": AnthropicErrorResponse, "description": text}
    for status, text in (
        (400, "Bad request: the reason is in the message"),
        (401, "Missing, unknown or revoked API key"),
        (403, "A keyless server's tenant asked for from a non-loopback host"),
        (409, "The thread is busy longer than the wait"),
        (413, "The request body is over the server's limit"),
        (422, "The body or a parameter has the wrong shape"),
        (429, "Rate limited, or the usage guard refused the call"),
        (502, "The upstream model failed"),
        (503, "The database is unavailable"),
    )
}

router = APIRouter(tags=["messages"], responses=_ERRORS)

SessionHeader = Annotated[
    str | None,
    Header(
        alias="X-Claude-Code-Session-Id",
        description="Claude Code's session: sessions that open alike stay apart",
    ),
]


@router.post(
    "/v1/messages",
    responses={200: {"content": {"text/event-stream": {}}}},
    summary="Answer the thread's new turns, with its memory (Anthropic's Messages API)",
    description=RULES,
    openapi_extra=ASK_HEADERS_DOC,
)
async def create_message(
    body: MessageCreateRequest,
    request: Request,
    tenant: Tenant,
    asked: AskHeaders,
    x_claude_code_session_id: SessionHeader = None,
) -> Response:
    """Anthropic's message; the response's ``X-Thread-Id`` names the thread answered."""
    services = get_services(request)
    gateway = services.gateway
    messages = dumped_messages(body)
    turns = turns_of(messages)
    prompt = instructions(body.system_text(), messages)
    user_id = asked.x_user_id or (body.metadata.user_id if body.metadata else None)
    if user_id is not None:
        check_id("user", user_id)
    thread_id = check_id("X-Thread-Id", asked.x_thread_id) if asked.x_thread_id else None
    profile, model = gateway.profiles.for_request(asked.x_profile, body.model)
    info = MessageInfo(message_id=new_id("msg"), model=body.model)
    thinking = _shows_thinking(body)
    native = gateway.native_format == FORMAT
    if (body.model_extra or {}).get("mcp_servers"):
        # Anthropic's API calls them and answers with their tool blocks, as a server tool's
        raise ValidationError(
            "mcp_servers",
            "MCP servers are not served: the upstream would run their tools; give them to the "
            "model as client tools (the client runs them)",
        )
    ask: dict[str, Any] = {
        "tenant_id": tenant,
        "thread_id": thread_id,
        "messages": turns,
        "user_id": user_id,
        "profile": profile,
        "system_prompt": prompt,
        "model": model,
        "tools": chat_tools([t.model_dump(exclude_unset=True) for t in body.tools or ()]),
        "options": (
            _native_options(body, messages, request) if native else _chat_options(body, messages)
        ),
        "max_tokens": body.max_tokens,
        "answer_format": _blocks(thinking),
        "session": x_claude_code_session_id,
    }
    if (asked.x_history or gateway.profiles.get(profile).history) == "client":
        system: list[Message] = [{"role": "system", "content": prompt}] if prompt else []
        sent = [carrying(t.message, t.item if native else None) for t in turns]
        ask["passthrough"] = [*system, *sent]

    async def finish(result: AskResult) -> dict[str, Any]:
        return _message(info, result)

    if body.stream:
        stream = gateway.ask_stream(**ask)
        first = await first_event(stream)
        return EventStreamResponse(
            message_events(
                stream,
                first,
                info,
                finish=finish,
                metrics=services.metrics,
                thinking=thinking,
            ),
            media_type="text/event-stream",
            headers={
                **thread_header(stream.thread_id or ""),
                "Cache-Control": "no-cache",
                "X-Accel-Buffering": "no",
            },
        )
    try:
        result = await unless_disconnected(request, gateway.ask(**ask))
    except ClientDisconnectedError:
        return Response(status_code=499)
    services.metrics.observe_answer(result.usage)
    return JSONResponse(_message(info, result), headers=thread_header(result.thread_id))


def _chat_options(body: MessageCreateRequest, messages: list[dict[str, Any]]) -> dict[str, Any]:
    """What a chat upstream is asked for this request (``thinking`` has no place there)."""
    return chat_options(
        tool_choice=body.tool_choice.model_dump(exclude_none=True) if body.tool_choice else None,
        stop_sequences=body.stop_sequences,
        temperature=body.temperature,
        top_p=body.top_p,
        top_k=body.top_k,
        output_config=output_config(messages, (body.model_extra or {}).get("output_config")),
    )


_FORWARDED_HEADERS = ("anthropic-version", "anthropic-beta")


def _native_options(
    body: MessageCountTokensRequest, messages: list[dict[str, Any]], request: Request
) -> dict[str, Any]:
    """The request's own fields for an Anthropic upstream, as they came: those the gateway
    does not set itself (the model, the messages, the system prompt, the tools, the cap),
    fields it does not know included, and the version and beta headers."""
    fields = body.model_dump(
        mode="json",
        exclude_unset=True,
        exclude={"model", "messages", "system", "tools", "max_tokens", "stream"},
    )
    config = output_config(messages, fields.get("output_config"))
    if config is not None:
        fields["output_config"] = config
    headers = {
        name: request.headers[name] for name in _FORWARDED_HEADERS if name in request.headers
    }
    if headers:
        fields[HEADERS_OPTION] = headers
    blocks = [b.model_dump() for b in body.system] if isinstance(body.system, list) else []
    for _, message in in_force(messages):
        blocks += message["content"] if isinstance(message["content"], list) else []
    marks = [block["cache_control"] for block in blocks if block.get("cache_control")]
    if marks:  # the system prompt the gateway writes keeps the client's cache mark
        fields[SYSTEM_CACHE_OPTION] = marks[-1]
    return fields


def _blocks(thinking: bool) -> Callable[[Message, Completion | None], MessageIn | NativeItem]:
    """How the thread stores the answer: as the Anthropic message a client is shown; an
    Anthropic upstream's own blocks when it gave them (its thinking, signed); a chat
    upstream's thinking as a thinking block first when the request turned `thinking` on."""

    def as_blocks(message: Message, completion: Completion | None) -> MessageIn | NativeItem:
        calls = {str(call["id"]) for call in message.get("tool_calls") or ()}
        native = answer_item(completion.raw if completion else None, calls=calls)
        if native is not None:
            return native
        thought = reasoning_of(completion.own_fields) if thinking and completion else ""
        return answer_turn(message, thinking=thought)

    return as_blocks


def _shows_thinking(body: MessageCreateRequest) -> bool:
    """Whether the request turned thinking on (``enabled``, or ``adaptive`` as the newer
    models take it): only then does the answer carry thinking blocks, as at Anthropic."""
    return (body.thinking or {}).get("type") in ("enabled", "adaptive")


def _message(info: MessageInfo, result: AskResult) -> dict[str, Any]:
    """The answer as Anthropic's Message: the blocks stored, the stop reason, the usage."""
    answer = result.turns[-1].in_format(FORMAT) or {}
    content = blocks_of(answer.get("content"))
    return {
        "id": info.message_id,
        "type": "message",
        "role": "assistant",
        "model": info.model,
        "content": content,
        "stop_reason": stop_reason(result.finish_reason, calls=bool(result.tool_calls)),
        "stop_sequence": None,
        "usage": to_anthropic(result.usage),
    }


@router.post(
    "/v1/messages/count_tokens",
    summary="The input tokens the request would cost upstream, with the memory",
    description=RULES,
    openapi_extra=ASK_HEADERS_DOC,
)
async def count_tokens(
    body: MessageCountTokensRequest,
    request: Request,
    tenant: Tenant,
    asked: AskHeaders,
    x_claude_code_session_id: SessionHeader = None,
) -> dict[str, int]:
    """What `create_message` would send upstream for this transcript now (the memory, the
    new turns, the system prompt, the tools), counted by an Anthropic upstream, else with the
    model's tokenizer: an estimate of 4 characters a token for a model it does not know
    (Claude's tokenizer is not published). Nothing is stored."""
    gateway = get_services(request).gateway
    native = gateway.native_format == FORMAT
    thread_id = check_id("X-Thread-Id", asked.x_thread_id) if asked.x_thread_id else None
    user_id = asked.x_user_id
    if user_id is not None:
        check_id("user", user_id)
    profile, model = gateway.profiles.for_request(asked.x_profile, body.model)
    tools = chat_tools([t.model_dump(exclude_unset=True) for t in body.tools or ()])
    messages = dumped_messages(body)
    tokens = await gateway.count_tokens(
        tenant_id=tenant,
        thread_id=thread_id,
        messages=turns_of(messages),
        user_id=user_id,
        profile=profile,
        system_prompt=instructions(body.system_text(), messages),
        model=model,
        tools=tools,
        session=x_claude_code_session_id,
        options=_native_options(body, messages, request) if native else None,
    )
    return {"input_tokens": tokens}
