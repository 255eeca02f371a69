"""A turn carries its time: the moment it was stored, or the time a host gives when it imports
a history (`append(created_at=...)`), kept exactly and read back, on both backends; a time
that cannot be a turn's is a `ValidationError` naming it, and nothing is stored."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

import workingmem as wm

MAY = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
HISTORY: list[Any] = [
    {"role": "user", "content": "I went to a support group yesterday."},
    {"role": "assistant", "content": "How was it?"},
    {"role": "user", "content": "Moving."},
]


async def test_an_imported_history_keeps_its_times(store: wm.Store, tenant: str) -> None:
    paris = timezone(timedelta(hours=2))
    times = [MAY, MAY + timedelta(minutes=1), (MAY + timedelta(days=2)).astimezone(paris)]
    stored = await store.append(
        tenant_id=tenant, thread_id="import", messages=HISTORY, created_at=times
    )
    assert [t.created_at for t in stored] == [t.astimezone(UTC) for t in times]
    read = await store.list_turns(tenant_id=tenant, thread_id="import")
    assert [t.created_at for t in read] == [t.astimezone(UTC) for t in times]
    later = await store.append(
        tenant_id=tenant, thread_id="import", messages=[{"role": "user", "content": "Now."}]
    )
    assert later[0].created_at is not None
    assert later[0].created_at > datetime.now(UTC) - timedelta(minutes=1)  # stamped now


@pytest.mark.parametrize(
    ("times", "field", "words"),
    [
        ([MAY, MAY], "created_at", "one time per message: 2 for 3"),
        ("2023-05-08", "created_at", "a list of datetimes"),
        ([MAY, datetime(2023, 5, 9), MAY], "created_at[1]", "timezone-aware"),
        ([MAY, MAY - timedelta(seconds=1), MAY], "created_at[1]", "before the turn before it"),
        ([MAY, MAY, datetime.now(UTC) + timedelta(days=1)], "created_at[2]", "in the future"),
    ],
)
async def test_a_time_that_cannot_be_a_turns_is_refused(
    store: wm.Store, tenant: str, times: Any, field: str, words: str
) -> None:
    with pytest.raises(wm.ValidationError) as refused:
        await store.append(tenant_id=tenant, thread_id="bad", messages=HISTORY, created_at=times)
    assert refused.value.field == field
    assert words in refused.value.reason
    with pytest.raises(wm.NotFoundError):  # nothing stored
        await store.get_thread(tenant_id=tenant, thread_id="bad")


async def test_an_import_goes_on_after_the_turns_already_there(
    store: wm.Store, tenant: str
) -> None:
    await store.append(tenant_id=tenant, thread_id="th", messages=HISTORY[:1], created_at=[MAY])
    with pytest.raises(wm.ValidationError) as earlier:
        await store.append(
            tenant_id=tenant,
            thread_id="th",
            messages=HISTORY[1:],
            created_at=[MAY - timedelta(hours=1), MAY],
        )
    assert earlier.value.field == "created_at[0]"
    assert len(await store.list_turns(tenant_id=tenant, thread_id="th")) == 1
    edited = await store.append(
        tenant_id=tenant,
        thread_id="th",
        messages=HISTORY[1:],
        created_at=[MAY + timedelta(hours=1), MAY + timedelta(hours=2)],
    )
    assert [t.seq for t in edited] == [2, 3]
