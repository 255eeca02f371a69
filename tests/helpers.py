"""Message builders and common values for the tests."""

from __future__ import annotations

import base64
import io
import itertools
import json
import os
import re
import struct
import subprocess
import sys
import wave
import zlib
from pathlib import Path
from typing import Any, TypedDict

import workingmem as wm
from workingmem.llm.testing import Reply

GPT4O = wm.ModelInfo(id="gpt-4o", context_window=128_000)
DEFAULT_PROFILE = wm.Profile(id="default")


class DocumentOwner(TypedDict, total=False):
    """Whose working-memory document it is, within a tenant (the scope picks which id counts)."""

    conversation_id: str | None
    user_id: str | None


class DocumentIds(DocumentOwner):
    """The ids `AgentMemory`'s methods take as keywords, so a test can pass them as ``**ids``."""

    tenant_id: str


def user(text: str) -> wm.Message:
    return {"role": "user", "content": text}


def assistant(text: str | None, *calls: str) -> wm.Message:
    message: wm.Message = {"role": "assistant", "content": text}
    if calls:
        message["tool_calls"] = [
            {"id": c, "type": "function", "function": {"name": "lookup", "arguments": "{}"}}
            for c in calls
        ]
    return message


def tool(call_id: str, text: str = "result") -> wm.Message:
    return {"role": "tool", "tool_call_id": call_id, "content": text}


_OLD_FACT = re.compile(r"^- \[turns? (\d+)(?:-(\d+))?\] (.*)$", re.MULTILINE)
_TURN_LINE = re.compile(
    r"^\[(\d+)\](?: \([^)]*\))? (user|assistant|tool[^:]*): (.*)$", re.MULTILINE
)


def summarizing_responder(request: dict[str, Any]) -> Reply:
    """A scripted cheap model: summarizes by quoting the turn range it read, keeps the old
    facts and adds one per user turn that says "remember"; it answers JSON like a real
    helper would."""
    prompt = request["messages"][-1]["content"]
    turns = [(int(n), role, text) for n, role, text in _TURN_LINE.findall(prompt)]
    first, last = turns[0][0], turns[-1][0]
    old_block = prompt.split("<facts>", 1)[-1].split("</facts>", 1)[0]
    facts = [
        {"text": text, "first_turn": int(a), "last_turn": int(b or a)}
        for a, b, text in _OLD_FACT.findall(old_block)
    ]
    facts += [
        {"text": text[:200], "first_turn": n, "last_turn": n}
        for n, role, text in turns
        if role == "user" and "remember" in text
    ]
    body = {
        "summary": f"The conversation so far, through turn {last} (read {first}-{last}).",
        "facts": facts,
    }
    return Reply(json.dumps(body), prompt_tokens=len(prompt) // 4, completion_tokens=40)


def assert_in_provider_order(messages: list[dict[str, Any]]) -> None:
    """What every provider accepts of a request's messages: one system message first, then a
    user turn; each tool result right after the assistant turn whose call it answers, every
    call answered."""
    assert messages[0]["role"] == "system"
    assert [m["role"] for m in messages[1:]].count("system") == 0
    assert messages[1]["role"] == "user"
    open_calls: set[str] = set()
    for message in messages[1:]:
        if message["role"] == "tool":
            assert message["tool_call_id"] in open_calls, "an orphaned tool result"
            open_calls.discard(message["tool_call_id"])
        else:
            assert not open_calls, f"calls without results: {open_calls}"
            open_calls = {call["id"] for call in message.get("tool_calls") or ()}
    assert not open_calls, f"calls without results: {open_calls}"


def assert_valid_anthropic_request(body: dict[str, Any]) -> None:
    """What Anthropic's Messages API accepts of a request: a model and a cap; the system
    prompt apart; messages alternating from a user's to a user's, none empty, no empty text
    block; each assistant message's ``tool_use`` blocks answered, each once, by the
    ``tool_result`` blocks that open the next message, and a result only for such a call; at
    most four blocks marked ``cache_control``; with thinking on, an assistant message whose
    calls the last message answers opens with its thinking."""
    assert isinstance(body.get("model"), str)
    assert isinstance(body.get("max_tokens"), int)
    assert body["max_tokens"] > 0
    messages = body["messages"]
    assert messages, "no messages"
    roles = [m["role"] for m in messages]
    assert roles[0] == "user", roles
    assert roles[-1] == "user", roles
    assert all(a != b for a, b in itertools.pairwise(roles)), f"roles do not alternate: {roles}"
    open_calls: set[str] = set()
    for message in messages:
        content = message["content"]
        assert content, "an empty message"
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        assert all(b["type"] != "text" or b["text"] for b in blocks), "an empty text block"
        if message["role"] == "assistant":
            assert not open_calls
            open_calls = {b["id"] for b in blocks if b["type"] == "tool_use"}
            continue
        leading = list(itertools.takewhile(lambda b: b["type"] == "tool_result", blocks))
        assert {b["tool_use_id"] for b in leading} == open_calls, "calls and results differ"
        assert len(leading) == len(open_calls), "a call answered twice"
        assert all(b["type"] != "tool_result" for b in blocks[len(leading) :])
        open_calls = set()
    system = body.get("system")
    marked = [b for m in messages if isinstance(m["content"], list) for b in m["content"]]
    marked += system if isinstance(system, list) else []
    assert sum("cache_control" in b for b in marked) <= 4, "more than 4 cache breakpoints"
    thinking = (body.get("thinking") or {}).get("type") == "enabled"
    last = messages[-1]["content"]
    if thinking and isinstance(last, list) and last and last[0]["type"] == "tool_result":
        opening = messages[-2]["content"][0]["type"]
        assert opening in ("thinking", "redacted_thinking"), "the call's thinking is missing"


def assert_valid_chat_request(body: dict[str, Any]) -> None:
    """What OpenAI's Chat Completions accepts of a request's messages: an assistant message's
    tool calls each answered once by the ``tool`` messages right after it, and a tool message
    only so; a tool result's content text (a string or text parts: "Image URLs are only
    allowed for messages with role 'user'"); images, files and recordings in user messages
    alone."""
    open_calls: set[str] = set()
    for message in body["messages"]:
        role, content = message["role"], message.get("content")
        parts = content if isinstance(content, list) else []
        if role == "tool":
            assert message["tool_call_id"] in open_calls, f"a result of no open call: {message}"
            open_calls.discard(message["tool_call_id"])
            assert all(part["type"] == "text" for part in parts), "a tool result of more than text"
            continue
        assert not open_calls, f"calls without results before a {role} message: {open_calls}"
        if role != "user":
            assert all(part["type"] in ("text", "refusal") for part in parts), f"{role}: {parts}"
        open_calls = {call["id"] for call in message.get("tool_calls") or ()}
    assert not open_calls, f"calls without results at the end: {open_calls}"


def run_fresh(code: str) -> str:
    """The last line `code` prints in a fresh interpreter, with this process's copy of the
    package on its path: for what a test process, which imported and built everything long
    ago, cannot show (what an import loads, what a start builds)."""
    path = [str(Path(wm.__file__).resolve().parents[1]), os.environ.get("PYTHONPATH", "")]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, path))}
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True
    )
    return result.stdout.splitlines()[-1]


def never_counting(tok: wm.Tokenizer) -> wm.Tokenizer:
    """`tok` for reading turns whose counts are stored: counting anything fails the test."""

    class Stored:
        key = tok.key
        exact = True
        reply_overhead = tok.reply_overhead

        def count_text(self, text: str) -> int:
            raise AssertionError("re-tokenized a stored turn")

        def count_message(self, message: wm.MessageIn) -> int:
            raise AssertionError("re-tokenized a stored turn")

    return Stored()


def pdf_bytes(pages: int, *, padding: int = 0, text: str = "") -> bytes:
    """A real PDF of `pages` pages, written by pypdf, blank or each saying `text` (one line,
    in Helvetica), made `padding` bytes larger by an attachment of random bytes (a file's size
    is not what the model reads)."""
    from pypdf import PdfWriter
    from pypdf.generic import ContentStream, DecodedStreamObject, DictionaryObject, NameObject

    writer = PdfWriter()
    for _ in range(pages):
        page = writer.add_blank_page(width=612, height=792)
        if text:
            font = {"/Type": "/Font", "/Subtype": "/Type1", "/BaseFont": "/Helvetica"}
            fonts = {
                NameObject("/F1"): DictionaryObject(
                    {NameObject(k): NameObject(v) for k, v in font.items()}
                )
            }
            page[NameObject("/Resources")] = DictionaryObject(
                {NameObject("/Font"): DictionaryObject(fonts)}
            )
            stream = DecodedStreamObject()
            stream.set_data(f"BT /F1 12 Tf 72 720 Td ({text}) Tj ET".encode("latin-1"))
            page.replace_contents(ContentStream(stream, writer))
    if padding:
        writer.add_attachment("padding.bin", os.urandom(padding))
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def png_bytes(width: int, height: int, rgb: tuple[int, int, int] = (200, 40, 40)) -> bytes:
    """A valid PNG of one colour: what an image reader (Claude Code's Read tool) reads."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    rows = b"".join(b"\x00" + bytes(rgb) * width for _ in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


def data_url(media_type: str, data: bytes) -> str:
    """`data` as the base64 ``data:`` URL a chat ``file`` part carries."""
    return f"data:{media_type};base64,{base64.b64encode(data).decode()}"


def wav_bytes(seconds: float, rate: int = 16_000) -> bytes:
    """A real WAV recording of silence, `seconds` long (mono, 16-bit)."""
    out = io.BytesIO()
    with wave.open(out, "wb") as recording:
        recording.setnchannels(1)
        recording.setsampwidth(2)
        recording.setframerate(rate)
        recording.writeframes(b"\0\0" * round(seconds * rate))
    return out.getvalue()
