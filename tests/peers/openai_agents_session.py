"""A pytest plugin that runs openai-agents' own session tests against `WorkingMemorySession`.

    scripts/peer-tests        # downloads the SDK's source of the installed version, runs them

The SDK's tests build their sessions as ``SQLiteSession(session_id, db_path, ...)``. This
plugin puts a `WorkingMemorySession` on a SQLite store in that name's place before their
modules are imported, so every test that treats the session through the `Session` protocol
runs on ours. Tests of SQLiteSession's own machinery (its connections, file locks, raw rows)
are left out by `NOT_APPLICABLE`, each with the reason. No file of theirs is kept here.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import pytest

import workingmem as wm
from workingmem.integrations.openai_agents import WorkingMemorySession

NOT_APPLICABLE = {
    "test_sqlite_session_close_closes_worker_thread_connections": "SQLiteSession's threads",
    "test_sqlite_session_reaps_connections_from_exited_worker_threads": "SQLiteSession's threads",
    "test_sqlite_session_closes_retired_connections_before_the_next_allocation": (
        "SQLiteSession's connection pool"
    ),
    "test_sqlite_session_keeps_connections_of_live_worker_threads": "SQLiteSession's threads",
    "test_sqlite_session_closed_rejects_empty_add_items": "SQLiteSession's closed flag",
    "test_sqlite_session_pop_item_skips_corrupt_most_recent": "rows written with raw SQL",
    "test_sqlite_session_pop_item_returns_none_after_dropping_only_corrupt_rows": (
        "rows written with raw SQL"
    ),
    "test_sqlite_session_get_items_limit_skips_corrupt_newest_rows": "rows written with raw SQL",
    "test_sqlite_session_get_items_session_settings_limit_skips_corrupt_rows": (
        "rows written with raw SQL"
    ),
    "test_sqlite_session_file_lock_is_shared_across_instances": "SQLiteSession's file locks",
    "test_sqlite_session_failed_add_items_releases_write_lock": "SQLiteSession's write lock",
    "test_sqlite_session_failed_clear_session_rolls_back": "SQLiteSession's connections",
    "test_sqlite_session_failed_pop_item_releases_write_lock": "SQLiteSession's connections",
    "test_sqlite_session_rollback_failure_evicts_connection": "SQLiteSession's connections",
    "test_sqlite_session_close_retries_quarantined_connection": "SQLiteSession's connections",
    "test_sqlite_session_post_commit_cancellation_propagates_after_known_outcome": (
        "SQLiteSession's connections (a sqlite3 connection patched in)"
    ),
    "test_automatic_compaction_rollback_budget[True]": (
        "SQLiteSession's private compaction snapshot (_get_compaction_snapshot)"
    ),
    "test_settled_pop_failure_invalidates_response_chain": "SQLiteSession's connections",
    "test_settled_clear_failure_invalidates_response_chain": "SQLiteSession's connections",
}
"""Their tests of SQLiteSession itself, not of a session: by name (or name[parameters]), with
why. Their files test_compaction_suffix.py and test_compaction_model_visibility.py test the
private snapshot protocol SQLiteSession offers the compaction wrapper, and are not run."""

FILES = (
    "tests/memory/test_session.py",
    "tests/memory/test_session_limit.py",
    "tests/memory/test_session_context_wrapper.py",
    "tests/memory/test_session_persistence_sanitize.py",
    "tests/memory/test_openai_responses_compaction_session.py",
)
"""Their test files that apply to any session."""

_SLIDING = wm.WorkingMemoryConfig(strategy=wm.Strategy.SLIDING_WINDOW)


class PeerSession(WorkingMemorySession):
    """`WorkingMemorySession` with SQLiteSession's constructor: ``":memory:"`` is a database
    of the session's own, as theirs is; a path is a SQLite file."""

    def __init__(
        self,
        session_id: str,
        db_path: str | Path = ":memory:",
        *args: Any,
        session_settings: Any = None,
        **kwargs: Any,
    ) -> None:
        path = str(db_path)
        if path == ":memory:":
            path = str(Path(tempfile.mkdtemp(prefix="peer-session-")) / "memory.db")
        super().__init__(
            session_id,
            store=f"sqlite:///{path}",
            tenant_id="peer-tests",
            config=_SLIDING,
            session_settings=session_settings,
        )


def pytest_configure(config: pytest.Config) -> None:
    import agents
    import agents.memory
    import agents.memory.sqlite_session

    for module in (agents, agents.memory, agents.memory.sqlite_session):
        module.SQLiteSession = PeerSession  # type: ignore[attr-defined]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        reason = NOT_APPLICABLE.get(item.name) or NOT_APPLICABLE.get(
            getattr(item, "originalname", item.name)
        )
        if reason is not None:
            item.add_marker(pytest.mark.skip(reason=f"not a session behaviour: {reason}"))
