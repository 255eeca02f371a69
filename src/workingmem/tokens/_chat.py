"""The chat overhead: how a chat-format message turns into tokens around its text.

    class Words(ChatTokenizer):
        def count_text(self, text: str) -> int:
            return len(text.split())

    Words(key="words", exact=False).count_message({"role": "user", "content": "hi there"})  # 6

`ChatTokenizer` implements `count_message` once, over an abstract `count_text`, so that the
tiktoken, Hugging Face and estimate tokenizers agree on the message shape and differ only in
how they count text.

The rules follow OpenAI's cookbook "How to count tokens with tiktoken", whose formula matches
the API's ``usage.prompt_tokens`` exactly for text-only messages (129 tokens for its example
with gpt-4 / gpt-3.5-turbo, 124 with gpt-4o / gpt-4o-mini): each message costs
`TOKENS_PER_MESSAGE` (``<|start|>``, ``<|message|>``, ``<|end|>``) plus the tokens of its role
and content; a ``name`` costs its tokens plus `TOKENS_PER_NAME`; every request costs
`REPLY_PRIMING` once (``<|start|>assistant<|message|>``).

What OpenAI does not publish is estimated, and documented at each constant:

- image parts: `IMAGE_LOW_DETAIL` / `IMAGE_HIGH_DETAIL` (the image is not fetched);
- file and audio parts: a PDF by its pages, a text file by its text, audio by its length
  (`workingmem.tokens._media`: their base64 is not what the model reads);
- other non-text parts: the tokens of the part's JSON serialisation;
- assistant ``tool_calls`` (and the legacy ``function_call``): per call, the tokens of the
  function's name and of its arguments text, plus `TOOL_CALL_OVERHEAD`.

So a window of text-only messages is counted exactly; tool calls and non-text parts are
approximations. A tool message counts like any other (role + content + overhead); its
``tool_call_id`` is not shown to the model as text and is not counted.
"""

from __future__ import annotations

import abc
import json
from collections.abc import Mapping
from typing import Any

from workingmem.tokens._media import audio_tokens, file_tokens
from workingmem.types import MessageIn

__all__ = [
    "IMAGE_HIGH_DETAIL",
    "IMAGE_LOW_DETAIL",
    "REPLY_PRIMING",
    "TOKENS_PER_MESSAGE",
    "TOKENS_PER_NAME",
    "TOOL_CALL_OVERHEAD",
    "ChatTokenizer",
]

TOKENS_PER_MESSAGE = 3
"""Tokens around every message of gpt-3.5-turbo-0613+, gpt-4*, gpt-4o*, o-series (cookbook)."""

TOKENS_PER_NAME = 1
"""Extra tokens when a message has a ``name``, on top of the name's own tokens (cookbook)."""

REPLY_PRIMING = 3
"""Tokens added once per request: ``<|start|>assistant<|message|>`` (cookbook)."""

IMAGE_LOW_DETAIL = 85
"""An ``image_url`` part with ``detail: "low"``: OpenAI's flat 85 tokens (vision pricing)."""

IMAGE_HIGH_DETAIL = 765
"""Any other ``image_url`` part, since the image is not fetched to measure it: a 1024x1024
high-detail image, scaled to 768x768 = 4 tiles of 512px, so 85 + 4 x 170 = 765 tokens under
OpenAI's gpt-4o vision pricing. Larger images cost more, smaller ones less."""

TOOL_CALL_OVERHEAD = 3
"""Tokens per tool call on top of the name and arguments. OpenAI does not publish the formula;
3 is what hmarr/openai-chat-tokens fitted against the API's counts for the legacy
``function_call`` (LangChain's `get_num_tokens_from_messages` counts name + arguments and no
overhead; we keep the 3 so that a budget errs on the safe side)."""


class ChatTokenizer(abc.ABC):
    """A tokenizer that counts messages with the chat overhead above, over its `count_text`.

    Args:
        key: The stable cache key (see `Tokenizer.key`).
        exact: Whether `count_text` is the model's own tokenizer.
        tokens_per_message: The fixed tokens around each message.
        tokens_per_name: The extra tokens of a ``name`` field.
        reply_overhead: The tokens added once per request.
    """

    def __init__(
        self,
        *,
        key: str,
        exact: bool,
        tokens_per_message: int = TOKENS_PER_MESSAGE,
        tokens_per_name: int = TOKENS_PER_NAME,
        reply_overhead: int = REPLY_PRIMING,
    ) -> None:
        self.key = key
        self.exact = exact
        self.tokens_per_message = tokens_per_message
        self.tokens_per_name = tokens_per_name
        self.reply_overhead = reply_overhead
        # Roles are a handful of short strings: counting each once keeps appends cheap.
        self._role_tokens: dict[str, int] = {}

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.key}>"

    @abc.abstractmethod
    def count_text(self, text: str) -> int:
        """The tokens of a plain text, without any chat overhead."""

    def count_message(self, message: MessageIn) -> int:
        """The tokens of one chat-format message, its per-message overhead included.

        Args:
            message: An OpenAI chat-format message (``role``, ``content``, optional ``name``,
                ``tool_calls``, ``tool_call_id``); a system or developer message counts too.

        Returns:
            The overhead, the role, the content, the name and the tool calls, in tokens. Keys
            the model does not read as text (``tool_call_id``, unknown keys) add nothing.
        """
        tokens = self.tokens_per_message
        role = message.get("role")
        if isinstance(role, str):
            role_tokens = self._role_tokens.get(role)
            if role_tokens is None:
                role_tokens = self._role_tokens[role] = self.count_text(role)
            tokens += role_tokens
        content = message.get("content")
        if content is not None:
            tokens += self._count_content(content)
        name = message.get("name")
        if name:
            tokens += self.count_text(str(name)) + self.tokens_per_name
        tool_calls = message.get("tool_calls")
        if tool_calls:
            for call in tool_calls:
                tokens += self._count_tool_call(call)
        function_call = message.get("function_call")
        if function_call:
            tokens += self._count_function(function_call)
        return tokens

    def _count_content(self, content: Any) -> int:
        if isinstance(content, str):
            return self.count_text(content)
        if isinstance(content, list):
            return sum(self._count_part(part) for part in content)
        return self.count_text(_to_json(content))

    def _count_part(self, part: Any) -> int:
        if isinstance(part, str):
            return self.count_text(part)
        if isinstance(part, Mapping):
            kind = part.get("type")
            if kind == "text" and isinstance(part.get("text"), str):
                return self.count_text(part["text"])
            if kind == "refusal" and isinstance(part.get("refusal"), str):
                return self.count_text(part["refusal"])
            if kind == "image_url":
                image = part.get("image_url")
                detail = image.get("detail") if isinstance(image, Mapping) else None
                return IMAGE_LOW_DETAIL if detail == "low" else IMAGE_HIGH_DETAIL
            if kind == "file":
                return file_tokens(part.get("file"), self.count_text)
            if kind == "input_audio":
                return audio_tokens(part.get("input_audio"))
        return self.count_text(_to_json(part))

    def _count_tool_call(self, call: Any) -> int:
        function = call.get("function") if isinstance(call, Mapping) else None
        if isinstance(function, Mapping):
            return self._count_function(function)
        # A call of another type ("custom" tools, ...): its JSON, documented as an estimate.
        return TOOL_CALL_OVERHEAD + self.count_text(_to_json(call))

    def _count_function(self, function: Any) -> int:
        if not isinstance(function, Mapping):
            return TOOL_CALL_OVERHEAD + self.count_text(_to_json(function))
        name = function.get("name") or ""
        arguments = function.get("arguments") or ""
        if not isinstance(arguments, str):
            arguments = _to_json(arguments)
        return TOOL_CALL_OVERHEAD + self.count_text(str(name)) + self.count_text(arguments)


def _to_json(value: Any) -> str:
    """The compact JSON text of a value we can only estimate; `str` for what JSON refuses."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)
