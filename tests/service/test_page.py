"""The web page in a real browser (Debian's headless Chromium, driven by Playwright), on SQLite
and PostgreSQL: log in with a key, see what the gateway remembers of a thread, forget it."""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import openai
import pytest

from .live import LiveServer, create_key
from .test_openai_sdk import until

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--headless",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def _missing() -> list[str]:
    missing = []
    if shutil.which(CHROMIUM) is None:
        missing.append(f"{CHROMIUM} (apt-get install chromium chromium-driver)")
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        missing.append("the playwright package (pip install -e '.[dev]')")
    return missing


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    """Headless Chromium; missing, the test fails under CI and is skipped elsewhere."""
    missing = _missing()
    if missing:
        reason = "the page test needs a browser; missing: " + ", ".join(missing)
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    context = browser.new_context()
    page = context.new_page()
    page.set_default_timeout(10_000)
    try:
        yield page
    finally:
        context.close()


def seed(live: LiveServer, key: str) -> dict[str, Any]:
    """A thread whose summary has been written: facts, notes, a version."""
    with openai.OpenAI(base_url=f"{live.url}/v1", api_key=key, max_retries=0) as client:
        for text in ("please remember: I am Ada <b>not bold</b>", "I live in Lyon"):
            client.chat.completions.create(
                model="answer-model",
                messages=[{"role": "user", "content": text}],
                extra_headers={"X-Thread-Id": "trip/lyon", "X-User-Id": "ada"},
            )
    headers = {"Authorization": f"Bearer {key}"}

    def summarized() -> dict[str, Any] | None:
        response = httpx.get(f"{live.url}/v1/threads/trip/lyon/memory", headers=headers)
        memory: dict[str, Any] = response.json()
        return memory if memory["summary"] else None

    memory = until(summarized)
    assert memory is not None, "the background update never wrote a summary"
    return memory


def test_the_page_shows_a_threads_memory_and_forgets_it(
    service: LiveServer, database_url: str, tenant: str, page: Page, tmp_path: Path
) -> None:
    key = create_key(database_url, tenant, "page").secret
    memory = seed(service, key)

    page.goto(f"{service.url}/ui/")
    assert page.url.endswith("/ui/login")
    page.fill("#key", "wm_wrong")
    page.click("button[type=submit]")
    assert "unknown or was revoked" in page.inner_text("#login-error")
    page.fill("#key", key)
    page.click("button[type=submit]")
    page.wait_for_url(f"{service.url}/ui/")
    assert tenant in page.inner_text("header")

    page.set_viewport_size({"width": 1280, "height": 900})
    page.click("text=trip/lyon")
    page.wait_for_url(re.compile(r"/ui/threads/trip%2Flyon$"))  # one path segment
    assert (
        page.locator("#forget").get_attribute("data-url") == "/v1/threads/trip%2Flyon/memory/reset"
    )
    forget = page.locator("#forget").bounding_box()
    assert forget is not None
    assert forget["y"] + forget["height"] <= 900, "the Forget button is below the fold"
    conversation = page.locator("#conversation li")
    assert conversation.count() == memory["turn_count"]
    assert "please remember: I am Ada <b>not bold</b>" in conversation.first.inner_text()
    notes = page.inner_text("#notes")
    assert "please remember: I am Ada <b>not bold</b>" in notes  # shown as text, escaped
    assert page.locator("#notes b").count() == 0
    facts = page.locator("#facts tbody tr")
    assert facts.count() == 1
    assert facts.first.inner_text().split("\t")[0].strip() == "1"
    facts.first.locator("a").first.click()  # the fact's turn, in the conversation
    assert page.url.endswith("#turn-1")
    assert page.locator("#turn-1").is_visible()
    meter = page.locator("#window")
    assert int(meter.get_attribute("value") or 0) == memory["window_tokens"]
    assert int(meter.get_attribute("max") or 0) == memory["budget_tokens"]
    assert page.locator("details.version").count() == len(memory["summary_versions"])
    assert "Empty" in page.inner_text("#working-memory")
    assert page.inner_text("#strategy") == "SUMMARY_BUFFER"
    page.screenshot(path=str(tmp_path / "thread.png"), full_page=True)

    page.once("dialog", lambda dialog: dialog.dismiss())
    page.click("#forget")
    page.wait_for_timeout(200)
    assert "please remember" in page.inner_text("#notes"), "dismissing must forget nothing"

    page.once("dialog", lambda dialog: dialog.accept())
    with page.expect_navigation():
        page.click("#forget")
    notes_after = page.inner_text("#notes")
    assert notes_after.startswith("No notes: forgotten")
    assert "not summarized again" in notes_after
    assert page.inner_text("#facts") == "No facts."
    after = httpx.get(
        f"{service.url}/v1/threads/trip/lyon/memory", headers={"Authorization": f"Bearer {key}"}
    ).json()
    assert (after["summary"], after["facts"]) == ("", [])
    assert after["turn_count"] == memory["turn_count"]


def test_a_missing_thread_is_a_404_page(
    service: LiveServer, database_url: str, tenant: str, page: Page
) -> None:
    log_in(page, service.url, create_key(database_url, tenant, "page").secret)
    assert "No threads yet" in page.inner_text("main")
    response = page.goto(f"{service.url}/ui/threads/nope")
    assert response is not None
    assert response.status == 404
    assert "No such thread" in page.inner_text("h1")


def log_in(page: Page, url: str, key: str) -> None:
    page.goto(f"{url}/ui/login")
    page.fill("#key", key)
    page.click("button[type=submit]")
    page.wait_for_url(f"{url}/ui/")


def test_the_page_says_what_goes_with_a_thread_and_deletes_it(
    service: LiveServer, database_url: str, tenant: str, page: Page
) -> None:
    """What a deletion takes (the thread's stored response and chat completion, counted),
    asked first: dismissed, nothing goes; accepted, the thread and its records are gone."""
    key = create_key(database_url, tenant, "page").secret
    headers = {"X-Thread-Id": "trip/lyon"}
    with openai.OpenAI(base_url=f"{service.url}/v1", api_key=key, max_retries=0) as client:
        stored = client.chat.completions.create(
            model="answer-model",
            messages=[{"role": "user", "content": "Keep this one."}],
            store=True,
            extra_headers=headers,
        )
        response = client.responses.create(
            model="answer-model", input="And this one.", extra_headers=headers
        )
        client.chat.completions.create(  # another thread's stays
            model="answer-model",
            messages=[{"role": "user", "content": "Elsewhere."}],
            store=True,
            extra_headers={"X-Thread-Id": "other"},
        )
    log_in(page, service.url, key)
    page.goto(f"{service.url}/ui/threads/trip%2Flyon")
    assert page.inner_text("#kept") == "1 stored response, 1 stored chat completion"
    assert page.locator("#delete").get_attribute("data-url") == "/v1/threads/trip%2Flyon"

    asked: list[str] = []

    def dismissed(dialog: Any) -> None:
        asked.append(dialog.message)
        dialog.dismiss()

    page.once("dialog", dismissed)
    page.click("#delete")
    assert asked == ["Delete this thread and everything kept of it? This cannot be undone."]
    api = {"Authorization": f"Bearer {key}"}
    thread = httpx.get(f"{service.url}/v1/threads/trip/lyon/memory", headers=api)
    assert thread.status_code == 200, "dismissing must delete nothing"

    page.once("dialog", lambda dialog: dialog.accept())
    page.click("#delete")
    page.wait_for_url(f"{service.url}/ui/")
    assert "trip/lyon" not in page.inner_text("main")
    assert "other" in page.inner_text("main")
    for gone in (
        "/v1/threads/trip/lyon/memory",
        f"/v1/chat/completions/{stored.id}",
        f"/v1/responses/{response.id}",
    ):
        assert httpx.get(f"{service.url}{gone}", headers=api).status_code == 404
