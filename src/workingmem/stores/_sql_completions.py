"""Stored chat completions: the SQL, written once.

    await store.put_completion(tenant_id="t1", completion=StoredCompletion(...), messages=[...])
    page = await store.list_completions(tenant_id="t1", order="desc", model="gpt-4o-mini")

A record hangs off its thread's row (``ON DELETE CASCADE``: SQLite's migration 13, PostgreSQL's
14), and its metadata's pairs off the record: a list filtered by metadata asks each record's own
pairs. A write reads the thread's row locked (the dialect's `lock`), so it cannot land on a
thread being deleted.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from ..errors import ConflictError, NotFoundError, ValidationError
from ..messages import check_id
from . import _rows
from ._dialect import Dialect, Row, Session
from ._sql_reads import thread_row
from ._sql_responses import check_metadata, dumps_json, dumps_object
from .completions import CompletionPage, StoredCompletion

__all__ = ["MAX_COMPLETIONS_PAGE", "SQLCompletions"]

MAX_COMPLETIONS_PAGE = 100
"""The most completions one page lists."""

_COLUMNS = (
    "c.completion_id, th.thread_id, c.model, c.metadata, c.body, c.created_at "
    "FROM chat_completions AS c JOIN threads AS th ON th.id = c.thread_pk"
)
_SELECT = f"SELECT {_COLUMNS} WHERE c.tenant_id = ? AND c.completion_id = ?"
_HAS_PAIR = (
    "EXISTS (SELECT 1 FROM chat_completion_metadata AS m "
    "WHERE m.completion_pk = c.id AND m.key = ? AND m.value = ?)"
)
_INSERT_PAIR = "INSERT INTO chat_completion_metadata (completion_pk, key, value) VALUES (?, ?, ?)"


class SQLCompletions:
    """The CompletionStore methods of `SQLStore`."""

    _dialect: Dialect

    async def put_completion(
        self,
        *,
        tenant_id: str,
        completion: StoredCompletion,
        messages: Sequence[Mapping[str, Any]],
    ) -> None:
        tenant_id, thread_id = _rows.check_scope(tenant_id, completion.thread_id)
        completion_id = check_id("completion_id", completion.completion_id)
        model = _check_model(completion.model)
        metadata = check_metadata(completion.metadata)
        body = dumps_object(completion.body, "completion.body")
        if isinstance(messages, str | bytes) or not all(isinstance(m, Mapping) for m in messages):
            raise ValidationError("messages", "must be a list of message objects")
        sent = dumps_json(list(messages), "messages")
        stamp = self._dialect.stamp(_rows.utcnow())
        async with self._dialect.write() as session:
            thread = await thread_row(session, self._dialect, tenant_id, thread_id, lock=True)
            inserted = await session.row(
                "INSERT INTO chat_completions (tenant_id, completion_id, thread_pk, model, "
                "metadata, body, messages, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?) "
                "ON CONFLICT (tenant_id, completion_id) DO NOTHING RETURNING id",
                (
                    tenant_id,
                    completion_id,
                    thread[0],
                    model,
                    dumps_json(metadata, "metadata"),
                    body,
                    sent,
                    stamp,
                ),
            )
            if inserted is None:
                raise ConflictError(f"chat completion {completion_id!r} exists already")
            await _write_pairs(session, inserted[0], metadata)

    async def get_completion(self, *, tenant_id: str, completion_id: str) -> StoredCompletion:
        key = check_id("tenant_id", tenant_id), check_id("completion_id", completion_id)
        async with self._dialect.read() as session:
            row = await session.row(_SELECT, key)
        if row is None:
            raise NotFoundError("chat completion", completion_id)
        return self._record(row)

    async def list_completions(
        self,
        *,
        tenant_id: str,
        order: Literal["asc", "desc"] = "asc",
        after: str | None = None,
        limit: int = 20,
        model: str | None = None,
        metadata: Mapping[str, str] | None = None,
    ) -> CompletionPage:
        tenant_id = check_id("tenant_id", tenant_id)
        if order not in ("asc", "desc"):
            raise ValidationError("order", f"must be 'asc' or 'desc', got {order!r}")
        if isinstance(limit, bool) or not isinstance(limit, int):
            raise ValidationError("limit", f"must be an int, got {type(limit).__name__}")
        if not 1 <= limit <= MAX_COMPLETIONS_PAGE:
            raise ValidationError("limit", f"must be 1 to {MAX_COMPLETIONS_PAGE}, got {limit}")
        where = ["c.tenant_id = ?"]
        params: list[object] = [tenant_id]
        if model is not None:
            where.append("c.model = ?")
            params.append(_check_model(model))
        for pair in check_metadata(metadata or {}).items():
            where.append(_HAS_PAIR)
            params.extend(pair)
        async with self._dialect.read() as session:
            if after is not None:
                start = await session.row(
                    "SELECT id FROM chat_completions WHERE tenant_id = ? AND completion_id = ?",
                    (tenant_id, check_id("after", after)),
                )
                if start is None:
                    raise NotFoundError("chat completion", after)
                where.append("c.id > ?" if order == "asc" else "c.id < ?")
                params.append(start[0])
            rows = await session.rows(
                f"SELECT {_COLUMNS} WHERE {' AND '.join(where)} "
                f"ORDER BY c.id {order.upper()} LIMIT ?",
                (*params, limit + 1),
            )
        return CompletionPage([self._record(row) for row in rows[:limit]], len(rows) > limit)

    async def completion_messages(
        self, *, tenant_id: str, completion_id: str
    ) -> list[dict[str, Any]]:
        key = check_id("tenant_id", tenant_id), check_id("completion_id", completion_id)
        async with self._dialect.read() as session:
            row = await session.row(
                "SELECT messages FROM chat_completions WHERE tenant_id = ? AND completion_id = ?",
                key,
            )
        if row is None:
            raise NotFoundError("chat completion", completion_id)
        messages: list[dict[str, Any]] = json.loads(row[0])
        return messages

    async def set_completion_metadata(
        self, *, tenant_id: str, completion_id: str, metadata: Mapping[str, str]
    ) -> StoredCompletion:
        key = check_id("tenant_id", tenant_id), check_id("completion_id", completion_id)
        clean = check_metadata(metadata)
        async with self._dialect.write() as session:
            found = await session.row(
                "UPDATE chat_completions SET metadata = ? "
                "WHERE tenant_id = ? AND completion_id = ? RETURNING id",
                (dumps_json(clean, "metadata"), *key),
            )
            if found is None:
                raise NotFoundError("chat completion", completion_id)
            await session.queue(
                "DELETE FROM chat_completion_metadata WHERE completion_pk = ?", (found[0],)
            )
            await _write_pairs(session, found[0], clean)
            row = await session.row(_SELECT, key)
        assert row is not None  # updated under this transaction's lock
        return self._record(row)

    async def delete_completion(self, *, tenant_id: str, completion_id: str) -> None:
        key = check_id("tenant_id", tenant_id), check_id("completion_id", completion_id)
        deleted = await self._dialect.write_one(
            "DELETE FROM chat_completions WHERE tenant_id = ? AND completion_id = ?", key
        )
        if not deleted:
            raise NotFoundError("chat completion", completion_id)

    def _record(self, row: Row) -> StoredCompletion:
        completion_id, thread_id, model, metadata, body, stamp = row
        return StoredCompletion(
            completion_id=completion_id,
            thread_id=thread_id,
            model=model,
            body=json.loads(body),
            metadata=json.loads(metadata),
            created_at=self._dialect.moment(stamp),
        )


async def _write_pairs(session: Session, pk: int, metadata: Mapping[str, str]) -> None:
    if metadata:
        await session.run_many(_INSERT_PAIR, [(pk, k, v) for k, v in metadata.items()])


def _check_model(model: object) -> str:
    if not isinstance(model, str) or not 1 <= len(model) <= 256:
        raise ValidationError("model", "must be a string of 1 to 256 characters")
    return model
