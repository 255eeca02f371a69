"""API keys in the store, on SQLite and PostgreSQL: shown once, stored hashed, bound to one
tenant, revocable, never deleted."""

from __future__ import annotations

import hashlib
import re
import sqlite3
from pathlib import Path

import pytest

import workingmem as wm
from workingmem.stores import SQLiteStore
from workingmem.stores.keys import ApiKeyStore


@pytest.fixture
def keys(store: wm.ThreadStore) -> ApiKeyStore:
    assert isinstance(store, ApiKeyStore)
    return store


async def test_a_key_is_found_by_its_secret_and_shows_only_its_start(
    keys: ApiKeyStore, tenant: str
) -> None:
    created = await keys.create_api_key(tenant_id=tenant, label="chat backend")
    assert re.fullmatch(r"wm_[A-Za-z0-9_-]{43}", created.secret)
    assert created.key.hint == created.secret[:7]
    found = await keys.find_api_key(created.secret)
    assert found == created.key
    assert found is not None
    assert found.active
    assert (found.tenant_id, found.label) == (tenant, "chat backend")
    assert await keys.has_api_keys()


@pytest.mark.parametrize(
    "secret",
    [
        pytest.param("wm_" + "A" * 43, id="unknown"),
        pytest.param("sk-openai-style", id="not-ours"),
        pytest.param("", id="empty"),
        pytest.param("wm_" + "x" * 10_000, id="too-long"),
        pytest.param("wm_é", id="not-ascii"),
    ],
)
async def test_what_is_not_a_key_finds_nothing(keys: ApiKeyStore, secret: str) -> None:
    assert await keys.find_api_key(secret) is None


async def test_a_revoked_key_stays_listed_and_is_found_inactive(
    keys: ApiKeyStore, tenant: str
) -> None:
    created = await keys.create_api_key(tenant_id=tenant)
    other = await keys.create_api_key(tenant_id=f"{tenant}-other")
    with pytest.raises(wm.NotFoundError):
        await keys.revoke_api_key(key_id=created.key.key_id, tenant_id=f"{tenant}-other")
    revoked = await keys.revoke_api_key(key_id=created.key.key_id, tenant_id=tenant)
    assert revoked.revoked_at is not None
    assert not revoked.active
    again = await keys.revoke_api_key(key_id=created.key.key_id)
    assert again.revoked_at == revoked.revoked_at
    found = await keys.find_api_key(created.secret)
    assert found is not None
    assert not found.active
    assert [k.key_id for k in await keys.list_api_keys(tenant_id=tenant)] == [created.key.key_id]
    listed = {k.key_id for k in await keys.list_api_keys()}
    assert {created.key.key_id, other.key.key_id} <= listed
    with pytest.raises(wm.NotFoundError):
        await keys.revoke_api_key(key_id="key_0000000000000000")


@pytest.mark.parametrize(
    ("field", "call"),
    [
        pytest.param("label", {"tenant_id": "t", "label": "x" * 201}, id="long-label"),
        pytest.param("label", {"tenant_id": "t", "label": "a\nb"}, id="control-in-label"),
        pytest.param("tenant_id", {"tenant_id": ""}, id="empty-tenant"),
    ],
)
async def test_a_bad_key_request_is_a_validation_error(
    keys: ApiKeyStore, field: str, call: dict[str, str]
) -> None:
    with pytest.raises(wm.ValidationError) as caught:
        await keys.create_api_key(**call)
    assert caught.value.field == field


async def test_only_the_secrets_sha256_is_stored(tmp_path: Path) -> None:
    path = tmp_path / "keys.db"
    store = await SQLiteStore.open(path)
    try:
        created = await store.create_api_key(tenant_id="acme")
    finally:
        await store.aclose()
    with sqlite3.connect(path) as db:
        rows = db.execute("SELECT * FROM api_keys").fetchall()
    assert len(rows) == 1
    assert hashlib.sha256(created.secret.encode()).hexdigest() in rows[0]
    assert not any(created.secret in str(value) for value in rows[0])
