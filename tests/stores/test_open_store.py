"""`open_store`: the store a URL names, and a clear error for one it cannot name."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import workingmem as wm
from workingmem import stores


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("", "must be a database URL or a file path"),
        ("   ", "must be a database URL or a file path"),
        ("sqlite://memory.db", "a SQLite URL is sqlite:///path.db"),
        ("sqlite:///", "a SQLite URL is sqlite:///path.db"),
        ("mysql://db/memory", "unsupported database scheme 'mysql'"),
    ],
)
async def test_a_url_no_store_answers_to_is_refused_and_creates_nothing(
    url: str, says: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(wm.ValidationError, match=says) as caught:
        await wm.open_store(url)
    assert caught.value.field == "url"
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("form", ["path", "url", "memory"])
async def test_sqlite_opens_from_a_path_a_url_or_in_memory(form: str, tmp_path: Path) -> None:
    target = {
        "path": str(tmp_path / "a" / "memory.db"),
        "url": f"sqlite:///{tmp_path / 'memory.db'}",
        "memory": "sqlite:///:memory:",
    }[form]
    async with await wm.open_store(target) as store:
        assert isinstance(store, stores.SQLiteStore)
        await store.append(
            tenant_id="t", thread_id="th", messages=[{"role": "user", "content": "hi"}]
        )
        assert [t.content for t in await store.list_turns(tenant_id="t", thread_id="th")] == ["hi"]


def test_the_postgres_store_is_imported_only_when_named() -> None:
    assert stores.PostgresStore.__name__ == "PostgresStore"
    with pytest.raises(AttributeError):
        _ = stores.NoSuchStore
