"""Usage guards: may this call be made, and what did it spend (R10).

    guard = TokenBudgetGuard(tenant_budgets={"t1": 50_000}, default_budget=200_000)
    client = GuardedClient(OpenAIClient(), guard=guard)
    guard.spent("t1")  # tokens t1's calls used so far, in this process

A guard sees every call a `GuardedClient` makes, before it is sent (`check`) and after it
answered (`record`). A refusal is a reason string, never an exception from the guard itself:
the client turns it into `UsageRefusedError`, and the summarizer into "no update, a report".
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Protocol, runtime_checkable

from ..errors import ValidationError
from .base import CallMeta, Usage

__all__ = ["AllowAllGuard", "TokenBudgetGuard", "UsageGuard"]


@runtime_checkable
class UsageGuard(Protocol):
    """Decides whether a call may be made, and learns what each call spent."""

    async def check(self, meta: CallMeta) -> str | None:
        """None allows the call; a string refuses it and says why."""
        ...

    async def record(self, meta: CallMeta, usage: Usage) -> None:
        """Called once after each call that answered, with the tokens it spent."""
        ...


class AllowAllGuard:
    """Refuses nothing and records nothing: the guard of a host that meters elsewhere."""

    async def check(self, meta: CallMeta) -> str | None:
        return None

    async def record(self, meta: CallMeta, usage: Usage) -> None:
        return None


class TokenBudgetGuard:
    """A total-token budget per tenant, counted in this process.

    A tenant with no budget of its own gets `default_budget`; with neither, it is not limited.
    A call is refused once the tenant has spent at least its budget, so a budget is a soft
    cap: the call that crosses it is allowed, and calls already in flight still count. The
    counts live in memory: a restart, or another worker, starts from zero (a host that needs
    a shared budget implements `UsageGuard` over its own store).
    """

    def __init__(
        self,
        *,
        tenant_budgets: Mapping[str, int] | None = None,
        default_budget: int | None = None,
    ) -> None:
        budgets = dict(tenant_budgets or {})
        for tenant_id, budget in budgets.items():
            _check_budget(f"tenant_budgets[{tenant_id!r}]", budget)
        if default_budget is not None:
            _check_budget("default_budget", default_budget)
        self._budgets = budgets
        self._default = default_budget
        self._spent: dict[str, int] = {}
        self._lock = threading.Lock()

    def budget(self, tenant_id: str) -> int | None:
        """The tenant's budget in tokens; None when it is not limited."""
        return self._budgets.get(tenant_id, self._default)

    def spent(self, tenant_id: str) -> int:
        """The tokens the tenant's calls spent since this guard was made (or reset)."""
        with self._lock:
            return self._spent.get(tenant_id, 0)

    def reset(self, tenant_id: str | None = None) -> None:
        """Starts a new period: forgets what one tenant (or, with None, every tenant) spent."""
        with self._lock:
            if tenant_id is None:
                self._spent.clear()
            else:
                self._spent.pop(tenant_id, None)

    async def check(self, meta: CallMeta) -> str | None:
        budget = self.budget(meta.tenant_id)
        if budget is None:
            return None
        spent = self.spent(meta.tenant_id)
        if spent >= budget:
            return f"tenant {meta.tenant_id!r} spent {spent} of its {budget}-token budget"
        return None

    async def record(self, meta: CallMeta, usage: Usage) -> None:
        with self._lock:
            self._spent[meta.tenant_id] = self._spent.get(meta.tenant_id, 0) + usage.total_tokens


def _check_budget(field: str, budget: int) -> None:
    if isinstance(budget, bool) or not isinstance(budget, int) or budget < 0:
        raise ValidationError(field, f"a budget is a whole number of tokens >= 0, got {budget!r}")
