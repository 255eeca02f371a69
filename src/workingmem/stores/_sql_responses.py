"""Stored responses (the Responses API) and conversations' metadata: the SQL, written once.

    await store.put_response(tenant_id="t1", response=StoredResponse(...))
    conversation = await store.set_conversation_metadata(
        tenant_id="t1", conversation_id="th1", metadata={"topic": "demo"}
    )

Both tables hang off the thread's row (``ON DELETE CASCADE``): deleting the thread deletes
them, and a fork, which copies turns and state only, starts with neither. A write reads the
thread's row locked (the dialect's `lock`), so it cannot land on a thread being deleted.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ..errors import ConflictError, NotFoundError, ValidationError
from ..messages import check_id
from . import _rows
from ._dialect import Dialect, Row, Session
from .responses import Conversation, StoredResponse

__all__ = [
    "MAX_METADATA_KEYS",
    "MAX_METADATA_KEY_CHARS",
    "MAX_METADATA_VALUE_CHARS",
    "SQLResponses",
    "check_metadata",
    "dumps_json",
    "dumps_object",
]

MAX_METADATA_KEYS = 16
MAX_METADATA_KEY_CHARS = 64
MAX_METADATA_VALUE_CHARS = 512
"""A conversation's metadata, as OpenAI limits it: at most 16 pairs of strings, keys of at
most 64 characters, values of at most 512."""

_SELECT_THREAD = "SELECT id, created_at FROM threads WHERE tenant_id = ? AND thread_id = ?"
_MARK_AWAITING = (
    "INSERT INTO conversation_awaiting (thread_pk, tenant_id, awaiting_key) VALUES (?, ?, ?) "
    "ON CONFLICT (thread_pk) DO UPDATE SET awaiting_key = excluded.awaiting_key"
)
_WHILE_NEWEST = " WHERE (SELECT max(seq) FROM turns WHERE turns.thread_pk = excluded.thread_pk) = ?"
"""A mark replaces the one noted only while the turn it names is the thread's newest."""
_RESPONSE_COLUMNS = (
    "SELECT r.response_id, th.thread_id, r.input_seq, r.output_seq, r.last_seq, r.body, "
    "r.created_at, r.carried_instructions, r.carried_tools, r.answer_key "
    "FROM responses AS r JOIN threads AS th ON th.id = r.thread_pk "
)
_SELECT_RESPONSE = _RESPONSE_COLUMNS + "WHERE r.tenant_id = ? AND r.response_id = ?"
_SELECT_NEWEST = (
    _RESPONSE_COLUMNS
    + "WHERE th.tenant_id = ? AND th.thread_id = ? ORDER BY r.last_seq DESC LIMIT 1"
)
"""A thread's record whose output ends last (`responses_by_thread` finds its records)."""
_SELECT_ANSWERED = (
    "SELECT th.thread_id FROM responses AS r JOIN threads AS th ON th.id = r.thread_pk "
    "WHERE r.tenant_id = ? AND r.answer_key = ? ORDER BY r.created_at DESC LIMIT 1"
)
"""The thread of the newest record of an answer key (`responses_by_answer_key`)."""


def _check_key(name: str, key: object) -> None:
    if not isinstance(key, str) or not 1 <= len(key) <= 128:
        raise ValidationError(name, "must be a string of 1 to 128 characters")


class SQLResponses:
    """The ResponseStore methods of `SQLStore`."""

    _dialect: Dialect

    async def _locked_thread(
        self, session: Session, tenant_id: str, thread_id: str, kind: str
    ) -> Row:
        """The thread's (id, created_at), locked for the write; `NotFoundError` (of `kind`)
        when the tenant has no such thread."""
        row = await session.row(_SELECT_THREAD + self._dialect.lock, (tenant_id, thread_id))
        if row is None:
            raise NotFoundError(kind, thread_id)
        return row

    async def put_response(self, *, tenant_id: str, response: StoredResponse) -> None:
        tenant_id, thread_id = _rows.check_scope(tenant_id, response.thread_id)
        response_id = check_id("response_id", response.response_id)
        seqs = [
            _rows.check_seq(f"response.{name}", value)
            for name, value in (
                ("input_seq", response.input_seq),
                ("output_seq", response.output_seq),
                ("last_seq", response.last_seq),
            )
        ]
        body = dumps_object(response.body, "response.body")
        carried = response.carried_instructions
        if carried is not None and not isinstance(carried, str):
            raise ValidationError("response.carried_instructions", "must be a text or None")
        if carried is not None:  # as JSON, as every text of a turn (a NUL is no SQL text)
            carried = dumps_json(carried, "response.carried_instructions")
        loaded = response.carried_tools
        if loaded is not None and not isinstance(loaded, list):
            raise ValidationError("response.carried_tools", "must be a list of tools or None")
        tools = None if loaded is None else dumps_json(loaded, "response.carried_tools")
        answer_key = response.answer_key
        if answer_key is not None:
            _check_key("response.answer_key", answer_key)
        stamp = self._dialect.stamp(_rows.utcnow())
        async with self._dialect.write() as session:
            pk = (await self._locked_thread(session, tenant_id, thread_id, "thread"))[0]
            inserted = await session.run(
                "INSERT INTO responses (tenant_id, response_id, thread_pk, input_seq, "
                "output_seq, last_seq, body, carried_instructions, carried_tools, answer_key, "
                "created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
                "ON CONFLICT (tenant_id, response_id) DO NOTHING",
                (tenant_id, response_id, pk, *seqs, body, carried, tools, answer_key, stamp),
            )
            if not inserted:
                raise ConflictError(f"response {response_id!r} exists already")

    async def get_response(self, *, tenant_id: str, response_id: str) -> StoredResponse:
        key = check_id("tenant_id", tenant_id), check_id("response_id", response_id)
        async with self._dialect.read() as session:
            row = await session.row(_SELECT_RESPONSE, key)
        if row is None:
            raise NotFoundError("response", response_id)
        return self._stored(row)

    async def newest_response(self, *, tenant_id: str, thread_id: str) -> StoredResponse | None:
        key = _rows.check_scope(tenant_id, thread_id)
        async with self._dialect.read() as session:
            row = await session.row(_SELECT_NEWEST, key)
        return None if row is None else self._stored(row)

    def _stored(self, row: Row) -> StoredResponse:
        """A record from its row (`_RESPONSE_COLUMNS`)."""
        (
            response_id,
            thread_id,
            input_seq,
            output_seq,
            last_seq,
            body,
            stamp,
            carried,
            tools,
            answer_key,
        ) = row
        loaded: dict[str, Any] = json.loads(body)
        return StoredResponse(
            response_id=response_id,
            thread_id=thread_id,
            input_seq=input_seq,
            output_seq=output_seq,
            last_seq=last_seq,
            body=loaded,
            carried_instructions=None if carried is None else json.loads(carried),
            carried_tools=None if tools is None else json.loads(tools),
            answer_key=answer_key,
            created_at=self._dialect.moment(stamp),
        )

    async def delete_response(self, *, tenant_id: str, response_id: str) -> None:
        key = check_id("tenant_id", tenant_id), check_id("response_id", response_id)
        async with self._dialect.write() as session:
            deleted = await session.run(
                "DELETE FROM responses WHERE tenant_id = ? AND response_id = ?", key
            )
            if not deleted:
                raise NotFoundError("response", response_id)

    async def get_conversation(self, *, tenant_id: str, conversation_id: str) -> Conversation:
        key = check_id("tenant_id", tenant_id), check_id("conversation_id", conversation_id)
        async with self._dialect.read() as session:
            row = await session.row(
                "SELECT th.created_at, m.metadata FROM threads AS th "
                "LEFT JOIN conversation_metadata AS m ON m.thread_pk = th.id "
                "WHERE th.tenant_id = ? AND th.thread_id = ?",
                key,
            )
        if row is None:
            raise NotFoundError("conversation", conversation_id)
        stamp, metadata = row
        return Conversation(
            conversation_id=conversation_id,
            created_at=self._dialect.moment(stamp),
            metadata=_loads_metadata(metadata),
        )

    async def mark_awaiting(
        self, *, tenant_id: str, conversation_id: str, key: str, newest_seq: int | None = None
    ) -> None:
        tenant_id = check_id("tenant_id", tenant_id)
        conversation_id = check_id("conversation_id", conversation_id)
        _check_key("key", key)
        if newest_seq is not None and (type(newest_seq) is not int or newest_seq < 1):
            raise ValidationError("newest_seq", "must be a positive integer")
        async with self._dialect.write() as session:
            pk = (await self._locked_thread(session, tenant_id, conversation_id, "conversation"))[0]
            if newest_seq is None:
                await session.queue(_MARK_AWAITING, (pk, tenant_id, key))
            else:
                await session.queue(
                    _MARK_AWAITING + _WHILE_NEWEST, (pk, tenant_id, key, newest_seq)
                )

    async def find_awaiting(self, *, tenant_id: str, key: str) -> str | None:
        tenant_id = check_id("tenant_id", tenant_id)
        async with self._dialect.read() as session:
            row = await session.row(
                "SELECT th.thread_id FROM conversation_awaiting AS a "
                "JOIN threads AS th ON th.id = a.thread_pk "
                "WHERE a.tenant_id = ? AND a.awaiting_key = ? "
                "ORDER BY th.updated_at DESC, th.id DESC LIMIT 1",
                (tenant_id, key),
            )
        return None if row is None else str(row[0])

    async def find_answered(self, *, tenant_id: str, key: str) -> str | None:
        tenant_id = check_id("tenant_id", tenant_id)
        _check_key("key", key)
        async with self._dialect.read() as session:
            row = await session.row(_SELECT_ANSWERED, (tenant_id, key))
        return None if row is None else str(row[0])

    async def set_conversation_metadata(
        self, *, tenant_id: str, conversation_id: str, metadata: Mapping[str, str]
    ) -> Conversation:
        tenant_id = check_id("tenant_id", tenant_id)
        conversation_id = check_id("conversation_id", conversation_id)
        clean = check_metadata(metadata)
        text = dumps_json(clean, "metadata")
        async with self._dialect.write() as session:
            pk, stamp = await self._locked_thread(
                session, tenant_id, conversation_id, "conversation"
            )
            await session.queue(
                "INSERT INTO conversation_metadata (thread_pk, metadata) VALUES (?, ?) "
                "ON CONFLICT (thread_pk) DO UPDATE SET metadata = excluded.metadata",
                (pk, text),
            )
        return Conversation(
            conversation_id=conversation_id,
            created_at=self._dialect.moment(stamp),
            metadata=clean,
        )


def check_metadata(metadata: object) -> dict[str, str]:
    """A conversation's metadata as a plain dict, or `ValidationError` naming the entry: a
    mapping of at most `MAX_METADATA_KEYS` strings to strings, within the length limits."""
    if not isinstance(metadata, Mapping):
        raise ValidationError("metadata", f"must be an object, got {type(metadata).__name__}")
    if len(metadata) > MAX_METADATA_KEYS:
        raise ValidationError("metadata", f"has {len(metadata)} keys; at most {MAX_METADATA_KEYS}")
    clean: dict[str, str] = {}
    for key, value in metadata.items():
        if not isinstance(key, str):
            raise ValidationError("metadata", f"keys must be strings, got {type(key).__name__}")
        field = f"metadata[{key!r}]"
        if len(key) > MAX_METADATA_KEY_CHARS:
            raise ValidationError(
                field, f"the key is {len(key)} characters long; at most {MAX_METADATA_KEY_CHARS}"
            )
        if not isinstance(value, str):
            raise ValidationError(field, f"must be a string, got {type(value).__name__}")
        if len(value) > MAX_METADATA_VALUE_CHARS:
            raise ValidationError(
                field, f"is {len(value)} characters long; at most {MAX_METADATA_VALUE_CHARS}"
            )
        if not _is_unicode(key) or not _is_unicode(value):
            raise ValidationError(field, "contains text that is not valid Unicode")
        clean[key] = value
    return clean


def dumps_object(value: object, name: str) -> str:
    """A JSON object (a response's, a completion's) as the text stored, or a
    `ValidationError` naming `name`."""
    if not isinstance(value, dict):
        raise ValidationError(name, f"must be a JSON object, got {type(value).__name__}")
    return dumps_json(value, name)


def dumps_json(value: object, name: str) -> str:
    """`value` as the JSON text stored (exact: what `json.loads` gives back), or a
    `ValidationError` naming `name`."""
    try:
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError, RecursionError) as exc:
        raise ValidationError(name, f"is not JSON: {exc}") from exc
    if not _is_unicode(text):
        raise ValidationError(name, "contains text that is not valid Unicode")
    return text


def _loads_metadata(text: str | None) -> dict[str, str]:
    if text is None:
        return {}
    metadata: dict[str, str] = json.loads(text)
    return metadata


def _is_unicode(text: str) -> bool:
    """False for text with a lone surrogate (no database encoding can store it)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
