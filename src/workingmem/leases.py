"""Keeping a lease while its holder works: the gateway's thread lock, the updater's lease.

    renewing = asyncio.create_task(keep_renewed(renew, seconds=30.0, what="thread 'th'"))
    try:
        ...  # the work
    finally:
        renewing.cancel()

A lease is short, so a crashed holder frees it within `seconds`; a live one renews it every
third of that, so it never runs out while the work goes on. A renewal that fails is tried again
at the next turn; a lease found lost (it expired and was taken) stops the loop: what the holder
then writes is guarded by its own compare-and-set.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

__all__ = ["keep_renewed"]

logger = logging.getLogger("workingmem.leases")


async def keep_renewed(renew: Callable[[], Awaitable[bool]], *, seconds: float, what: str) -> None:
    """Calls `renew` every `seconds` / 3 until cancelled, or until it says the lease is lost."""
    while True:
        await asyncio.sleep(seconds / 3)
        try:
            held = await renew()
        except Exception:
            logger.warning("%s: the lease could not be renewed; trying again", what)
            continue
        if not held:
            logger.warning("%s: the lease was lost", what)
            return
