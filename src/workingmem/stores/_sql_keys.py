"""API keys of the service, stored hashed: the SQL, written once.

created = await store.create_api_key(tenant_id="acme", label="ci")
key = await store.find_api_key(created.secret)
"""

from __future__ import annotations

import hmac
import secrets

from ..errors import NotFoundError
from ..messages import check_id
from . import _rows
from ._dialect import Dialect, Row
from .keys import (
    HINT_CHARS,
    SESSION_PREFIX,
    ApiKey,
    NewApiKey,
    check_key_id,
    check_label,
    hash_secret,
    new_key_id,
    new_secret,
    plausible_secret,
)

__all__ = ["SQLKeys"]

_COLUMNS = "key_id, tenant_id, label, hint, created_at, revoked_at"


class SQLKeys:
    """The ApiKeyStore methods of `SQLStore`."""

    _dialect: Dialect

    def _key(self, row: Row) -> ApiKey:
        key_id, tenant_id, label, hint, created, revoked = row[:6]
        return ApiKey(
            key_id=key_id,
            tenant_id=tenant_id,
            label=label,
            hint=hint,
            created_at=self._dialect.moment(created),
            revoked_at=self._dialect.moment(revoked) if revoked is not None else None,
        )

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
        async with self._dialect.write() as session:
            await session.queue(
                f"INSERT INTO api_keys ({_COLUMNS}, key_hash) VALUES (?, ?, ?, ?, ?, NULL, ?)",
                (
                    key.key_id,
                    key.tenant_id,
                    key.label,
                    key.hint,
                    self._dialect.stamp(key.created_at),
                    hash_secret(secret),
                ),
            )
        return NewApiKey(key=key, secret=secret)

    async def find_api_key(self, secret: str) -> ApiKey | None:
        if not plausible_secret(secret):
            return None
        digest = hash_secret(secret)
        async with self._dialect.read() as session:
            row = await session.row(
                f"SELECT {_COLUMNS}, key_hash FROM api_keys WHERE key_hash = ?", (digest,)
            )
        if row is None or not hmac.compare_digest(row[6], digest):
            return None
        return self._key(row)

    async def list_api_keys(self, *, tenant_id: str | None = None) -> list[ApiKey]:
        query = f"SELECT {_COLUMNS} FROM api_keys ORDER BY id"
        args: tuple[str, ...] = ()
        if tenant_id is not None:
            query = f"SELECT {_COLUMNS} FROM api_keys WHERE tenant_id = ? ORDER BY id"
            args = (check_id("tenant_id", tenant_id),)
        async with self._dialect.read() as session:
            return [self._key(row) for row in await session.rows(query, args)]

    async def revoke_api_key(self, *, key_id: str, tenant_id: str | None = None) -> ApiKey:
        wanted = check_key_id(key_id)
        tenant = None if tenant_id is None else check_id("tenant_id", tenant_id)
        async with self._dialect.write() as session:
            row = await session.row(
                f"SELECT {_COLUMNS} FROM api_keys WHERE key_id = ?" + self._dialect.lock, (wanted,)
            )
            if row is None or (tenant is not None and row[1] != tenant):
                raise NotFoundError("api key", wanted)
            if row[5] is not None:
                return self._key(row)
            updated = await session.row(
                f"UPDATE api_keys SET revoked_at = ? WHERE key_id = ? RETURNING {_COLUMNS}",
                (self._dialect.stamp(_rows.utcnow()), wanted),
            )
        assert updated is not None  # the row is locked in this transaction
        return self._key(updated)

    async def has_api_keys(self) -> bool:
        async with self._dialect.read() as session:
            return await session.row("SELECT 1 FROM api_keys LIMIT 1") is not None

    async def open_page_session(self, secret: str, *, ttl_seconds: float) -> str | None:
        key = await self.find_api_key(secret)
        if key is None or not key.active:
            return None
        token = SESSION_PREFIX + secrets.token_urlsafe(32)
        now = _rows.utcnow()
        async with self._dialect.write() as session:
            await session.queue(
                "INSERT INTO page_sessions (token_hash, key_id, created_at, expires_at) "
                "VALUES (?, ?, ?, ?)",
                (
                    hash_secret(token),
                    key.key_id,
                    self._dialect.stamp(now),
                    self._dialect.stamp(_rows.later(now, ttl_seconds)),
                ),
            )
        return token

    async def find_page_session(self, token: str) -> ApiKey | None:
        if not isinstance(token, str) or not token.startswith(SESSION_PREFIX) or len(token) > 128:
            return None
        async with self._dialect.read() as session:
            row = await session.row(
                f"SELECT {', '.join('k.' + c.strip() for c in _COLUMNS.split(','))}, "
                "s.expires_at FROM page_sessions AS s JOIN api_keys AS k ON k.key_id = s.key_id "
                "WHERE s.token_hash = ?",
                (hash_secret(token),),
            )
        if row is None or self._dialect.moment(row[6]) <= _rows.utcnow():
            return None
        key = self._key(row)
        return key if key.active else None

    async def close_page_session(self, token: str) -> None:
        if not isinstance(token, str) or len(token) > 128:
            return
        async with self._dialect.write() as session:
            await session.queue(
                "DELETE FROM page_sessions WHERE token_hash = ?", (hash_secret(token),)
            )
