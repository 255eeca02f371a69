"""The exceptions workingmem raises, under one root.

    try:
        loaded = await memory.load(tenant_id="t1", thread_id="th1", ...)
    except wm.NotFoundError:
        ...  # unknown thread, or another tenant's: the same answer

The tree::

    WorkingMemoryError                 every error of this library
    ├── ValidationError                the caller's input is wrong; nothing was stored
    ├── NotFoundError                  no such thread (or not this tenant's)
    ├── ConflictError                  a compare-and-set lost the race; read again and retry
    ├── ContextOverflowError           the current turn alone does not fit the budget
    └── StoreError                     the database failed (the driver's error is the cause)

Caller mistakes (`ValidationError`, `NotFoundError`) are kept apart from runtime failures
(`StoreError`), so a service maps the first to a 4xx and the second to a 5xx.
"""

from __future__ import annotations

__all__ = [
    "ConflictError",
    "ContextOverflowError",
    "NotFoundError",
    "StoreError",
    "ValidationError",
    "WorkingMemoryError",
]


class WorkingMemoryError(Exception):
    """The root of every error this library raises."""


class ValidationError(WorkingMemoryError, ValueError):
    """Input that breaks a documented rule; nothing was stored or changed.

    `field` names the offending value as a path (``messages[2].tool_calls[0].id``), `reason`
    says what is wrong with it.
    """

    def __init__(self, field: str, reason: str) -> None:
        self.field = field
        self.reason = reason
        super().__init__(f"{field}: {reason}")


class NotFoundError(WorkingMemoryError, LookupError):
    """No such thread for this tenant.

    The message is the same whether the thread does not exist or belongs to another tenant, so
    that an error never tells one tenant what another has.
    """

    def __init__(self, kind: str, key: str) -> None:
        self.kind = kind
        self.key = key
        super().__init__(f"{kind} {key!r} not found")


class ConflictError(WorkingMemoryError):
    """A write lost a compare-and-set: someone else wrote first. Read again, then retry."""


class ContextOverflowError(WorkingMemoryError):
    """The current user turn (with the turns that answer it) alone exceeds the budget.

    `tokens` is what it needs, `limit` what the budget allows.
    """

    def __init__(self, tokens: int, limit: int, detail: str = "") -> None:
        self.tokens = tokens
        self.limit = limit
        extra = f" ({detail})" if detail else ""
        super().__init__(
            f"the current turn needs {tokens} tokens but at most {limit} are allowed{extra}"
        )


class StoreError(WorkingMemoryError):
    """The database failed; the driver's exception is chained as the cause."""
