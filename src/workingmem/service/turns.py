"""A chat-completion request as turns of a thread.

    turns = plan_turns(body)
    await gateway.ask(..., messages=turns.messages, system_prompt=turns.system_prompt)

The request's messages: the turns, and system (or developer) messages anywhere among them. The
system messages are the call's instructions, not turns: their texts, in order, replace the
profile's system prompt for this call (the memory is still added to it), and none is stored. A
client sends them again with every call (a leading one, a reminder after the user's message as
aider sends it, a note a few turns back as role-play front ends do), so stored they would be
turns of the thread that move each call, read as edits. The turns are the new ones only, or the
whole history as the client knows it (the library's placement rule decides what is new, what
an edit or a regenerate replaces). The last is the user's, the results of the client's tool
calls, or an assistant's text after them that the model goes on from. A call of a custom tool
is stored as the function call its tool is offered as (`formats.chat_custom_tools`).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import ValidationError
from ..formats import joined_instructions
from ..formats.chat_answer import answer_item, own_fields
from ..formats.chat_custom_tools import with_function_calls
from ..types import Message, MessageIn, NativeItem
from .chat_schemas import ChatCompletionRequest

__all__ = ["NewTurns", "plan_turns"]

_SYSTEM_ROLES = ("system", "developer")


@dataclass(frozen=True, slots=True)
class NewTurns:
    """What one request says of its thread."""

    system_prompt: str | None
    """The system messages' texts, joined in order; None keeps the profile's prompt."""
    messages: list[MessageIn | NativeItem]
    """The turns, in the shapes the request schema checked: the gateway validates them once
    (its errors name them from 0: see `places`); an assistant message with fields of its
    upstream's own, resent, as a chat item beside its view."""
    places: tuple[int, ...] = ()
    """Each turn's index in the request's messages."""

    def named(self, exc: ValidationError) -> ValidationError:
        """A library error about these turns, its path into the request's own messages."""
        places = self.places
        return exc.renumbered("messages", lambda i: places[i] if i < len(places) else i)


def _system_text(message: Message) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    return "\n".join(str(part.get("text", "")) for part in content or ())


def plan_turns(body: ChatCompletionRequest) -> NewTurns:
    """Takes the system messages out as the call's system prompt; the turns are the gateway's
    to validate (once), the last one's role included."""
    texts: list[str] = []
    turns: list[MessageIn | NativeItem] = []
    places: list[int] = []
    for index, model in enumerate(body.messages):
        message: Message = model.model_dump(exclude_none=True)
        if message["role"] in _SYSTEM_ROLES:
            texts.append(_system_text(message))
            continue
        if message["role"] == "assistant":
            turns.append(_with_own_fields(with_function_calls(message)))
        else:
            turns.append(message)
        places.append(index)
    return NewTurns(joined_instructions(*texts), turns, tuple(places))


def _with_own_fields(message: Message) -> MessageIn | NativeItem:
    """An assistant message as stored: with the fields of its upstream's own that the client
    resent (its thinking, a call's signature) kept beside its view (`formats.chat_answer`), so
    that a history the thread does not hold yet goes to the upstream as the upstream gave it;
    the message itself when it has none."""
    fields = own_fields(message)
    said: Message = {k: v for k, v in message.items() if k not in fields}
    return answer_item(said, fields or None)
