"""A tenant's stored items found by id (`ItemIndex`), through the ``turn_items`` index that a
trigger fills as turns are written (migrations 15 on SQLite, 16 on PostgreSQL)."""

from __future__ import annotations

from ..messages import check_id
from ._dialect import Dialect
from .items import ItemPlace

__all__ = ["SQLItems"]

_FIND = (
    "SELECT th.thread_id, i.seq FROM turn_items AS i JOIN threads AS th ON th.id = i.thread_pk "
    "WHERE i.item_id = ? AND th.tenant_id = ?{where} ORDER BY i.thread_pk DESC, i.seq DESC LIMIT 1"
)


class SQLItems:
    """`SQLStore`'s `ItemIndex`."""

    _dialect: Dialect

    async def find_item(
        self,
        *,
        tenant_id: str,
        item_id: str,
        thread_id: str | None = None,
        through_seq: int | None = None,
    ) -> ItemPlace | None:
        where = ""
        params: list[object] = [item_id, check_id("tenant_id", tenant_id)]
        if thread_id is not None:
            where += " AND th.thread_id = ?"
            params.append(check_id("thread_id", thread_id))
        if through_seq is not None:
            where += " AND i.seq <= ?"
            params.append(through_seq)
        async with self._dialect.read() as session:
            row = await session.row(_FIND.format(where=where), params)
        return None if row is None else ItemPlace(thread_id=str(row[0]), seq=int(row[1]))
