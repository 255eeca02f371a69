"""``POST /v1/chat/completions``: OpenAI's endpoint, with the thread's memory.

    client = openai.OpenAI(base_url="http://127.0.0.1:8080/v1", api_key="wm_...")
    client.chat.completions.create(model="gpt-4o-mini", extra_headers={"X-Thread-Id": "th1"},
                                   messages=[{"role": "user", "content": "And in May?"}])

Send only the new message: the gateway stores it, puts the thread's memory in front of the
model and stores the answer. See `workingmem.service.turns` for what a request's messages mean.
The profile: the ``X-Profile`` header, else the profile that `model` names, else ``default``;
`model` (when it names no profile) overrides the profile's upstream model.
"""

from __future__ import annotations

import time
import uuid
from typing import Annotated

from fastapi import APIRouter, Header, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse

from ...messages import check_id
from ..auth import Tenant
from ..disconnect import ClientDisconnectedError, unless_disconnected
from ..errors import ApiError
from ..params import ThreadIdHeader, UserIdHeader
from ..schemas import (
    AssistantMessage,
    ChatCompletion,
    ChatCompletionRequest,
    Choice,
    CompletionUsage,
)
from ..sse import StreamInfo, answer_events, first_piece
from ..state import get_services
from ..turns import plan_turns
from . import BUSY, ERRORS, UPSTREAM

__all__ = ["router"]

router = APIRouter(tags=["chat"], responses=ERRORS)


def _header_text(value: str | None) -> str | None:
    """A header's text: HTTP gives latin-1, clients (httpx, the SDK) send UTF-8 for anything
    beyond ASCII, so a value that is valid UTF-8 is read as UTF-8."""
    if value is None:
        return None
    try:
        return value.encode("latin-1").decode("utf-8")
    except UnicodeError:
        return value


@router.post(
    "/v1/chat/completions",
    response_model=ChatCompletion,
    responses={200: {"content": {"text/event-stream": {}}}, **BUSY, **UPSTREAM},
    summary="Answer the thread's new message, with its memory",
)
async def chat_completions(
    body: ChatCompletionRequest,
    request: Request,
    tenant: Tenant,
    x_thread_id: ThreadIdHeader = None,
    x_user_id: UserIdHeader = None,
    x_profile: Annotated[str | None, Header(alias="X-Profile")] = None,
) -> Response:
    """OpenAI's chat completion; the thread comes from ``X-Thread-Id``."""
    services = get_services(request)
    gateway = services.gateway
    x_thread_id, x_user_id = _header_text(x_thread_id), _header_text(x_user_id)
    x_profile = _header_text(x_profile)
    if x_thread_id is None or not x_thread_id.strip():
        raise ApiError(
            400,
            "missing X-Thread-Id header: name the conversation this message belongs to "
            "(any id of 1-256 printable characters)",
            code="missing_thread_id",
            param="X-Thread-Id",
        )
    thread_id = check_id("X-Thread-Id", x_thread_id)
    user_id = body.user or x_user_id or None
    if user_id is not None:
        check_id("user", user_id)
    turns = plan_turns(body)
    profile, model = gateway.profiles.for_request(x_profile, body.model)
    headers = {"X-Thread-Id": thread_id.encode("utf-8").decode("latin-1")}  # UTF-8 on the wire
    completion_id = f"chatcmpl-{uuid.uuid4().hex}"
    created = int(time.time())
    if body.stream:
        stream = gateway.ask_stream(
            tenant_id=tenant,
            thread_id=thread_id,
            messages=turns.messages,
            user_id=user_id,
            profile=profile,
            system_prompt=turns.system_prompt,
            model=model,
        )
        first = await first_piece(stream)
        info = StreamInfo(
            completion_id=completion_id,
            created=created,
            model=gateway.plan(profile, model=model).model.id,
            include_usage=bool(body.stream_options and body.stream_options.include_usage),
        )
        return StreamingResponse(
            answer_events(stream, first, info, services.metrics),
            media_type="text/event-stream",
            headers={**headers, "Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )
    try:
        result = await unless_disconnected(
            request,
            gateway.ask(
                tenant_id=tenant,
                thread_id=thread_id,
                messages=turns.messages,
                user_id=user_id,
                profile=profile,
                system_prompt=turns.system_prompt,
                model=model,
            ),
        )
    except ClientDisconnectedError:
        return Response(status_code=499)  # nobody reads it: nginx's "client closed request"
    services.metrics.observe_answer(result.usage)
    if result.warnings:
        headers["X-Workingmem-Warnings"] = ",".join(sorted({w.code for w in result.warnings}))
    answer = ChatCompletion(
        id=completion_id,
        created=created,
        model=result.model,
        choices=[
            Choice(
                message=AssistantMessage(content=result.answer),
                finish_reason=result.finish_reason,
            )
        ],
        usage=CompletionUsage(
            prompt_tokens=result.usage.prompt_tokens,
            completion_tokens=result.usage.completion_tokens,
            total_tokens=result.usage.total_tokens,
        ),
    )
    return JSONResponse(answer.model_dump(mode="json"), headers=headers)
