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
    """The turns after the system message, in the shapes the request schema checked: the
    gateway validates them once (its errors name them from 0: see `offset`)."""
    offset: int = 0
    """Where they start in the request's messages (1 after a system message)."""

    def named(self, exc: ValidationError) -> ValidationError:
        """A library error about these turns, its path into the request's own messages."""
        return exc.shifted("messages", self.offset)


def _system_text(message: Message) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    return "\n".join(str(part.get("text", "")) for part in content or ())


def plan_turns(body: ChatCompletionRequest) -> NewTurns:
    """Splits off the system prompt; the turns are the gateway's to validate (once), the
    last one's role included."""
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
        clean.append(message)
    return NewTurns(system_prompt=system, messages=clean, offset=offset)
