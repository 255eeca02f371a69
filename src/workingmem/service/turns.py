"""A chat-completion request as new turns of a thread.

    turns = plan_turns(body)       # 400 for what the service does not support
    await gateway.ask(..., messages=turns.messages, system_prompt=turns.system_prompt)

The request's messages: an optional leading system (or developer) message, which replaces the
profile's system prompt for this call (the memory is still added to it), then user and
assistant turns, the last one the user's. The gateway's overlap rule decides which are new:
a request may carry only the new turns or resend the history, and a retry of a request whose
upstream call failed stores nothing twice. Client-side tools (``tools``, tool turns, assistant
tool calls) are not supported yet.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import ValidationError
from ..messages import normalize_messages
from ..types import Message
from .errors import ApiError
from .schemas import ChatCompletionRequest

__all__ = ["NewTurns", "plan_turns"]

_SYSTEM_ROLES = ("system", "developer")


@dataclass(frozen=True, slots=True)
class NewTurns:
    """What one request adds to its thread."""

    system_prompt: str | None
    """The leading system message's text; None keeps the profile's prompt."""
    messages: list[Message]
    """The turns after the system message (validated), the user's last: what the gateway's
    overlap rule reads."""


def _unsupported(message: str, param: str) -> ApiError:
    return ApiError(400, message, code="unsupported_parameter", param=param)


def _refuse_unsupported(body: ChatCompletionRequest) -> None:
    if body.tools or body.functions or body.tool_choice not in (None, "none"):
        raise _unsupported(
            "client-side tools are not supported yet: send the request without tools "
            "(the gateway's own working-memory tools run on the server)",
            "tools",
        )
    if body.function_call not in (None, "none"):
        raise _unsupported("client-side tools are not supported yet", "function_call")
    if body.n not in (None, 1):
        raise _unsupported(f"only n=1 is supported, got n={body.n}", "n")
    if body.response_format and body.response_format.get("type", "text") != "text":
        raise _unsupported("only response_format {'type': 'text'} is supported", "response_format")


def _system_text(message: Message) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [p.get("text") for p in content if isinstance(p, dict) and p.get("type") == "text"]
        if all(isinstance(text, str) for text in parts):
            return "\n".join(str(text) for text in parts)
    raise ValidationError("messages[0].content", "a system message needs text content")


def plan_turns(body: ChatCompletionRequest) -> NewTurns:
    """Checks the request's messages and splits off the system prompt."""
    _refuse_unsupported(body)
    messages: list[Message] = [m.model_dump(exclude_none=True) for m in body.messages]
    offset, system = 0, None
    if messages[0]["role"] in _SYSTEM_ROLES:
        system = _system_text(messages[0]) or None
        offset = 1
    clean: list[Message] = []
    for index, message in enumerate(messages[offset:], start=offset):
        role = message["role"]
        if role in _SYSTEM_ROLES:
            raise ApiError(
                400,
                f"messages[{index}]: only one system message is supported, and it comes first",
                code="invalid_value",
                param=f"messages[{index}].role",
            )
        if role in ("tool", "function") or message.get("tool_calls"):
            raise _unsupported(
                f"messages[{index}]: client-side tools are not supported yet (no tool turns, "
                "no assistant tool calls)",
                f"messages[{index}]",
            )
        clean.append(_normalized(message, index))
    if not clean or clean[-1]["role"] != "user":
        raise ApiError(
            400,
            "the last message must be the user's: it is the turn the model answers",
            code="invalid_value",
            param="messages",
        )
    return NewTurns(system_prompt=system, messages=clean)


def _normalized(message: Message, index: int) -> Message:
    """The library's validation, with the error's path pointing into the request."""
    try:
        (clean,) = normalize_messages([message])
    except ValidationError as exc:
        field = exc.field.replace("messages[0]", f"messages[{index}]", 1)
        raise ValidationError(field, exc.reason) from exc
    return clean
