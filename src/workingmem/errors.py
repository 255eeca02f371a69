"""The exceptions workingmem raises, under one root.

    try:
        loaded = await memory.load(tenant_id="t1", thread_id="th1", ...)
    except wm.NotFoundError:
        ...  # unknown thread, or another tenant's: the same answer

The tree (the README copies it; a test checks the two match)::

    WorkingMemoryError
    ├── ValidationError        bad input; nothing stored (.field, .reason)          HTTP 400
    ├── NotFoundError          no such thread for this tenant (another tenant's too) HTTP 404
    ├── ConflictError          a compare-and-set lost; read again and retry          HTTP 409
    ├── ContextOverflowError   the current turn alone exceeds the budget             HTTP 400
    ├── LLMError               the upstream failed after retries (.status_code)      its status
    ├── UsageRefusedError      the usage guard refused a model call                  HTTP 429
    ├── InvalidOutputError     the cheap model's update is not valid (Summarizer)    never: reported
    └── StoreError             the database failed                                   HTTP 503

`LLMError` and `UsageRefusedError` live with the model client (`workingmem.llm`),
`InvalidOutputError` with the `Summarizer` (an update reports it, never raises it), the others
here; all are exported by ``workingmem``. The HTTP column is what the service answers.
Caller mistakes (`ValidationError`, `NotFoundError`) are kept apart from runtime failures
(`StoreError`), so a service maps the first to a 4xx and the second to a 5xx.
"""

from __future__ import annotations

from collections.abc import Callable

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

    def shifted(self, name: str, by: int) -> ValidationError:
        """The same error with the index of `name` (``messages[3]...``) moved by `by`: for a
        caller that validated a slice of a longer list and names the place in the whole."""
        return self.renumbered(name, lambda index: index + by) if by else self

    def renumbered(self, name: str, place: Callable[[int], int]) -> ValidationError:
        """The same error with the index of `name` (``messages[3]...``) mapped by `place`: for
        a caller that validated some items of a longer list and names their places in it."""
        prefix = f"{name}["
        if not self.field.startswith(prefix):
            return self
        index, _, rest = self.field[len(prefix) :].partition("]")
        if not index.isdigit():
            return self
        return ValidationError(f"{prefix}{place(int(index))}]{rest}", self.reason)


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
