"""Leases: a row per key with its owner and expiry, in `thread_locks` (a thread's ask lock) or
`memory_leases` (a memory state's update), the statements written once.

    sql, params = claim_sql(dialect, "thread_locks", {"tenant_id": t, "thread_id": th}, me, 30)

Taking one is an upsert that wins only over an expired row, so of two claimers one gets it (the
statement changes one row); renewing and giving back touch only the owner's. The tables and
columns are names of the stores' own modules, never input.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from . import _rows
from ._dialect import Dialect

__all__ = ["RELEASE_THREAD", "claim_sql", "release", "release_sql", "renew_sql"]

Statement = tuple[str, tuple[object, ...]]


def claim_sql(
    dialect: Dialect, table: str, keys: Mapping[str, object], owner: str, ttl: float
) -> Statement:
    """The upsert that takes `table`'s lease of `keys` for `owner` for `ttl` seconds, unless
    another holds it unexpired (it then changes no row)."""
    now = _rows.utcnow()
    columns = ", ".join(keys)
    return (
        f"INSERT INTO {table} ({columns}, owner, expires_at) VALUES "
        f"({', '.join('?' * (len(keys) + 2))}) ON CONFLICT ({columns}) DO UPDATE SET "
        f"owner = excluded.owner, expires_at = excluded.expires_at "
        f"WHERE {table}.expires_at < ?",
        (*keys.values(), owner, dialect.stamp(_rows.later(now, ttl)), dialect.stamp(now)),
    )


def renew_sql(
    dialect: Dialect, table: str, keys: Mapping[str, object], owner: str, ttl: float
) -> Statement:
    """The UPDATE that moves `owner`'s lease of `keys` on to `ttl` seconds from now."""
    where = " AND ".join(f"{column} = ?" for column in keys)
    return (
        f"UPDATE {table} SET expires_at = ? WHERE {where} AND owner = ?",
        (dialect.stamp(_rows.later(_rows.utcnow(), ttl)), *keys.values(), owner),
    )


def release_sql(table: str, columns: Sequence[str]) -> str:
    """The DELETE that gives a lock (or a lease) of `table`, keyed by `columns`, back: only
    its owner's, nothing when another holds it."""
    where = " AND ".join(f"{column} = ?" for column in columns)
    return f"DELETE FROM {table} WHERE {where} AND owner = ?"


def release(table: str, keys: Mapping[str, object], owner: str) -> Statement:
    """`release_sql` of `keys`, with its parameters."""
    return release_sql(table, list(keys)), (*keys.values(), owner)


RELEASE_THREAD = release_sql("thread_locks", ("tenant_id", "thread_id"))
"""A thread's ask lock given back: (tenant_id, thread_id, owner)."""
