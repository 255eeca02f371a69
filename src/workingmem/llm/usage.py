"""`Usage` in each API's shape, read from an upstream's answer and written into the client's.

    usage = from_chat(response.get("usage"))        # an upstream's chat completion
    body["usage"] = to_anthropic(usage)             # a Claude client's Message

One place knows the three shapes, so that what an upstream reports of its prompt cache and of
its reasoning reaches a client of any API: the cached share of the input is what tells a user
that the memory's stable prefix is being cached upstream. The APIs count the input differently:
OpenAI's ``prompt_tokens`` / ``input_tokens`` include the cached ones, Anthropic's
``input_tokens`` are what is left after the cache's reads and writes; `Usage.prompt_tokens` is
all of them. A field an upstream leaves out (or sends as null) is 0; one of the wrong type
raises (`TypeError`, `ValueError`), which the clients report as an answer of the wrong shape.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .base import Usage

__all__ = [
    "from_anthropic",
    "from_chat",
    "from_responses",
    "to_anthropic",
    "to_chat",
    "to_responses",
]


def from_chat(usage: object) -> Usage:
    """A chat completion's ``usage`` (or a stream's usage chunk)."""
    return _from_openai(usage, "prompt", "completion")


def to_chat(usage: Usage) -> dict[str, Any]:
    """`usage` as a chat completion's ``usage``, its details as OpenAI always sends them."""
    return {
        "prompt_tokens": usage.prompt_tokens,
        "completion_tokens": usage.completion_tokens,
        "total_tokens": usage.total_tokens,
        "prompt_tokens_details": {
            "cached_tokens": usage.cached_tokens,
            "cache_write_tokens": usage.cache_write_tokens,
        },
        "completion_tokens_details": {"reasoning_tokens": usage.reasoning_tokens},
    }


def from_responses(usage: object) -> Usage:
    """A Response's ``usage``."""
    return _from_openai(usage, "input", "output")


def to_responses(usage: Usage) -> dict[str, Any]:
    """`usage` as a Response's ``usage``: every field the SDK's `ResponseUsage` requires."""
    return {
        "input_tokens": usage.prompt_tokens,
        "input_tokens_details": {
            "cached_tokens": usage.cached_tokens,
            "cache_write_tokens": usage.cache_write_tokens,
        },
        "output_tokens": usage.completion_tokens,
        "output_tokens_details": {"reasoning_tokens": usage.reasoning_tokens},
        "total_tokens": usage.total_tokens,
    }


def from_anthropic(usage: object) -> Usage:
    """A Message's ``usage``: its ``input_tokens`` leave out the cache's reads and writes."""
    found = _fields(usage)
    read = _count(found, "cache_read_input_tokens")
    written = _count(found, "cache_creation_input_tokens")
    return Usage(
        prompt_tokens=_count(found, "input_tokens") + read + written,
        completion_tokens=_count(found, "output_tokens"),
        cached_tokens=read,
        cache_write_tokens=written,
        reasoning_tokens=_count(_fields(found.get("output_tokens_details")), "thinking_tokens"),
    )


def to_anthropic(usage: Usage) -> dict[str, Any]:
    """`usage` as a Message's ``usage`` (and a stream's last ``message_delta``'s)."""
    uncached = usage.prompt_tokens - usage.cached_tokens - usage.cache_write_tokens
    body: dict[str, Any] = {
        "input_tokens": max(uncached, 0),
        "output_tokens": usage.completion_tokens,
        "cache_creation_input_tokens": usage.cache_write_tokens,
        "cache_read_input_tokens": usage.cached_tokens,
    }
    if usage.reasoning_tokens:
        body["output_tokens_details"] = {"thinking_tokens": usage.reasoning_tokens}
    return body


def _from_openai(usage: object, given: str, made: str) -> Usage:
    """OpenAI's two shapes, which differ in their names alone: ``prompt`` and ``completion``
    (chat completions), ``input`` and ``output`` (Responses)."""
    found = _fields(usage)
    given_details = _fields(found.get(f"{given}_tokens_details"))
    made_details = _fields(found.get(f"{made}_tokens_details"))
    return Usage(
        prompt_tokens=_count(found, f"{given}_tokens"),
        completion_tokens=_count(found, f"{made}_tokens"),
        cached_tokens=_count(given_details, "cached_tokens"),
        cache_write_tokens=_count(given_details, "cache_write_tokens"),
        reasoning_tokens=_count(made_details, "reasoning_tokens"),
    )


def _fields(value: object) -> Mapping[str, Any]:
    """An object of counts; none (or null) is no counts, anything else the wrong shape."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise TypeError(f"usage is {type(value).__name__}, not an object")
    return value


def _count(fields: Mapping[str, Any], name: str) -> int:
    """A count an upstream sent, 0 for none; one that is no number is the wrong shape (the
    clients' `LLMError`), not a count read as 0."""
    return int(fields.get(name) or 0)
