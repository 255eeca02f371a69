"""A thread's records counted (`RecordStore`): its stored responses and chat completions, by
the indexes their cascade uses (``responses_by_thread``, ``chat_completions_by_thread``)."""

from __future__ import annotations

from ..errors import NotFoundError
from ..messages import check_id
from ._dialect import Dialect
from .records import KeptRecords

__all__ = ["SQLRecords"]

_COUNT = (
    "SELECT (SELECT count(*) FROM responses AS r WHERE r.thread_pk = th.id), "
    "(SELECT count(*) FROM chat_completions AS c WHERE c.thread_pk = th.id) "
    "FROM threads AS th WHERE th.tenant_id = ? AND th.thread_id = ?"
)


class SQLRecords:
    """`SQLStore`'s `RecordStore`."""

    _dialect: Dialect

    async def count_records(self, *, tenant_id: str, thread_id: str) -> KeptRecords:
        key = check_id("tenant_id", tenant_id), check_id("thread_id", thread_id)
        async with self._dialect.read() as session:
            row = await session.row(_COUNT, key)
        if row is None:
            raise NotFoundError("thread", thread_id)
        return KeptRecords(responses=int(row[0]), chat_completions=int(row[1]))
