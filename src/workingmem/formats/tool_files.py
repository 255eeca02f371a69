"""A tool result's files for a chat upstream: after the results, in a user message.

    body["messages"] = lifted(messages)

Anthropic's tool results and the Responses API's call outputs carry images and files (a
screenshot, a PDF a tool read), and a thread keeps them in its ``tool`` turns; OpenAI's chat
format takes only text there ("Image URLs are only allowed for messages with role 'user'").
So for a chat upstream such a result keeps its text and names its files where they stood
(``[image]``), and the files follow the run of results in one user message, each under the
call that returned it, where every chat model reads them (the assistant's calls must be
followed by their results first). A request with no such result is returned as it came.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..types import MessageIn
from .files import carries_files, label

__all__ = ["lifted"]


def lifted(messages: Sequence[MessageIn]) -> Sequence[MessageIn]:
    """`messages` with the files of their tool results moved after them (see the module)."""
    if not any(_returned_files(m) for m in messages if m.get("role") == "tool"):
        return messages  # one look: 1,800 turns in about 0.06 ms
    sent: list[MessageIn] = []
    files: list[dict[str, Any]] = []
    for message in messages:
        if files and message.get("role") != "tool":
            sent.append({"role": "user", "content": files})
            files = []
        if not _returned_files(message):
            sent.append(message)
            continue
        parts: list[dict[str, Any]] = message["content"]
        said = [part["text"] if part["type"] == "text" else label(part) for part in parts]
        sent.append({**message, "content": "\n".join(said)})
        call = message.get("tool_call_id")
        files.append({"type": "text", "text": f"Attached to the result of call {call}:"})
        files.extend(part for part in parts if part["type"] != "text")
    if files:
        sent.append({"role": "user", "content": files})
    return sent


def _returned_files(message: Mapping[str, Any]) -> bool:
    return message.get("role") == "tool" and carries_files(message.get("content"))
