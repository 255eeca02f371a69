"""``POST /v1/chat/completions``: OpenAI's endpoint, with the thread's memory.

    client = openai.OpenAI(base_url="http://127.0.0.1:8080/v1", api_key="wm_...")
    client.chat.completions.create(model="gpt-4o-mini", extra_headers={"X-Thread-Id": "th1"},
                                   messages=[{"role": "user", "content": "And in May?"}])

Send the new turns, or the whole history: the gateway stores what is new, puts the thread's
memory in front of the model and stores the answer; the client's own tools come back to it as
``tool_calls``. See `workingmem.service.turns` for what a request's messages mean; every field
the gateway does not act on reaches the upstream as it was sent.
The profile: the ``X-Profile`` header, else the profile that `model` names, else ``default``;
`model` (when it names no profile) overrides the profile's upstream model.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response

from ...errors import ValidationError
from ...formats.chat_custom_tools import function_choice, offered_functions
from ...formats.responses_chat import native_output, new_id
from ...llm import Completion
from ...messages import check_id
from ...types import Message, MessageIn, NativeItem
from ..auth import Tenant
from ..chat_response import completion_body
from ..chat_schemas import (
    ORDER_RULES,
    ChatCompletion,
    ChatCompletionRequest,
    forwarded,
    unserved,
)
from ..disconnect import ClientDisconnectedError, EventStreamResponse, unless_disconnected
from ..errors import ApiError
from ..params import ASK_HEADERS_DOC, AskHeaders, thread_header
from ..sse import StreamInfo, answer_events, first_chat_piece
from ..state import get_services
from ..turns import plan_turns
from . import BUSY, ERRORS, UPSTREAM
from .stored_completions import Keeper

__all__ = ["router"]

router = APIRouter(tags=["chat"], responses=ERRORS)


@router.post(
    "/v1/chat/completions",
    response_model=ChatCompletion,
    responses={200: {"content": {"text/event-stream": {}}}, **BUSY, **UPSTREAM},
    summary="Answer the thread's new turns, with its memory",
    description=ORDER_RULES,
    openapi_extra=ASK_HEADERS_DOC,
)
async def chat_completions(
    body: ChatCompletionRequest,
    request: Request,
    tenant: Tenant,
    asked: AskHeaders,
) -> Response:
    """OpenAI's chat completion; the thread comes from ``X-Thread-Id``, else from
    ``metadata.thread_id``, else it is the conversation the messages open (a front end that
    resends the whole history needs no id); the response's ``X-Thread-Id`` names it."""
    services = get_services(request)
    gateway = services.gateway
    thread_id = _thread_id(asked.x_thread_id, body)
    user_id = asked.x_user_id or body.user or None  # the gateway's header first, on every API
    if user_id is not None:
        check_id("user", user_id)
    if body.stream and (body.n or 1) > 1:
        raise ApiError(
            400,
            "n > 1 is served without stream: ask for one choice, or do not stream",
            code="unsupported_parameter",
            param="n",
        )
    unserved(body)
    turns = plan_turns(body)
    given = [tool.model_dump(mode="json", exclude_unset=True) for tool in body.tools or ()]
    tools, custom = offered_functions(given)
    options = forwarded(body)
    if "tool_choice" in options:
        options["tool_choice"] = function_choice(options["tool_choice"])
    profile, model = gateway.profiles.for_request(asked.x_profile, body.model)
    completion_id = f"chatcmpl-{uuid.uuid4().hex}"
    created = int(time.time())
    ask: dict[str, Any] = {
        "tenant_id": tenant,
        "thread_id": thread_id,
        "messages": turns.messages,
        "user_id": user_id,
        "profile": profile,
        "system_prompt": turns.system_prompt,
        "model": model,
        "tools": tools,
        "options": options,
        "max_tokens": body.max_completion_tokens or body.max_tokens,
        "answer_format": _as_given,
    }
    if (asked.x_history or gateway.profiles.get(profile).history) == "client":
        raw = await request.json()  # the client's messages as it sent them, system included
        ask["passthrough"] = raw["messages"]
    keep = (
        Keeper(services, tenant, completion_id, created, body, request, custom)
        if body.store
        else None
    )
    if body.stream:
        stream = gateway.ask_stream(**ask)
        try:
            first = await first_chat_piece(stream)
        except ValidationError as exc:
            raise turns.named(exc) from exc
        headers = thread_header(stream.thread_id or "")
        info = StreamInfo(
            completion_id=completion_id,
            created=created,
            model=gateway.plan(profile, model=model).model.id,
            include_usage=bool(body.stream_options and body.stream_options.include_usage),
            custom=custom,
        )
        return EventStreamResponse(
            answer_events(stream, first, info, services.metrics, keep),
            media_type="text/event-stream",
            headers={**headers, "Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )
    try:
        result = await unless_disconnected(request, gateway.ask(**ask))
    except ClientDisconnectedError:
        return Response(status_code=499)  # nobody reads it: nginx's "client closed request"
    except ValidationError as exc:
        raise turns.named(exc) from exc
    services.metrics.observe_answer(result.usage)
    headers = thread_header(result.thread_id)
    if result.warnings:
        headers["X-Workingmem-Warnings"] = ",".join(sorted({w.code for w in result.warnings}))
    if keep is not None:
        answer = await keep(result)
    else:
        answer = completion_body(
            result, completion_id=completion_id, created=created, custom=custom
        )
    return JSONResponse(answer, headers=headers)


def _as_given(message: Message, completion: Completion | None) -> MessageIn | NativeItem:
    """The answer as stored: as its upstream gave it when that speaks Responses (its
    reasoning goes back upstream with the window), else the chat message (with what a chat
    upstream asks back: `formats.chat_answer`)."""
    native = native_output(completion, message, message_id=new_id("msg"))
    return native if native is not None else message


def _thread_id(header: str | None, body: ChatCompletionRequest) -> str | None:
    """The thread a request names: its ``X-Thread-Id``, else its ``metadata.thread_id``; None
    lets the gateway find the conversation by how it opens."""
    if header is not None and header.strip():
        return check_id("X-Thread-Id", header)
    named = (body.metadata or {}).get("thread_id")
    if named is not None:
        return check_id("metadata.thread_id", named)
    return None
