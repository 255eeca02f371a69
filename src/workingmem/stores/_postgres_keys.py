"""The SQL of API keys on PostgreSQL; `PostgresStore` inherits it.

store = await PostgresStore.open("postgresql://app@db:5432/memory")
created = await store.create_api_key(tenant_id="acme", label="ci")
key = await store.find_api_key(created.secret)
"""

from __future__ import annotations

import hmac
from contextlib import AbstractAsyncContextManager
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
    import psycopg

    Conn = psycopg.AsyncConnection[tuple[Any, ...]]

__all__ = ["PostgresKeys"]

_COLUMNS = "key_id, tenant_id, label, hint, created_at, revoked_at"


def _key(row: Any) -> ApiKey:
    key_id, tenant_id, label, hint, created, revoked = row[:6]
    return ApiKey(
        key_id=key_id,
        tenant_id=tenant_id,
        label=label,
        hint=hint,
        created_at=created,
        revoked_at=revoked,
    )


class PostgresKeys:
    """The ApiKeyStore methods of `PostgresStore`."""

    if TYPE_CHECKING:

        def _tx(self) -> AbstractAsyncContextManager[Conn]: ...

        def _read(self) -> AbstractAsyncContextManager[Conn]: ...

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
        async with self._tx() as conn:
            await conn.execute(
                f"INSERT INTO api_keys ({_COLUMNS}, key_hash) "
                "VALUES (%s, %s, %s, %s, %s, NULL, %s)",
                (
                    key.key_id,
                    key.tenant_id,
                    key.label,
                    key.hint,
                    key.created_at,
                    hash_secret(secret),
                ),
            )
        return NewApiKey(key=key, secret=secret)

    async def find_api_key(self, secret: str) -> ApiKey | None:
        if not plausible_secret(secret):
            return None
        digest = hash_secret(secret)
        async with self._read() as conn:
            cursor = await conn.execute(
                f"SELECT {_COLUMNS}, key_hash FROM api_keys WHERE key_hash = %s", (digest,)
            )
            row = await cursor.fetchone()
        if row is None or not hmac.compare_digest(row[6], digest):
            return None
        return _key(row)

    async def list_api_keys(self, *, tenant_id: str | None = None) -> list[ApiKey]:
        async with self._read() as conn:
            if tenant_id is None:
                cursor = await conn.execute(f"SELECT {_COLUMNS} FROM api_keys ORDER BY id")
            else:
                cursor = await conn.execute(
                    f"SELECT {_COLUMNS} FROM api_keys WHERE tenant_id = %s ORDER BY id",
                    (check_id("tenant_id", tenant_id),),
                )
            rows = await cursor.fetchall()
        return [_key(row) for row in rows]

    async def revoke_api_key(self, *, key_id: str, tenant_id: str | None = None) -> ApiKey:
        wanted = check_key_id(key_id)
        tenant = None if tenant_id is None else check_id("tenant_id", tenant_id)
        async with self._tx() as conn:
            cursor = await conn.execute(
                f"SELECT {_COLUMNS} FROM api_keys WHERE key_id = %s FOR UPDATE", (wanted,)
            )
            row = await cursor.fetchone()
            if row is None or (tenant is not None and row[1] != tenant):
                raise NotFoundError("api key", wanted)
            if row[5] is not None:
                return _key(row)
            cursor = await conn.execute(
                f"UPDATE api_keys SET revoked_at = %s WHERE key_id = %s RETURNING {_COLUMNS}",
                (_rows.utcnow(), wanted),
            )
            updated = await cursor.fetchone()
        return _key(updated)

    async def has_api_keys(self) -> bool:
        async with self._read() as conn:
            cursor = await conn.execute("SELECT 1 FROM api_keys LIMIT 1")
            return await cursor.fetchone() is not None
