"""`keep_renewed`: a lease renewed every third of its time while its holder works; a failed
renewal is tried again, a lease found lost ends the loop, and cancelling it stops it."""

from __future__ import annotations

import asyncio
import logging

import pytest

from workingmem.leases import keep_renewed


async def test_a_failed_renewal_is_tried_again_and_a_lost_lease_ends_the_loop(
    caplog: pytest.LogCaptureFixture,
) -> None:
    answers: list[bool | Exception] = [OSError("the database went away"), True, True, False]
    asked: list[int] = []

    async def renew() -> bool:
        asked.append(len(asked))
        answer = answers[len(asked) - 1]
        if isinstance(answer, Exception):
            raise answer
        return answer

    with caplog.at_level(logging.WARNING, logger="workingmem.leases"):
        await asyncio.wait_for(keep_renewed(renew, seconds=0.03, what="thread 'th'"), 10)
    assert asked == [0, 1, 2, 3]  # on after the failure, and no renewal after the loss
    said = [record.getMessage() for record in caplog.records]
    assert said == [
        "thread 'th': the lease could not be renewed; trying again",
        "thread 'th': the lease was lost",
    ]


async def test_cancelling_stops_the_renewals() -> None:
    renewed = asyncio.Event()

    async def renew() -> bool:
        renewed.set()
        return True

    renewing = asyncio.create_task(keep_renewed(renew, seconds=0.03, what="lease"))
    await asyncio.wait_for(renewed.wait(), 10)  # it renews while held
    renewing.cancel()
    with pytest.raises(asyncio.CancelledError):
        await renewing
    assert renewing.cancelled()
