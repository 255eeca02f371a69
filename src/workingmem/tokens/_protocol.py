"""The `Tokenizer` protocol: what the rest of workingmem needs to count a window.

    tok = tokenizer_for(ModelInfo(id="gpt-4o", context_window=128_000))
    tok.count_message({"role": "user", "content": "hi"})  # content + role + chat overhead

Kept apart from the implementations so that other modules (and test doubles) can type against
it without importing tiktoken.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from workingmem.types import MessageIn

__all__ = ["Tokenizer"]


@runtime_checkable
class Tokenizer(Protocol):
    """Counts text and chat messages the way one model does.

    The members are read-only properties so that both plain attributes and properties satisfy
    the protocol.
    """

    @property
    def key(self) -> str:
        """A stable cache key, stored next to each turn's count.

        ``tiktoken:o200k_base``, ``tiktoken:cl100k_base``, ``hf:<absolute path of
        tokenizer.json>`` or ``estimate:chars4``. A stored count is reused only while the key
        of the model's tokenizer is unchanged; `tokenizer_from_key` rebuilds the tokenizer.
        """
        ...

    @property
    def exact(self) -> bool:
        """True when text is counted by the model's own tokenizer, False for an estimate."""
        ...

    @property
    def reply_overhead(self) -> int:
        """Tokens the API adds once per request to prime the reply."""
        ...

    def count_text(self, text: str) -> int:
        """The tokens of a plain text, without any chat overhead."""
        ...

    def count_message(self, message: MessageIn) -> int:
        """The tokens of one chat-format message, its per-message overhead included."""
        ...
