"""The request fields an upstream refuses for some of its models, learned from its 400s.

    refused = RefusedFields()
    answer = await refused.send(model, body, post, own_temperature=True)

Fields every server took once, which some newer models refuse:

- OpenAI's reasoning models (the o-series, GPT-5 and later) refuse ``max_tokens`` ("Use
  'max_completion_tokens' instead") and any ``temperature`` but their default; the other
  models, and the other OpenAI-compatible servers (vLLM, llama.cpp's, Ollama's), take them. So
  the client sends ``max_tokens``, which every server knows, until the upstream refuses it for a
  model; from then on that model's requests carry ``max_completion_tokens``. The gateway's own
  temperature (its summaries' 0) is left out for a model that refuses it; a client's own is the
  client's to change, and the refusal reaches it as it would from the upstream.
- Claude's newer models refuse ``temperature`` and ``top_p`` together ("cannot both be
  specified"), which OpenAI's API takes and its clients send (a chat front end sets both): the
  temperature stays, ``top_p`` goes, for that model from then on.
- A message's fields beyond OpenAI's (a reasoning model's ``reasoning_content`` or
  ``reasoning``, stored with its answer because DeepSeek asks them back: `formats.chat_answer`)
  are refused by stricter servers, some of them for the very models that gave them (Groq:
  "property 'reasoning' is unsupported"): a refusal that names such a field of the messages
  takes it out of every message (and call), for that model from then on. A server that asks
  for the field ("must be passed back") refuses nothing.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from ..formats.chat_answer import CALL_FIELDS, MESSAGE_FIELDS
from .base import LLMError

__all__ = ["RefusedFields", "refuses_tools", "sets_temperature"]

_MAX_TOKENS = "max_tokens"
_COMPLETION_TOKENS = "max_completion_tokens"
_TEMPERATURE = "temperature"
_TOP_P = "top_p"
_REFUSING = re.compile(
    r"unsupported|not supported|not permitted|not allowed|unexpected|unrecognized|unknown",
    re.IGNORECASE,
)
"""How servers refuse a field they do not take (Groq's "is unsupported", pydantic's "Extra
inputs are not permitted", OpenAI's "Additional properties are not allowed ... unexpected")."""
_NO_TOOLS = re.compile(
    r"(does not|doesn't|do not) support (tools|tool use|tool calling|function calling)"
    r"|(tools|tool use|tool calling|function calling)['`\"]? (is |are )?not supported"
    r"|that support tool use"  # a router with no provider of the model that takes tools
    r"|tool choice requires"  # vLLM run without --enable-auto-tool-choice
    r"|tools param requires",  # llama.cpp's server run without --jinja
    re.IGNORECASE,
)
"""How servers refuse a request for its tools: a model without tool calling (Ollama's
"<model> does not support tools"), or a server not run for them."""
T = TypeVar("T")


def refuses_tools(exc: LLMError) -> bool:
    """Whether the upstream refused a call for its tools (the model, or the server as it
    runs, takes none), not for anything the tools could change."""
    return exc.status_code in (400, 404, 422, 500) and _NO_TOOLS.search(str(exc)) is not None


@dataclass
class RefusedFields:
    """What this upstream refused, by model."""

    completion_tokens: set[str] = field(default_factory=set)
    """The models that take ``max_completion_tokens`` in place of ``max_tokens``."""
    default_temperature: set[str] = field(default_factory=set)
    """The models that take no ``temperature`` but their default."""
    one_sampling: set[str] = field(default_factory=set)
    """The models that take ``temperature`` or ``top_p``, not both."""
    message_fields: dict[str, frozenset[str]] = field(default_factory=dict)
    """By model: the fields of its messages (and their calls) beyond OpenAI's it refuses."""

    async def send(
        self,
        model: str,
        body: dict[str, Any],
        send: Callable[[dict[str, Any]], Awaitable[T]],
        *,
        own_temperature: bool,
    ) -> T:
        """`send(body)` in the fields this upstream takes for `model`; once more in its words
        when it refuses one (such a model's first call)."""
        body = self.applied(model, body, own_temperature=own_temperature)
        while True:  # each adaptation takes a field out: a few at most
            try:
                return await send(body)
            except LLMError as exc:
                adapted = self.adapted(model, body, exc, own_temperature=own_temperature)
                if adapted is None:
                    raise
                body = adapted

    def applied(self, model: str, body: dict[str, Any], *, own_temperature: bool) -> dict[str, Any]:
        """`body` in the words this upstream takes for `model`, as learned so far."""
        if model in self.completion_tokens and _MAX_TOKENS in body:
            body = _renamed(body)
        if own_temperature and model in self.default_temperature and _TEMPERATURE in body:
            body = _without(body, _TEMPERATURE)
        if model in self.one_sampling and _TEMPERATURE in body and _TOP_P in body:
            body = _without(body, _TOP_P)
        refused = self.message_fields.get(model)
        if refused and isinstance(body.get("messages"), list):
            body = {**body, "messages": [_message_without(m, refused) for m in body["messages"]]}
        return body

    def adapted(
        self, model: str, body: dict[str, Any], error: LLMError, *, own_temperature: bool
    ) -> dict[str, Any] | None:
        """`body` again, without what `error` says the upstream refuses of it for `model`
        (remembered for its next requests); None when `error` is no such refusal."""
        if error.status_code != 400:
            return None
        said = str(error)
        unsupported = "unsupported" in said.lower() or "not supported" in said
        if unsupported and _MAX_TOKENS in body and _COMPLETION_TOKENS in said:
            self.completion_tokens.add(model)  # "'max_tokens' ... Use 'max_completion_tokens'"
        elif _TEMPERATURE in body and _TOP_P in body and "cannot both" in said:
            self.one_sampling.add(model)
        elif unsupported and own_temperature and _TEMPERATURE in body and "'temperature'" in said:
            self.default_temperature.add(model)
        elif named := _named_own_fields(body, said):
            self.message_fields[model] = self.message_fields.get(model, frozenset()) | named
        else:
            return None
        return self.applied(model, body, own_temperature=own_temperature)


def _named_own_fields(body: Mapping[str, Any], said: str) -> frozenset[str]:
    """The fields of `body`'s messages beyond OpenAI's (and their calls') that the refusal
    `said` names as refused; none when it refuses nothing."""
    if not _REFUSING.search(said):
        return frozenset()
    own: set[str] = set()
    for message in body.get("messages") or ():
        if isinstance(message, Mapping):
            own |= message.keys() - MESSAGE_FIELDS
            own.update(*(c.keys() - CALL_FIELDS for c in _calls(message)))
    return frozenset(name for name in own if re.search(rf"\b{re.escape(name)}\b", said))


def _message_without(message: Any, refused: frozenset[str]) -> Any:
    """`message` without the `refused` fields, its calls' included."""
    if not isinstance(message, Mapping):
        return message
    kept = {k: v for k, v in message.items() if k not in refused}
    if "tool_calls" in kept:
        kept["tool_calls"] = [
            {k: v for k, v in c.items() if k not in refused} for c in _calls(kept)
        ]
    return kept


def _calls(message: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """A message's tool calls that are objects."""
    calls = message.get("tool_calls")
    return [c for c in calls if isinstance(c, Mapping)] if isinstance(calls, list) else []


def _without(body: dict[str, Any], name: str) -> dict[str, Any]:
    return {key: value for key, value in body.items() if key != name}


def _renamed(body: dict[str, Any]) -> dict[str, Any]:
    return {(_COMPLETION_TOKENS if key == _MAX_TOKENS else key): v for key, v in body.items()}


def sets_temperature(temperature: float | None, options: Mapping[str, Any] | None) -> bool:
    """Whether a request's temperature is the gateway's own (the client's comes in `options`)."""
    return temperature is not None and "temperature" not in (options or {})
