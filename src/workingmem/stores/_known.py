"""What this process last saw of its threads: their turn counts and tokenizers, what an
append needs to write its turns without reading the thread first (`Dialect.append_known`).

Only a hint: the write checks it against the thread's row and does nothing when it is stale
(another writer appended, registered a tokenizer, deleted the thread); the store then appends
the ordinary way and learns the row again. So nothing here is ever invalidated by hand. The
turn count makes a write that was cancelled in flight harmless: if it reaches the database
after a later write, the count it expects is gone, and it writes nothing.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

__all__ = ["Known", "KnownThreads"]


@dataclass(frozen=True, slots=True)
class Known:
    turn_count: int
    tokenizers: str
    """The thread's tokenizers column, as stored."""


class KnownThreads:
    """(tenant id, thread id) -> what was last seen of the thread, for the newest `size`
    threads seen."""

    def __init__(self, size: int = 10_000) -> None:
        self._size = size
        self._seen: OrderedDict[tuple[str, str], Known] = OrderedDict()
        """Oldest first. An OrderedDict forgets its oldest in constant time, where a dict's
        first key is found by scanning past the slots of those deleted before it."""

    def get(self, tenant_id: str, thread_id: str) -> Known | None:
        return self._seen.get((tenant_id, thread_id))

    def saw(self, tenant_id: str, thread_id: str, turn_count: int, tokenizers: str) -> None:
        key = (tenant_id, thread_id)
        self._seen[key] = Known(turn_count, tokenizers)
        self._seen.move_to_end(key)
        if len(self._seen) > self._size:
            self._seen.popitem(last=False)
