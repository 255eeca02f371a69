"""The SQL of API keys on SQLite; `SQLiteStore` inherits it.

store = await SQLiteStore.open("memory.db")
created = await store.create_api_key(tenant_id="acme", label="ci")
key = await store.find_api_key(created.secret)
"""

from __future__ import annotations

import hmac
from contextlib import AbstractAsyncContextManager
from datetime import datetime
from typing import TYPE_CHECKING, Any

from ..errors import NotFoundError
from ..messages import check_id
from . import _rows
from .keys import (
    HINT_CHARS,
    ApiKey,
    NewApiKey,
    check_key_id,
    check_label,
    hash_secret,
    new_key_id,
    new_secret,
    plausible_secret,
)

if TYPE_CHECKING:
    import aiosqlite

__all__ = ["SQLiteKeys"]

_COLUMNS = "key_id, tenant_id, label, hint, created_at, revoked_at"


def _key(row: Any) -> ApiKey:
    key_id, tenant_id, label, hint, created, revoked = row[:6]
    return ApiKey(
        key_id=key_id,
        tenant_id=tenant_id,
        label=label,
        hint=hint,
        created_at=datetime.fromisoformat(created),
        revoked_at=datetime.fromisoformat(revoked) if revoked else None,
    )


class SQLiteKeys:
    """The ApiKeyStore methods of `SQLiteStore`."""

    if TYPE_CHECKING:

        def _write(self) -> AbstractAsyncContextManager[aiosqlite.Connection]: ...

        def _read(self) -> AbstractAsyncContextManager[aiosqlite.Connection]: ...

    async def create_api_key(self, *, tenant_id: str, label: str = "") -> NewApiKey:
        tenant = check_id("tenant_id", tenant_id)
        text = check_label(label)
        secret = new_secret()
        key = ApiKey(
            key_id=new_key_id(),
            tenant_id=tenant,
            label=text,
            hint=secret[:HINT_CHARS],
            created_at=_rows.utcnow(),
        )
        async with self._write() as db:
            await db.execute(
                f"INSERT INTO api_keys ({_COLUMNS}, key_hash) VALUES (?, ?, ?, ?, ?, NULL, ?)",
                (
                    key.key_id,
                    key.tenant_id,
                    key.label,
                    key.hint,
                    key.created_at.isoformat(),
                    hash_secret(secret),
                ),
            )
        return NewApiKey(key=key, secret=secret)

    async def find_api_key(self, secret: str) -> ApiKey | None:
        if not plausible_secret(secret):
            return None
        digest = hash_secret(secret)
        async with (
            self._read() as db,
            db.execute(
                f"SELECT {_COLUMNS}, key_hash FROM api_keys WHERE key_hash = ?", (digest,)
            ) as cursor,
        ):
            row = await cursor.fetchone()
        if row is None or not hmac.compare_digest(row[6], digest):
            return None
        return _key(row)

    async def list_api_keys(self, *, tenant_id: str | None = None) -> list[ApiKey]:
        query = f"SELECT {_COLUMNS} FROM api_keys ORDER BY id"
        args: tuple[str, ...] = ()
        if tenant_id is not None:
            query = f"SELECT {_COLUMNS} FROM api_keys WHERE tenant_id = ? ORDER BY id"
            args = (check_id("tenant_id", tenant_id),)
        async with self._read() as db, db.execute(query, args) as cursor:
            return [_key(row) for row in await cursor.fetchall()]

    async def revoke_api_key(self, *, key_id: str, tenant_id: str | None = None) -> ApiKey:
        wanted = check_key_id(key_id)
        tenant = None if tenant_id is None else check_id("tenant_id", tenant_id)
        async with self._write() as db:
            async with db.execute(
                f"SELECT {_COLUMNS} FROM api_keys WHERE key_id = ?", (wanted,)
            ) as cursor:
                row = await cursor.fetchone()
            if row is None or (tenant is not None and row[1] != tenant):
                raise NotFoundError("api key", wanted)
            key = _key(row)
            if key.revoked_at is not None:
                return key
            now = _rows.utcnow()
            await db.execute(
                "UPDATE api_keys SET revoked_at = ? WHERE key_id = ?", (now.isoformat(), wanted)
            )
        return ApiKey(
            key_id=key.key_id,
            tenant_id=key.tenant_id,
            label=key.label,
            hint=key.hint,
            created_at=key.created_at,
            revoked_at=now,
        )

    async def has_api_keys(self) -> bool:
        async with self._read() as db, db.execute("SELECT 1 FROM api_keys LIMIT 1") as cursor:
            return await cursor.fetchone() is not None
