"""The service for real: uvicorn on 127.0.0.1 in a background thread, and keys for it.

    with LiveServer(create_app(settings)) as live:
        httpx.get(f"{live.url}/healthz")

The server runs its own event loop, so the app's lifespan opens its own store there; the tests
talk to it over HTTP only, with sync clients (the openai SDK, httpx, Playwright, schemathesis).
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from types import TracebackType
from typing import TypeVar

import httpx
import pytest
import uvicorn
from fastapi import FastAPI
from starlette.types import ASGIApp, Receive, Scope, Send

import workingmem as wm
from workingmem.stores.keys import ApiKeyStore, NewApiKey

__all__ = ["LiveServer", "Seen", "create_key", "free_port", "revoke_key", "run_async", "wait_for"]

T = TypeVar("T")


def run_async(work: Callable[[], Awaitable[T]]) -> T:
    """Runs async work to its end from sync code, in a thread of its own: the caller's thread
    may have a loop running already (Playwright's sync API keeps one)."""

    async def main() -> T:
        return await work()

    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, main()).result()


class Seen:
    """Notes every request an app gets, HTTP or WebSocket, before the app serves it: which
    transport a client took (``app.add_middleware(Seen, seen=seen)``)."""

    def __init__(self, app: ASGIApp, seen: list[tuple[str, str]]) -> None:
        self.app = app
        self.seen = seen

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] in ("http", "websocket"):
            self.seen.append((scope["type"], scope["path"]))
        await self.app(scope, receive, send)


class LiveServer:
    """Serves an app on a free port of 127.0.0.1 until the with block ends."""

    def __init__(self, app: FastAPI) -> None:
        self.app = app
        # IPPROTO_TCP, not 0: asyncio sets TCP_NODELAY only then, and without it every
        # keep-alive request waits ~40 ms for delayed ACKs.
        self._socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        self._socket.bind(("127.0.0.1", 0))
        self.port = self._socket.getsockname()[1]
        config = uvicorn.Config(
            app, log_config=None, log_level="warning", lifespan="on", http="h11"
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [self._socket]}, daemon=True
        )

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> LiveServer:
        self._thread.start()
        deadline = time.monotonic() + 20
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                self.close()
                raise RuntimeError("the service did not start (see the log)")
            time.sleep(0.01)
        return self

    def close(self) -> None:
        """Stops the server; the lifespan drains the background queue and closes the store."""
        self._server.should_exit = True
        self._thread.join(timeout=30)
        self._socket.close()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def free_port() -> int:
    """A port free on 127.0.0.1 now, for a server started as a process of its own (which takes
    no socket from us)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def wait_for(check: Callable[[], bool], what: str, seconds: float) -> None:
    """Polls `check()` until it holds, for a process of its own starting (no sleep decides an
    order: only the deadline is timed); a connection refused meanwhile is a no yet."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            if check():
                return
        except (httpx.HTTPError, OSError):
            pass
        time.sleep(0.02)
    pytest.fail(f"{what} within {seconds:.0f} s")


def create_key(database_url: str, tenant: str, label: str = "") -> NewApiKey:
    """A key for `tenant`, written to the database as `workingmem keys create` does."""

    async def create() -> NewApiKey:
        async with await wm.open_store(database_url) as store:
            assert isinstance(store, ApiKeyStore)
            return await store.create_api_key(tenant_id=tenant, label=label)

    return run_async(create)


def revoke_key(database_url: str, key_id: str) -> None:
    async def revoke() -> None:
        async with await wm.open_store(database_url) as store:
            assert isinstance(store, ApiKeyStore)
            await store.revoke_api_key(key_id=key_id)

    run_async(revoke)
