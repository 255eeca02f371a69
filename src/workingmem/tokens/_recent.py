"""The counts of the texts a tokenizer counted last, so that a text counted again costs a look-up.

    self._count = RecentCounts(lambda text: len(encode(text)))
    self._count("You are a helpful assistant...")   # encoded
    self._count("You are a helpful assistant...")   # found: a hash and a comparison

Requests count the same texts over and over: the client's system prompt and tool definitions
on every call, the thread memory's notes until the next update, a question when its window is
chosen and again when it is stored. A tokenizer reads every character (o200k_base: 0.15 ms for
2,000 characters, 2 ms for 40,000); finding a text counted before hashes and compares it.

Counts are kept per tenant, and only where the caller says whose counting it is
(`counting_for`, as the gateway does for each ask): a count that came quicker because another
tenant had counted the same text would tell that tenant's texts to anyone who can time a
request. Outside a scope every text is counted.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

__all__ = ["RecentCounts", "counting_for", "counting_scope"]

MIN_CHARS = 32
"""Shorter texts are counted every time: a few microseconds, less than keeping them."""
MAX_CHARS = 1 << 20
"""The characters the counts keep, all texts together (a text longer than this is not kept)."""

_SCOPE: ContextVar[str | None] = ContextVar("workingmem_count_scope", default=None)


@contextmanager
def counting_for(scope: str) -> Iterator[None]:
    """Counts made meanwhile (in this task, and in what it awaits) are kept for `scope` (a
    tenant's id) and found only by it."""
    token = _SCOPE.set(scope)
    try:
        yield
    finally:
        _SCOPE.reset(token)


def counting_scope() -> str | None:
    """Whose counting it is now (`counting_for`), or None outside any scope: for another
    cache that must be kept per tenant for the same reason."""
    return _SCOPE.get()


class RecentCounts:
    """`count` with the counts of the last texts it counted within a scope (`counting_for`),
    up to `max_chars` characters in all, the oldest forgotten first. Safe from any thread: a
    look-up takes no lock, a new count is kept under one."""

    def __init__(
        self, count: Callable[[str], int], *, max_chars: int = MAX_CHARS, min_chars: int = MIN_CHARS
    ) -> None:
        self._count = count
        self._max_chars = max_chars
        self._min_chars = min_chars
        self._counts: OrderedDict[tuple[str, str], int] = OrderedDict()  # oldest first
        self._chars = 0
        self._lock = threading.Lock()

    def __call__(self, text: str) -> int:
        scope = _SCOPE.get()
        if scope is None or not self._min_chars <= len(text) <= self._max_chars:
            return self._count(text)
        key = (scope, text)
        found = self._counts.get(key)
        if found is not None:
            return found
        counted = self._count(text)
        with self._lock:
            if key not in self._counts:
                self._counts[key] = counted
                self._chars += len(text)
                while self._chars > self._max_chars:
                    (_, oldest), _ = self._counts.popitem(last=False)
                    self._chars -= len(oldest)
        return counted
