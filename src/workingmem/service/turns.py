"""A chat-completion request as turns of a thread.

    turns = plan_turns(body)
    await gateway.ask(..., messages=turns.messages, system_prompt=turns.system_prompt)

The request's messages: an optional leading system (or developer) message, which replaces the
profile's system prompt for this call (the memory is still added to it), then the turns: the
new ones only, or the whole history as the client knows it (the library's placement rule
decides what is new, what an edit or a regenerate replaces). The last is the user's, or the
results of the client's tool calls.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import ValidationError
from ..messages import normalize_messages
from ..types import Message
from .chat_schemas import ChatCompletionRequest
from .errors import ApiError

__all__ = ["NewTurns", "plan_turns"]

_SYSTEM_ROLES = ("system", "developer")


@dataclass(frozen=True, slots=True)
class NewTurns:
    """What one request says of its thread."""

    system_prompt: str | None
    """The leading system message's text; None keeps the profile's prompt."""
    messages: list[Message]
    """The turns after the system message (validated): what the gateway places."""


def _system_text(message: Message) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    return "\n".join(str(part.get("text", "")) for part in content or ())


def plan_turns(body: ChatCompletionRequest) -> NewTurns:
    """Checks the request's messages and splits off the system prompt."""
    messages: list[Message] = [m.model_dump(exclude_none=True) for m in body.messages]
    offset, system = 0, None
    if messages[0]["role"] in _SYSTEM_ROLES:
        system = _system_text(messages[0]) or None
        offset = 1
    clean: list[Message] = []
    for index, message in enumerate(messages[offset:], start=offset):
        if message["role"] in _SYSTEM_ROLES:
            raise ApiError(
                400,
                f"messages[{index}]: only one system message is supported, and it comes first",
                code="invalid_value",
                param=f"messages[{index}].role",
            )
        clean.append(_normalized(message, index))
    if not clean or clean[-1]["role"] not in ("user", "tool"):
        raise ApiError(
            400,
            "the last message must be the user's, or the results of the tool calls before "
            "it: it is what the model answers",
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
