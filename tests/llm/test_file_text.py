"""What the local model (a text model) reads of an attached file (workingmem.llm._file_text):
a PDF's pages' text and a text file's text under the file's name, where it read the name only;
any other file, or one that cannot be read, by its name."""

from __future__ import annotations

import base64
import contextlib
import threading
from typing import Any

import pytest

from tests.helpers import data_url, pdf_bytes
from workingmem.llm import CallKind, CallMeta, _file_text, local
from workingmem.llm._file_text import MAX_CHARS, file_text
from workingmem.llm.local import LOCAL_MODEL, LocalModelClient, chat_messages
from workingmem.tokens._recent import counting_for


def test_a_pdfs_pages_are_its_text() -> None:
    pdf = pdf_bytes(2, text="Budget: 4,000 euros.")
    assert file_text(data_url("application/pdf", pdf)) == (
        "Budget: 4,000 euros.\n\nBudget: 4,000 euros."
    )
    assert file_text(base64.b64encode(pdf).decode()) == file_text(data_url("", pdf))


def test_a_text_file_is_its_text() -> None:
    assert file_text(data_url("text/markdown", b"# Plan\n- Lyon")) == "# Plan\n- Lyon"
    long = data_url("text/plain", b"x" * (MAX_CHARS + 10))
    assert len(file_text(long) or "") == MAX_CHARS


@pytest.mark.parametrize(
    "data",
    [
        data_url("application/pdf", pdf_bytes(1)),  # no text on its page (a scan)
        data_url("application/pdf", b"%PDF-1.7 cut short"),
        data_url("application/zip", b"PK\x03\x04"),
        "not base64!",
    ],
)
def test_a_file_without_readable_text_has_none(data: str) -> None:
    assert file_text(data) is None


def test_the_local_model_reads_the_file_under_its_name() -> None:
    report = data_url("application/pdf", pdf_bytes(1, text="Total: 1,250 euros."))
    scan = data_url("application/pdf", pdf_bytes(1))
    (message,) = chat_messages(
        [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "What is the total?"},
                    {"type": "file", "file": {"filename": "invoice.pdf", "file_data": report}},
                    {"type": "file", "file": {"filename": "scan.pdf", "file_data": scan}},
                    {"type": "file", "file": {"file_id": "file-abc"}},
                ],
            }
        ]
    )
    assert message["content"] == (
        "What is the total?\n[file: invoice.pdf]\nTotal: 1,250 euros.\n[file: scan.pdf]\n"
        "[file: file-abc]"
    )


async def test_the_file_is_read_off_the_event_loop(
    model: LocalModelClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Reading a long PDF takes seconds: the request is made in a thread, so the gateway's
    event loop goes on serving other requests meanwhile."""
    read_in: list[int] = []

    def recording(data: str) -> str | None:
        read_in.append(threading.get_ident())
        return file_text(data)

    monkeypatch.setattr(local, "file_text", recording)
    plan = data_url("application/pdf", pdf_bytes(1, text="Budget: 4,000 euros."))
    question: Any = {
        "role": "user",
        "content": [
            {"type": "text", "text": "What is the budget?"},
            {"type": "file", "file": {"filename": "plan.pdf", "file_data": plan}},
        ],
    }
    meta = CallMeta(tenant_id="t1", kind=CallKind.ANSWER, model=LOCAL_MODEL)
    await model.complete(model=LOCAL_MODEL, messages=[question], meta=meta, max_tokens=4)
    async with contextlib.aclosing(
        model.stream(model=LOCAL_MODEL, messages=[question], meta=meta, max_tokens=4)
    ) as events:
        async for _ in events:
            pass
    assert len(read_in) == 2
    assert threading.get_ident() not in read_in


def test_a_file_is_read_once_per_tenant(monkeypatch: pytest.MonkeyPatch) -> None:
    """A thread resends its files with every call: a tenant's file is read once; another
    tenant's read of the same file is not quicker for it (nothing kept outside a tenant)."""
    read: list[str] = []
    real = _file_text._read

    def reading(data: str) -> str | None:
        read.append(data)
        return real(data)

    monkeypatch.setattr(_file_text, "_read", reading)
    _file_text._kept.cache_clear()
    plan = data_url("application/pdf", pdf_bytes(1, text="Budget: 4,000 euros."))
    with counting_for("tenant-a"):
        assert {file_text(plan) for _ in range(3)} == {"Budget: 4,000 euros."}
    with counting_for("tenant-b"):
        file_text(plan)
    file_text(plan)
    file_text(plan)
    assert len(read) == 4  # once for each tenant, and each time outside a tenant's ask
