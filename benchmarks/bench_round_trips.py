"""Database round trips per store operation and per `Gateway.ask`, on SQLite and PostgreSQL.

    scripts/with-postgres .venv/bin/python benchmarks/bench_round_trips.py

Counts, not seconds, so one run on a noisy machine is exact. SQLite: every call that crosses
to a connection's thread (``Connection.call``: a statement, BEGIN, COMMIT, or a whole write),
which is what a round trip costs there; a session that needs no thread (nothing queued on it,
no other process holding the lock) runs on the loop's own connection and crosses nothing
(0). PostgreSQL: every statement psycopg
sends and waits for (a query, an ``executemany``, which psycopg pipelines, BEGIN and COMMIT),
and in a write's pipeline each sync instead (its statements travel together). Run it with
``PYTHONPATH`` pointing at another checkout's ``src`` to compare two versions of the store.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import workingmem as wm
from workingmem.llm.testing import Reply, ScriptedUpstream
from workingmem.stores._sqlite_thread import Connection
from workingmem.tokens import tokenizer_for

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _cli import POSTGRES_ENV

counts: Counter[str] = Counter()

UPDATE_NOT_DUE = wm.Profile(
    id="default", working_memory=wm.WorkingMemoryConfig(recent_turns=12, update_every_turns=12)
)
"""The default profile, its summary not due for the few asks measured (a due update's model
call and writes are the background's, not the ask's)."""


def _count_sqlite() -> None:
    original = Connection.call

    async def counted(self: Connection, fn: Any) -> Any:
        counts["trips"] += 1
        return await original(self, fn)

    Connection.call = counted  # type: ignore[method-assign]


def _count_postgres() -> None:
    import psycopg

    execute = psycopg.AsyncCursor.execute
    executemany = psycopg.AsyncCursor.executemany
    command = psycopg.AsyncConnection._exec_command
    sync = psycopg.AsyncPipeline.sync
    leave = psycopg.AsyncPipeline.__aexit__

    def piped(conn: Any) -> bool:
        return conn._pipeline is not None  # sent with the pipeline's next sync, counted there

    async def counted_execute(self: Any, query: Any, params: Any = None, **kw: Any) -> Any:
        counts["trips"] += not piped(self.connection)
        return await execute(self, query, params, **kw)

    async def counted_many(self: Any, query: Any, params_seq: Any, **kw: Any) -> Any:
        counts["trips"] += not piped(self.connection)  # psycopg pipelines the rows
        return await executemany(self, query, params_seq, **kw)

    def counted_command(self: Any, command_: Any, *args: Any, **kw: Any) -> Any:
        counts["trips"] += not piped(self)  # BEGIN, COMMIT, ROLLBACK
        return command(self, command_, *args, **kw)

    async def counted_sync(self: Any) -> None:
        counts["trips"] += 1
        await sync(self)

    async def counted_leave(self: Any, *exc: Any) -> None:
        counts["trips"] += 1  # the pipeline's last sync
        await leave(self, *exc)

    psycopg.AsyncCursor.execute = counted_execute  # type: ignore[method-assign]
    psycopg.AsyncCursor.executemany = counted_many  # type: ignore[method-assign]
    psycopg.AsyncConnection._exec_command = counted_command  # type: ignore[method-assign]
    psycopg.AsyncPipeline.sync = counted_sync  # type: ignore[method-assign]
    psycopg.AsyncPipeline.__aexit__ = counted_leave  # type: ignore[method-assign]


async def measure(name: str, work: Callable[[], Awaitable[object]]) -> int:
    counts.clear()
    await work()
    return counts["trips"]


async def run(url: str) -> dict[str, int]:
    tokenizer = tokenizer_for(wm.ModelInfo(id="gpt-4o", context_window=128_000))
    tenant = f"bench-{uuid.uuid4().hex[:8]}"  # a database shared with an earlier run is fine
    results: dict[str, int] = {}
    async with await wm.open_store(url) as store:
        # A thread of 50 turns, counted with the tokenizer (the steady state of a live thread).
        for index in range(25):
            await store.append(
                tenant_id=tenant,
                thread_id="th",
                messages=[
                    {"role": "user", "content": f"question {index}"},
                    {"role": "assistant", "content": f"answer {index}"},
                ],
            )
        await store.read_tail(tenant_id=tenant, thread_id="th", tokenizer=tokenizer, limit=64)
        key = await store.create_api_key(tenant_id=tenant)
        operations: dict[str, Callable[[], Awaitable[object]]] = {
            "append 1 message": lambda: store.append(
                tenant_id=tenant, thread_id="th", messages=[{"role": "user", "content": "next"}]
            ),
            "read_tail (window load)": lambda: store.read_tail(
                tenant_id=tenant, thread_id="th", tokenizer=tokenizer, limit=64
            ),
            "get_memory_state": lambda: store.get_memory_state(tenant_id=tenant, thread_id="th"),
            "find_api_key": lambda: store.find_api_key(key.secret),
            "get_document": lambda: store.get_document(
                tenant_id=tenant, scope="conversation", owner_id="th"
            ),
            "put_document": lambda: store.put_document(
                tenant_id=tenant,
                scope="conversation",
                owner_id="th",
                content="notes",
                expected_version=None,
            ),
        }
        for name, work in operations.items():
            results[name] = await measure(name, work)
        with ScriptedUpstream(responder=lambda request: Reply("Sure.")) as upstream:
            async with (
                wm.OpenAIClient(base_url=upstream.base_url, api_key="k") as llm,
                wm.Gateway(store=store, llm=llm, profiles=[UPDATE_NOT_DUE]) as gateway,
            ):
                asked = iter(range(1_000_000))

                async def ask() -> None:
                    # a new question each time (the same one again on a thread of one exchange
                    # would be a regenerate)
                    message = f"Question {next(asked)}"
                    await gateway.ask(tenant_id=tenant, thread_id="asked", message=message)
                    await gateway.when_idle()

                for _ in range(2):  # a thread longer than one exchange, its counts cached
                    await ask()
                results["Gateway.ask (SUMMARY_BUFFER, update not due)"] = await measure("ask", ask)

                async def ask_new() -> None:
                    thread = f"new-{uuid.uuid4().hex[:8]}"
                    await gateway.ask(tenant_id=tenant, thread_id=thread, message="Hello")
                    await gateway.when_idle()

                results["Gateway.ask, a new thread"] = await measure("ask new", ask_new)

                history: list[wm.Message] = []  # a client that resends it all, naming no thread

                async def ask_resent() -> None:
                    history.append({"role": "user", "content": f"Question {next(asked)}"})
                    done = await gateway.ask(tenant_id=tenant, messages=history)
                    history.append({"role": "assistant", "content": done.answer})
                    await gateway.when_idle()

                for _ in range(2):
                    await ask_resent()
                results["Gateway.ask, the whole history resent, no thread id"] = await measure(
                    "ask resent", ask_resent
                )
    return results


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--postgres", default=os.environ.get(POSTGRES_ENV), metavar="URL")
    args = parser.parse_args(argv)
    _count_sqlite()
    table: dict[str, dict[str, int]] = {}
    with tempfile.TemporaryDirectory() as folder:
        table["SQLite"] = asyncio.run(run(str(Path(folder) / "trips.db")))
    if args.postgres:
        _count_postgres()
        table["PostgreSQL"] = asyncio.run(run(args.postgres))
    print(f"store: {wm.SQLiteStore.__module__} ({Path(wm.__file__).parent})")
    columns = list(table)
    print(f"{'operation':<54}" + "".join(f"{c:>12}" for c in columns))
    for operation in table["SQLite"]:
        print(f"{operation:<54}" + "".join(f"{table[c][operation]:>12}" for c in columns))


if __name__ == "__main__":
    main()
