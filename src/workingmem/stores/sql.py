"""`SQLStore`: threads, memory states, documents, API keys, stored responses and stored chat
completions on one SQL database.

    store = await SQLiteStore.open(".workingmem/memory.db")      # or PostgresStore.open(url)
    async with store:
        await store.append(tenant_id="t1", thread_id="th1", messages=[...])

One class owns the control flow of every operation, its SQL written once (`_sql_threads`,
`_sql_documents`, `_sql_keys`, `_sql_responses`, `_sql_completions`, `_sql_records`); a
`Dialect` (`_dialect`) supplies what really differs between SQLite and PostgreSQL.
`SQLiteStore` and `PostgresStore` are this class opened on each.
"""

from __future__ import annotations

from types import TracebackType
from typing import Self

from ._dialect import Dialect
from ._known import KnownThreads
from ._sql_completions import SQLCompletions
from ._sql_documents import SQLDocuments
from ._sql_items import SQLItems
from ._sql_keys import SQLKeys
from ._sql_records import SQLRecords
from ._sql_responses import SQLResponses
from ._sql_states import SQLStates
from ._sql_threads import SQLThreads

__all__ = ["SQLStore"]


class SQLStore(
    SQLThreads,
    SQLStates,
    SQLDocuments,
    SQLKeys,
    SQLResponses,
    SQLCompletions,
    SQLRecords,
    SQLItems,
):
    """A `Store` (threads, memory states, documents, API keys, stored responses, stored chat
    completions) on one SQL database, a `RecordStore` and an `ItemIndex`."""

    def __init__(self, dialect: Dialect) -> None:
        self._dialect = dialect
        self._known = KnownThreads()

    async def aclose(self) -> None:
        """Closes the connections; the store is unusable afterwards."""
        await self._dialect.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()
