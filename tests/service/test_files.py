"""Files through the gateway, with the official SDKs over HTTP: a PDF a client attaches reaches
the model whatever API the client and the upstream speak, byte for byte, and costs the window
its pages, not its base64 (a 150 KB PDF was a request too large for any model)."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from typing import Any

import anthropic
import httpx
import openai
import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_openai import ChatOpenAI
from pydantic import SecretStr

import workingmem as wm
from tests.helpers import (
    assert_valid_anthropic_request,
    assert_valid_chat_request,
    pdf_bytes,
    summarizing_responder,
)
from workingmem.llm.testing import Reply, ScriptedUpstream
from workingmem.service import create_app

from .conftest import CONFIG, settings_for
from .live import LiveServer, create_key

PDF_B64 = base64.b64encode(pdf_bytes(1, padding=150_000)).decode()
PDF_URL = f"data:application/pdf;base64,{PDF_B64}"
"""One page, 150 KB: about 140,000 tokens as base64, 1,500 as a page."""
CHAT_FILE: Any = {"type": "file", "file": {"filename": "report.pdf", "file_data": PDF_URL}}
SUMMARIZE: Any = {"type": "text", "text": "Summarize this."}


def reading(request: dict[str, Any]) -> Reply:
    """Any of the three APIs' upstreams: says how many user messages it was sent (files are
    checked from its requests)."""
    if request.get("model") == "cheap-model":
        return summarizing_responder(request)
    sent = request.get("messages", request.get("input", []))
    return Reply(f"Read {len(sent)} messages.", prompt_tokens=2_000, completion_tokens=4)


def answers(upstream: ScriptedUpstream) -> list[dict[str, Any]]:
    return [r for r in upstream.requests if r.get("model") != "cheap-model"]


def user_contents(request: dict[str, Any]) -> list[Any]:
    """The user messages' contents of an upstream request of any API."""
    sent = request.get("messages", request.get("input", []))
    return [m["content"] for m in sent if m.get("role") == "user"]


@pytest.fixture
def gateway(
    database_url: str, tenant: str, upstream_api: str
) -> Iterator[tuple[str, str, ScriptedUpstream]]:
    """(the gateway's URL, a key, the upstream) with an upstream of `upstream_api`."""
    with ScriptedUpstream(responder=reading) as upstream:
        settings = settings_for(database_url, upstream, upstream_api=upstream_api)
        with LiveServer(create_app(settings)) as live:
            yield live.url, create_key(database_url, tenant, "tests").secret, upstream


@pytest.fixture
def chat_gateway(database_url: str, tenant: str) -> Iterator[tuple[str, str, ScriptedUpstream]]:
    with (
        ScriptedUpstream(responder=reading) as upstream,
        LiveServer(create_app(settings_for(database_url, upstream))) as live,
    ):
        yield live.url, create_key(database_url, tenant, "tests").secret, upstream


def test_a_large_pdf_is_answered_and_the_thread_before_it_stays_in_the_window(
    gateway: tuple[str, str, ScriptedUpstream], upstream_api: str
) -> None:
    """The model's window is 8,000 tokens: counted by its base64 the PDF alone was over it (a
    400); as one page it fits with the thread, and it reaches each kind of upstream as that
    API's own file with the same bytes."""
    url, key, upstream = gateway
    thread = {"X-Thread-Id": "files-1"}
    with openai.OpenAI(base_url=f"{url}/v1", api_key=key, max_retries=0) as client:
        client.chat.completions.create(
            model="answer-model",
            messages=[{"role": "user", "content": "My name is Ada."}],
            extra_headers=thread,
        )
        answer = client.chat.completions.create(
            model="answer-model",
            messages=[{"role": "user", "content": [SUMMARIZE, CHAT_FILE]}],
            extra_headers=thread,
        )
    assert (answer.choices[0].message.content or "").startswith("Read ")
    last = answers(upstream)[-1]
    if upstream_api == "anthropic":
        assert_valid_anthropic_request(last)
    first, attached = user_contents(last)
    assert "My name is Ada." in str(first)
    file = {
        "chat": {"type": "file", "file": {"filename": "report.pdf", "file_data": PDF_URL}},
        "anthropic": {
            "type": "document",
            "source": {"type": "base64", "media_type": "application/pdf", "data": PDF_B64},
            "title": "report.pdf",
        },
        "responses": {"type": "input_file", "file_data": PDF_URL, "filename": "report.pdf"},
    }[upstream_api]
    assert file in attached
    page = httpx.get(f"{url}/ui/threads/files-1", headers={"Authorization": f"Bearer {key}"})
    assert page.status_code == 200
    assert "Summarize this. [file: report.pdf]" in page.text  # the page names the file


def test_a_claude_document_reaches_a_chat_model_as_its_file(
    chat_gateway: tuple[str, str, ScriptedUpstream],
) -> None:
    url, key, upstream = chat_gateway
    document: Any = {
        "type": "document",
        "source": {"type": "base64", "media_type": "application/pdf", "data": PDF_B64},
        "title": "Q3 report",
    }
    notes: Any = {
        "type": "document",
        "source": {"type": "text", "media_type": "text/plain", "data": "Budget: 4,000 euros."},
    }
    with anthropic.Anthropic(base_url=url, api_key=key, max_retries=0) as claude:
        claude.messages.create(
            model="answer-model",
            max_tokens=200,
            messages=[
                {"role": "user", "content": [document, notes, {"type": "text", "text": "Sum up."}]}
            ],
            extra_headers={"X-Thread-Id": "files-2"},
        )
    (content,) = user_contents(answers(upstream)[-1])
    assert content == [
        {"type": "file", "file": {"filename": "Q3 report", "file_data": PDF_URL}},
        {"type": "text", "text": "Budget: 4,000 euros."},
        {"type": "text", "text": "Sum up."},
    ]


def test_a_responses_file_reaches_a_chat_model_as_its_file(
    chat_gateway: tuple[str, str, ScriptedUpstream],
) -> None:
    url, key, upstream = chat_gateway
    with openai.OpenAI(base_url=f"{url}/v1", api_key=key, max_retries=0) as client:
        client.responses.create(
            model="answer-model",
            input=[
                {
                    "role": "user",
                    "content": [
                        {"type": "input_text", "text": "Sum up."},
                        {"type": "input_file", "file_data": PDF_URL, "filename": "a.pdf"},
                        {"type": "input_file", "file_id": "file-abc123"},
                    ],
                }
            ],
            extra_headers={"X-Thread-Id": "files-3"},
        )
    (content,) = user_contents(answers(upstream)[-1])
    assert content == [
        {"type": "text", "text": "Sum up."},
        {"type": "file", "file": {"filename": "a.pdf", "file_data": PDF_URL}},
        {"type": "file", "file": {"file_id": "file-abc123"}},
    ]


@pytest.mark.parametrize("field", ["file_id", "file_data"])
def test_a_responses_file_of_an_empty_id_or_data_is_refused_by_the_schema(
    field: str, chat_gateway: tuple[str, str, ScriptedUpstream]
) -> None:
    """An empty id (or data) names no file: a 422 naming it, as the published schema says,
    and nothing is stored."""
    url, key, upstream = chat_gateway
    file: Any = {"type": "input_file", field: ""}
    with openai.OpenAI(base_url=f"{url}/v1", api_key=key, max_retries=0) as client:
        with pytest.raises(openai.UnprocessableEntityError) as raised:
            client.responses.create(
                model="answer-model",
                input=[{"role": "user", "content": [file]}],
                extra_headers={"X-Thread-Id": "files-4"},
            )
        assert f"input.0.message.content.0.input_file.{field}: String should" in str(raised.value)
        with pytest.raises(openai.NotFoundError):  # no thread: nothing was stored
            client.get("/threads/files-4/messages", cast_to=httpx.Response)
    assert answers(upstream) == []


def second_pdf() -> str:
    return base64.b64encode(pdf_bytes(1, padding=150_000)).decode()


@pytest.fixture
def small_gateway(
    database_url: str, tenant: str, upstream_api: str
) -> Iterator[tuple[str, str, ScriptedUpstream]]:
    """`gateway`, whose requests carry at most 300,000 characters of inline files: one PDF."""
    config = CONFIG.model_copy(update={"max_inline_file_bytes": 300_000})
    with ScriptedUpstream(responder=reading) as upstream:
        settings = settings_for(database_url, upstream, upstream_api=upstream_api, gateway=config)
        with LiveServer(create_app(settings)) as live:
            yield live.url, create_key(database_url, tenant, "tests").secret, upstream


def test_an_older_file_is_named_once_the_newer_fill_the_requests_files(
    small_gateway: tuple[str, str, ScriptedUpstream], upstream_api: str
) -> None:
    """Two PDFs of 200,000 characters of base64 with a limit of 300,000: the second question
    sends its own PDF and names the first, on every kind of upstream; the thread keeps both
    files as sent (R25). A client that sends its own history (R28) has it sent as it came."""
    url, key, upstream = small_gateway
    later_b64 = second_pdf()
    later = f"data:application/pdf;base64,{later_b64}"
    sent: list[Any] = []
    with openai.OpenAI(base_url=f"{url}/v1", api_key=key, max_retries=0) as client:
        for name, data in (("first.pdf", PDF_URL), ("second.pdf", later)):
            part: Any = {"type": "file", "file": {"filename": name, "file_data": data}}
            sent.append({"role": "user", "content": [SUMMARIZE, part]})
            answer = client.chat.completions.create(
                model="answer-model", messages=[sent[-1]], extra_headers={"X-Thread-Id": "files-4"}
            )
            sent.append({"role": "assistant", "content": answer.choices[0].message.content})
        first, second = user_contents(answers(upstream)[-1])
        named = {
            "type": "input_text" if upstream_api == "responses" else "text",
            "text": "[file: first.pdf, attached earlier]",
        }
        assert named in first
        assert later_b64 in json.dumps(second)
        assert PDF_B64 not in json.dumps(answers(upstream)[-1])

        stored = httpx.get(
            f"{url}/v1/threads/files-4/messages", headers={"Authorization": f"Bearer {key}"}
        ).json()["data"]
        assert [m["content"] for m in stored if m["role"] == "user"] == [
            sent[0]["content"],
            sent[2]["content"],
        ]

        client.chat.completions.create(
            model="answer-model",
            messages=[*sent, {"role": "user", "content": "Which is longer?"}],
            extra_headers={"X-Thread-Id": "files-4", "X-Workingmem-History": "client"},
        )
    whole = json.dumps(answers(upstream)[-1])
    assert PDF_B64 in whole
    assert later_b64 in whole


def test_a_claude_document_stored_natively_is_named_once_older_files_fill_the_request(
    database_url: str, tenant: str
) -> None:
    """A Claude client in front of an Anthropic upstream: the turns go back as stored, except
    an older document past the limit, named in a text block."""
    config = CONFIG.model_copy(update={"max_inline_file_bytes": 300_000})
    with ScriptedUpstream(responder=reading) as upstream:
        settings = settings_for(database_url, upstream, upstream_api="anthropic", gateway=config)
        with (
            LiveServer(create_app(settings)) as live,
            anthropic.Anthropic(
                base_url=live.url,
                api_key=create_key(database_url, tenant, "tests").secret,
                max_retries=0,
            ) as claude,
        ):
            for title, data in (("First", PDF_B64), ("Second", second_pdf())):
                source: Any = {"type": "base64", "media_type": "application/pdf", "data": data}
                document: Any = {"type": "document", "source": source, "title": title}
                claude.messages.create(
                    model="answer-model",
                    max_tokens=100,
                    messages=[{"role": "user", "content": [document, SUMMARIZE]}],
                    extra_headers={"X-Thread-Id": "files-5"},
                )
    last = answers(upstream)[-1]
    assert_valid_anthropic_request(last)
    first, second = user_contents(last)
    assert {"type": "text", "text": "[file: First, attached earlier]"} in first
    assert second[0]["type"] == "document"
    assert second[0]["title"] == "Second"


def screenshot(marker: str) -> str:
    """3 MiB of base64: a retina screenshot, a phone's photo."""
    return base64.b64encode(marker.encode() * (3 * 2**20 // len(marker) * 3 // 4)).decode()


def test_screenshots_of_megabytes_are_answered_and_older_ones_named(
    small_gateway: tuple[str, str, ScriptedUpstream], upstream_api: str
) -> None:
    """Two screenshots of 3 MiB (a message was at most 1 MiB: a 400), the whole conversation
    resent each time as Claude Code resends it: each is answered; the second question sends its
    own and names the first (the limit is 300,000 characters), on every kind of upstream; the
    thread keeps each turn once (the resent screenshot is the stored one), as sent."""
    url, key, upstream = small_gateway
    shots = [screenshot("first"), screenshot("second")]
    history: list[Any] = []
    with anthropic.Anthropic(base_url=url, api_key=key, max_retries=0) as claude:
        for data in shots:
            source: Any = {"type": "base64", "media_type": "image/png", "data": data}
            history.append(
                {"role": "user", "content": [{"type": "image", "source": source}, SUMMARIZE]}
            )
            answer = claude.messages.create(
                model="answer-model",
                max_tokens=100,
                messages=history,
                extra_headers={"X-Thread-Id": "shots"},
            )
            history.append(
                {"role": "assistant", "content": [b.model_dump() for b in answer.content]}
            )
    last = answers(upstream)[-1]
    if upstream_api == "anthropic":
        assert_valid_anthropic_request(last)
    first, second = user_contents(last)
    named = "input_text" if upstream_api == "responses" else "text"
    assert {"type": named, "text": "[image, attached earlier]"} in first
    assert shots[1] in json.dumps(second)
    assert shots[0] not in json.dumps(last)
    stored = httpx.get(
        f"{url}/v1/threads/shots/messages", headers={"Authorization": f"Bearer {key}"}
    ).json()["data"]
    assert [m["role"] for m in stored] == ["user", "assistant", "user", "assistant"]
    said = [json.dumps(m["content"]) for m in stored if m["role"] == "user"]
    assert [shot in text for shot, text in zip(shots, said, strict=True)] == [True, True]


SHOT = screenshot("clock")[:200_000]
"""200 KB of base64: a screenshot a tool took (stored with a copy that names it)."""
SHOT_URL = f"data:image/png;base64,{SHOT}"
SCREENSHOT_TOOL: Any = {
    "name": "screenshot",
    "description": "Takes a screenshot of the screen.",
    "input_schema": {"type": "object", "properties": {}},
}


def shot_sent(request: dict[str, Any], upstream_api: str, call_id: str) -> Any:
    """Where an upstream request of `upstream_api` carries the screenshot a call returned: the
    tool result's own image (Anthropic, Responses), or the image in the user message after the
    results (chat, where a tool result is text alone); each request valid for its API."""
    if upstream_api == "anthropic":
        assert_valid_anthropic_request(request)
        blocks = [
            b for m in request["messages"] if isinstance(m["content"], list) for b in m["content"]
        ]
        (result,) = [
            b for b in blocks if b["type"] == "tool_result" and b["tool_use_id"] == call_id
        ]
        return result["content"]
    if upstream_api == "responses":
        items = request["input"]
        (output,) = [
            i for i in items if i.get("type") == "function_call_output" and i["call_id"] == call_id
        ]
        return output["output"]
    assert_valid_chat_request(request)
    sent = request["messages"]
    (at,) = [n for n, m in enumerate(sent) if m["role"] == "tool" and m["tool_call_id"] == call_id]
    after = next(m for m in sent[at:] if m["role"] == "user")
    return {"result": sent[at]["content"], "after": after["content"]}


@pytest.fixture
def window_gateway(
    database_url: str, tenant: str, upstream_api: str
) -> Iterator[tuple[str, str, ScriptedUpstream]]:
    """`gateway` whose window is the thread's newest turns (SLIDING_WINDOW), so that a turn
    is read back from the store on the next question whatever the summary does."""
    memory = wm.WorkingMemoryConfig(strategy=wm.Strategy.SLIDING_WINDOW)
    config = CONFIG.model_copy(update={"working_memory": memory})
    with ScriptedUpstream(responder=reading) as upstream:
        settings = settings_for(database_url, upstream, upstream_api=upstream_api, gateway=config)
        with LiveServer(create_app(settings)) as live:
            yield live.url, create_key(database_url, tenant, "tests").secret, upstream


def captured_shot(upstream_api: str, call_id: str) -> Any:
    """What `shot_sent` finds of a result "Captured." with the screenshot, by upstream API."""
    source = {"type": "base64", "media_type": "image/png", "data": SHOT}
    return {
        "anthropic": [{"type": "text", "text": "Captured."}, {"type": "image", "source": source}],
        "responses": [
            {"type": "input_text", "text": "Captured."},
            {"type": "input_image", "image_url": SHOT_URL, "detail": "auto"},
        ],
        "chat": {
            "result": "Captured.\n[image]",
            "after": [
                {"type": "text", "text": f"Attached to the result of call {call_id}:"},
                {"type": "image_url", "image_url": {"url": SHOT_URL}},
            ],
        },
    }[upstream_api]


def test_a_screenshot_a_claude_tool_returned_reaches_every_upstream_as_an_image(
    window_gateway: tuple[str, str, ScriptedUpstream], upstream_api: str
) -> None:
    """Claude Code's Read tool on a PNG answers with the image in its tool result: the model
    behind the gateway sees the image whatever API it speaks, on the call that returned it and
    on the next question (read back from the thread), where it was "[image]" text to a chat or
    Responses model."""
    url, key, upstream = window_gateway
    source: Any = {"type": "base64", "media_type": "image/png", "data": SHOT}
    history: list[Any] = [
        {"role": "user", "content": "What time does my screen show?"},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "toolu_1", "name": "screenshot", "input": {}}],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_1",
                    "content": [
                        {"type": "text", "text": "Captured."},
                        {"type": "image", "source": source},
                    ],
                }
            ],
        },
    ]
    sent = []
    with anthropic.Anthropic(base_url=url, api_key=key, max_retries=0) as claude:
        for follow_up in ("And the date?", None):
            answer = claude.messages.create(
                model="answer-model",
                max_tokens=100,
                tools=[SCREENSHOT_TOOL],
                messages=history,
                extra_headers={"X-Thread-Id": "shot"},
            )
            sent.append(shot_sent(answers(upstream)[-1], upstream_api, "toolu_1"))
            if follow_up is not None:
                history.append(
                    {"role": "assistant", "content": [b.model_dump() for b in answer.content]}
                )
                history.append({"role": "user", "content": follow_up})
    expected = captured_shot(upstream_api, "toolu_1")
    assert sent == [expected, expected]
    stored = httpx.get(
        f"{url}/v1/threads/shot/messages", headers={"Authorization": f"Bearer {key}"}
    ).json()["data"]
    roles = ["user", "assistant", "tool", "assistant", "user", "assistant"]
    assert [m["role"] for m in stored] == roles
    assert stored[2]["content"][1] == {"type": "image_url", "image_url": {"url": SHOT_URL}}


def test_an_image_a_responses_tool_returned_reaches_every_upstream(
    gateway: tuple[str, str, ScriptedUpstream], upstream_api: str
) -> None:
    """A Responses client's call output of an ``input_image`` (Codex's view_image, a computer
    use loop's screenshot) reaches a chat or Anthropic model as an image, not as nothing."""
    url, key, upstream = gateway
    with openai.OpenAI(base_url=f"{url}/v1", api_key=key, max_retries=0) as client:
        client.responses.create(
            model="answer-model",
            tools=[
                {
                    "type": "function",
                    "name": "screenshot",
                    "parameters": {"type": "object", "properties": {}},
                    "strict": False,
                }
            ],
            input=[
                {"role": "user", "content": "What time does my screen show?"},
                {
                    "type": "function_call",
                    "call_id": "call_1",
                    "name": "screenshot",
                    "arguments": "{}",
                },
                {
                    "type": "function_call_output",
                    "call_id": "call_1",
                    "output": [
                        {"type": "input_text", "text": "Captured."},
                        {"type": "input_image", "image_url": SHOT_URL, "detail": "auto"},
                    ],
                },
            ],
            extra_headers={"X-Thread-Id": "responses-shot"},
        )
    sent = shot_sent(answers(upstream)[-1], upstream_api, "call_1")
    image = {
        "anthropic": {
            "type": "image",
            "source": {"type": "base64", "media_type": "image/png", "data": SHOT},
        },
        "responses": {"type": "input_image", "image_url": SHOT_URL, "detail": "auto"},
        "chat": {"type": "image_url", "image_url": {"url": SHOT_URL}},
    }[upstream_api]
    assert image in (sent["after"] if upstream_api == "chat" else sent)


def test_an_image_a_langchain_tool_returned_reaches_every_upstream(
    gateway: tuple[str, str, ScriptedUpstream], upstream_api: str
) -> None:
    """LangChain's `ChatOpenAI` sends a `ToolMessage` of an image (a screenshot an MCP tool
    took, as LangChain's MCP adapters return it) as an ``image_url`` part of the tool message,
    which OpenAI itself refuses: through the gateway it reaches every kind of model."""
    url, key, upstream = gateway
    model = ChatOpenAI(
        model="answer-model",
        base_url=f"{url}/v1",
        api_key=SecretStr(key),
        max_retries=0,
        default_headers={"X-Thread-Id": "langchain-shot"},
    )
    call = {"name": "screenshot", "args": {}, "id": "call_1", "type": "tool_call"}
    image = {"type": "image", "base64": SHOT, "mime_type": "image/png"}
    model.invoke(
        [
            HumanMessage("What time does my screen show?"),
            AIMessage("", tool_calls=[call]),
            ToolMessage([{"type": "text", "text": "Captured."}, image], tool_call_id="call_1"),
        ]
    )
    sent = shot_sent(answers(upstream)[-1], upstream_api, "call_1")
    expected = captured_shot(upstream_api, "call_1")
    assert sent == expected
