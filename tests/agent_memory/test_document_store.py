"""The DocumentStore contract, which SQLite and PostgreSQL must both keep."""

from __future__ import annotations

from typing import Any

import pytest

import workingmem as wm
from workingmem.stores.documents import DocumentStore


def docs(store: wm.ThreadStore) -> Any:
    assert isinstance(store, DocumentStore)
    return store


async def test_a_document_never_written_is_version_zero_with_no_content(
    store: wm.ThreadStore, tenant: str
) -> None:
    doc = await docs(store).get_document(tenant_id=tenant, scope="user", owner_id="u1")
    assert (doc.scope, doc.owner_id, doc.content, doc.version, doc.updated_at) == (
        "user",
        "u1",
        None,
        0,
        None,
    )


async def test_put_is_a_compare_and_set_on_the_version(store: wm.ThreadStore, tenant: str) -> None:
    """A write names the version it read; a stale one is a conflict and writes nothing."""
    key = {"tenant_id": tenant, "scope": "conversation", "owner_id": "c1"}
    first = await docs(store).put_document(**key, content="a", expected_version=0)
    assert (first.version, first.content, first.reason) == (1, "a", "update")
    assert first.updated_at is not None
    assert first.updated_at.tzinfo is not None
    with pytest.raises(wm.ConflictError) as caught:
        await docs(store).put_document(**key, content="b", expected_version=0)
    assert "version 1, not 0" in str(caught.value)
    unconditional = await docs(store).put_document(**key, content="c", expected_version=None)
    assert unconditional.version == 2
    current = await docs(store).get_document(**key)
    assert (current.version, current.content, current.reason) == (2, "c", "update")


async def test_a_first_write_expecting_a_later_version_conflicts_and_creates_nothing(
    store: wm.ThreadStore, tenant: str
) -> None:
    key = {"tenant_id": tenant, "scope": "user", "owner_id": "u1"}
    with pytest.raises(wm.ConflictError):
        await docs(store).put_document(**key, content="a", expected_version=3)
    assert (await docs(store).get_document(**key)).version == 0
    assert await docs(store).list_document_versions(**key) == []


async def test_versions_are_listed_newest_first_and_pruned(
    store: wm.ThreadStore, tenant: str
) -> None:
    key = {"tenant_id": tenant, "scope": "user", "owner_id": "u1"}
    for i in range(5):
        await docs(store).put_document(
            **key, content=f"v{i + 1}", expected_version=i, keep_versions=3
        )
    await docs(store).put_document(
        **key, content=None, expected_version=5, reason="clear", keep_versions=3
    )
    versions = await docs(store).list_document_versions(**key)
    assert [(v.version, v.content, v.reason) for v in versions] == [
        (6, None, "clear"),
        (5, "v5", "update"),
        (4, "v4", "update"),
    ]
    assert (await docs(store).get_document_version(**key, version=5)).content == "v5"
    with pytest.raises(wm.NotFoundError):
        await docs(store).get_document_version(**key, version=1)


async def test_delete_erases_the_document_and_its_history(
    store: wm.ThreadStore, tenant: str
) -> None:
    key = {"tenant_id": tenant, "scope": "conversation", "owner_id": "c1"}
    await docs(store).put_document(**key, content="a", expected_version=0)
    await docs(store).delete_document(**key)
    assert (await docs(store).get_document(**key)).version == 0
    assert await docs(store).list_document_versions(**key) == []


async def test_tenants_and_scopes_never_share_a_document(
    store: wm.ThreadStore, tenant: str
) -> None:
    await docs(store).put_document(
        tenant_id=tenant, scope="user", owner_id="same", content="mine", expected_version=0
    )
    for other in (
        {"tenant_id": f"{tenant}-b", "scope": "user", "owner_id": "same"},
        {"tenant_id": tenant, "scope": "conversation", "owner_id": "same"},
    ):
        assert (await docs(store).get_document(**other)).content is None
        with pytest.raises(wm.NotFoundError):
            await docs(store).get_document_version(**other, version=1)


async def test_text_round_trips_exactly(store: wm.ThreadStore, tenant: str) -> None:
    text = "Grüße 👋\n- «quotes» and 'apostrophes'\t%s %(x)s ?"
    key = {"tenant_id": tenant, "scope": "user", "owner_id": "u1"}
    await docs(store).put_document(**key, content=text, expected_version=0)
    assert (await docs(store).get_document(**key)).content == text


@pytest.mark.parametrize(
    ("key", "field"),
    [
        pytest.param({"scope": "global"}, "scope", id="unknown-scope"),
        pytest.param({"owner_id": ""}, "user_id", id="empty-owner"),
        pytest.param({"tenant_id": ""}, "tenant_id", id="empty-tenant"),
    ],
)
async def test_bad_keys_are_refused(
    store: wm.ThreadStore, tenant: str, key: dict[str, str], field: str
) -> None:
    call: dict[str, Any] = {"tenant_id": tenant, "scope": "user", "owner_id": "u1", **key}
    with pytest.raises(wm.ValidationError) as caught:
        await docs(store).put_document(**call, content="x", expected_version=0)
    assert caught.value.field == field


@pytest.mark.parametrize("version", [0, -1, "2", True])
async def test_a_version_must_be_a_positive_number(
    store: wm.ThreadStore, tenant: str, version: object
) -> None:
    with pytest.raises(wm.ValidationError) as caught:
        await docs(store).get_document_version(
            tenant_id=tenant, scope="user", owner_id="u1", version=version
        )
    assert caught.value.field == "version"
