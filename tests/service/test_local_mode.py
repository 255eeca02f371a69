"""Without API keys the server serves one local tenant, on loopback only; the first key makes
every request need one. A fresh SQLite file: the PostgreSQL database of the test run is shared
and has keys from other tests."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

import workingmem as wm
from workingmem.llm import OpenAIClient
from workingmem.llm.testing import ScriptedUpstream
from workingmem.service import LOCAL_TENANT, ServiceSettings, create_app
from workingmem.service.state import is_loopback
from workingmem.stores import SQLiteStore

from .conftest import CONFIG

HI = {"messages": [{"role": "user", "content": "hi"}]}


@pytest.fixture
async def sqlite(tmp_path: Path) -> AsyncIterator[SQLiteStore]:
    store = await SQLiteStore.open(tmp_path / "memory.db")
    try:
        yield store
    finally:
        await store.aclose()


@pytest.fixture
async def gateway(sqlite: SQLiteStore, upstream: ScriptedUpstream) -> AsyncIterator[wm.Gateway]:
    async with (
        OpenAIClient(base_url=upstream.base_url, max_retries=0) as llm,
        wm.Gateway(store=sqlite, llm=llm, config=CONFIG) as gateway,
    ):
        yield gateway


def client(gateway: wm.Gateway, host: str = "127.0.0.1", **settings: bool) -> httpx.AsyncClient:
    app = create_app(ServiceSettings(**settings), gateway=gateway)  # type: ignore[arg-type]
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=f"http://{host}")


async def test_without_keys_the_local_tenant_is_served_and_a_sent_key_is_ignored(
    gateway: wm.Gateway, sqlite: SQLiteStore
) -> None:
    async with client(gateway) as api:
        first = await api.post("/v1/chat/completions", headers={"X-Thread-Id": "th"}, json=HI)
        second = await api.get(
            "/v1/threads/th/messages", headers={"Authorization": "Bearer sk-anything"}
        )
    assert first.status_code == 200, first.text
    assert [m["content"] for m in second.json()["data"]] == ["hi", "You said: hi"]
    threads = await sqlite.list_threads(tenant_id=LOCAL_TENANT)
    assert [t.thread_id for t in threads] == ["th"]


async def test_without_keys_a_request_on_a_public_address_is_refused(
    gateway: wm.Gateway,
) -> None:
    async with client(gateway, host="203.0.113.7") as api:
        response = await api.get("/v1/threads")
    assert response.status_code == 403
    assert response.json()["error"]["code"] == "loopback_only"


async def test_the_first_key_makes_every_request_need_one(
    gateway: wm.Gateway, sqlite: SQLiteStore
) -> None:
    async with client(gateway) as api:
        assert (await api.get("/v1/threads")).status_code == 200
        created = await sqlite.create_api_key(tenant_id="acme")
        await sqlite.revoke_api_key(key_id=created.key.key_id)
        refused = await api.get("/v1/threads")
        assert refused.status_code == 401
        assert refused.json()["error"]["code"] == "missing_api_key"
        fresh = await sqlite.create_api_key(tenant_id="acme")
        ok = await api.get("/v1/threads", headers={"Authorization": f"Bearer {fresh.secret}"})
        assert ok.status_code == 200


async def test_require_keys_refuses_requests_while_the_database_has_none(
    gateway: wm.Gateway,
) -> None:
    async with client(gateway, require_keys=True) as api:
        assert (await api.get("/v1/threads")).status_code == 401
        assert (await api.get("/healthz")).status_code == 200


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        pytest.param("127.0.0.1", True, id="ipv4"),
        pytest.param("127.8.9.10", True, id="ipv4-range"),
        pytest.param("::1", True, id="ipv6"),
        pytest.param("[::1]", True, id="ipv6-bracketed"),
        pytest.param("localhost", True, id="localhost"),
        pytest.param("0.0.0.0", False, id="any"),
        pytest.param("::", False, id="ipv6-any"),
        pytest.param("192.168.1.2", False, id="private"),
        pytest.param("example.com", False, id="name"),
    ],
)
def test_only_loopback_counts_as_loopback(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


async def test_without_keys_the_page_shows_the_local_tenant_and_escapes_what_it_shows(
    gateway: wm.Gateway, sqlite: SQLiteStore
) -> None:
    thread = "<script>alert(1)</script>"
    await sqlite.append(
        tenant_id=LOCAL_TENANT, thread_id=thread, messages=[{"role": "user", "content": "hi"}]
    )
    async with client(gateway) as api:
        listing = await api.get("/ui/")
        login = await api.get("/ui/login")
        page = await api.get(f"/ui/threads/{httpx.URL(thread)}")
    assert listing.status_code == 200
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in listing.text
    assert "<script>alert(1)" not in listing.text
    assert "Log out" not in listing.text
    assert login.status_code == 303
    assert login.headers["location"] == "/ui/"
    assert page.status_code == 200
    assert "<script>alert(1)" not in page.text


@pytest.mark.parametrize(
    ("host", "status"),
    [
        ("rebound.attacker.example", 403),  # a page that reached us through DNS rebinding
        ("127.0.0.1:8080", 200),
        ("localhost:8080", 200),
        ("[::1]:8080", 200),
    ],
)
async def test_without_keys_only_a_loopback_host_header_is_served(
    gateway: wm.Gateway, host: str, status: int
) -> None:
    async with client(gateway) as api:
        response = await api.get("/v1/threads", headers={"Host": host})
    assert response.status_code == status, response.text


async def test_the_page_sends_its_security_headers_and_nonces_its_style(
    gateway: wm.Gateway,
) -> None:
    async with client(gateway) as api:
        page = await api.get("/ui/")
        api_call = await api.get("/v1/threads")
    policy = page.headers["Content-Security-Policy"]
    nonce = policy.split("'nonce-", 1)[1].split("'", 1)[0]
    assert f'<style nonce="{nonce}">' in page.text
    assert "frame-ancestors 'none'" in policy
    assert "default-src 'none'" in policy
    assert page.headers["X-Frame-Options"] == "DENY"
    assert page.headers["X-Content-Type-Options"] == "nosniff"
    assert page.headers["Cache-Control"] == "no-store"
    assert "Content-Security-Policy" not in api_call.headers  # the page's, not the API's
    async with client(gateway) as api:
        again = await api.get("/ui/")
    assert again.headers["Content-Security-Policy"] != policy  # a nonce per response


async def test_login_and_logout_refuse_another_sites_form_posts(
    gateway: wm.Gateway, sqlite: SQLiteStore
) -> None:
    await sqlite.create_api_key(tenant_id="acme")
    async with client(gateway) as api:
        form = {"Content-Type": "application/x-www-form-urlencoded"}
        evil = {**form, "Origin": "https://attacker.example"}
        assert (await api.post("/ui/login", content="key=wm_x", headers=evil)).status_code == 403
        assert (await api.post("/ui/logout", headers=evil)).status_code == 403
        same = {**form, "Origin": "http://127.0.0.1"}
        login = await api.post("/ui/login", content="key=wm_x", headers=same)
        assert login.status_code == 401  # checked: an unknown key, not a refused origin
        assert (await api.post("/ui/logout", headers=same)).status_code == 303


async def test_a_keyless_server_refuses_writes_another_sites_page_sends(
    gateway: wm.Gateway,
) -> None:
    """A form on another site can post to a loopback server without a preflight: with no
    key to prove who asks, a write must come from the server's own origin."""
    async with client(gateway) as api:
        assert await api.post("/v1/chat/completions", headers={"X-Thread-Id": "th"}, json=HI)
        evil = {"Origin": "https://attacker.example"}
        forged = await api.post("/v1/threads/th/memory/reset", headers=evil)
        assert (forged.status_code, forged.json()["error"]["code"]) == (403, "cross_origin")
        chat = await api.post(
            "/v1/chat/completions", headers={"X-Thread-Id": "th", **evil}, json=HI
        )
        assert chat.status_code == 403
        turns = (await api.get("/v1/threads/th/messages", headers=evil)).json()["data"]
        assert len(turns) == 2  # nothing written; a read (no side effect) is answered
        own = await api.post("/v1/threads/th/memory/reset", headers={"Origin": "http://127.0.0.1"})
        assert own.status_code == 200, own.text
        keyed = await api.post(  # a browser sends a key only after a preflight: no forgery
            "/v1/threads/th/memory/reset", headers={**evil, "Authorization": "Bearer sk-x"}
        )
        assert keyed.status_code == 200, keyed.text


async def test_the_pages_cookie_is_a_session_that_logout_and_revocation_end(
    gateway: wm.Gateway, sqlite: SQLiteStore
) -> None:
    created = await sqlite.create_api_key(tenant_id="acme")
    form = {"Content-Type": "application/x-www-form-urlencoded"}
    async with client(gateway) as api:
        login = await api.post("/ui/login", content=f"key={created.secret}", headers=form)
        assert login.status_code == 303
        cookie = api.cookies.get("wm_session")
        assert cookie is not None
        assert cookie.startswith("wms_")
        assert created.secret not in login.headers["set-cookie"]  # never the key itself
        assert (await api.get("/ui/")).status_code == 200
        await api.post("/ui/logout", headers=form)
    async with client(gateway) as stale:
        stale.cookies.set("wm_session", cookie)
        assert (await stale.get("/ui/")).status_code == 303  # to the login form
        relogin = await stale.post("/ui/login", content=f"key={created.secret}", headers=form)
        assert relogin.status_code == 303
        await sqlite.revoke_api_key(key_id=created.key.key_id)
        assert (await stale.get("/ui/")).status_code == 303  # the key's sessions ended
