"""Files and recordings between the three APIs: a chat ``file`` part, an Anthropic ``document``
block, a Responses ``input_file`` part.

    chat_part_of_document({"type": "document", "source": {"type": "base64", ...}})
    # [{"type": "file", "file": {"filename": "document.pdf", "file_data": "data:..."}}]

A file a client attached reaches a model of another API as that API's own file whenever it has
one for it (a PDF as base64 everywhere, a text document as text, a file id where the ids are the
same provider's); only what the other side cannot take (a URL where chat has none, another
provider's file id, audio for Claude) becomes a line of text naming it, so that the model knows
something was attached. Pure conversions, no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..data_urls import data_url, decoded_data_url, is_pdf, is_text, split_data_url

__all__ = [
    "carries_files",
    "chat_part_of_bytes",
    "chat_part_of_document",
    "chat_part_of_input_file",
    "document_of_chat_part",
    "image_url_of",
    "input_file_of_chat_part",
    "label",
    "text_or_parts",
]

_DOCUMENT_NAME = "document.pdf"
"""The name a chat file part gets for a document sent without a title (OpenAI asks for one with
``file_data``)."""


def _said(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def carries_files(content: object) -> bool:
    """Whether a chat content carries more than text: parts of images, files, recordings."""
    return isinstance(content, list) and any(part.get("type") != "text" for part in content)


def text_or_parts(parts: list[dict[str, Any]]) -> str | list[dict[str, Any]]:
    """Chat parts as a view's content: parts of text alone as one text (what the views of
    such content always were, and compare as), else the parts."""
    return parts if carries_files(parts) else "\n".join(part["text"] for part in parts)


def label(part: Mapping[str, Any]) -> str:
    """A chat part as a reader of text sees it: ``[image]``, ``[file: report.pdf]`` (else its
    id), ``[audio: wav]``, a refusal's words, else ``[<type>]``. The line a model gets for what
    its API cannot carry, and what a transcript, a summary or a text-only model reads: the
    model knows what was attached."""
    kind = part.get("type")
    if kind == "refusal" and isinstance(part.get("refusal"), str):
        return str(part["refusal"])
    if kind == "image_url":
        return "[image]"
    inner = part.get(str(kind))
    inner = inner if isinstance(inner, Mapping) else {}
    if kind == "input_audio":
        return f"[audio: {inner['format']}]" if isinstance(inner.get("format"), str) else "[audio]"
    if kind == "file":
        name = inner.get("filename") or inner.get("file_id")
        return f"[file: {name}]" if isinstance(name, str) and name else "[file]"
    return f"[{kind}]"


def image_url_of(source: object) -> str | None:
    """An Anthropic image's source as the URL a chat ``image_url`` takes: its base64 as a
    ``data:`` URL, or its URL; None for one by file id."""
    if not isinstance(source, Mapping):
        return None
    if source.get("type") == "base64":
        return data_url(str(source.get("media_type", "image/png")), str(source.get("data", "")))
    if source.get("type") == "url" and isinstance(source.get("url"), str):
        return str(source["url"])
    return None


_AUDIO_FORMATS = {
    "audio/wav": "wav",
    "audio/x-wav": "wav",
    "audio/wave": "wav",
    "audio/mpeg": "mp3",
    "audio/mp3": "mp3",
}
"""The recordings a chat ``input_audio`` part takes, by media type."""


def chat_part_of_bytes(media_type: str, data: str, name: str) -> dict[str, Any]:
    """A framework's bytes (`data`, base64) as the chat part that carries them, so that they
    count as the model reads them: an image, a WAV or MP3 recording, else a file named `name`."""
    if media_type.startswith("image/"):
        return {"type": "image_url", "image_url": {"url": data_url(media_type, data)}}
    if media_type in _AUDIO_FORMATS:
        audio = {"data": data, "format": _AUDIO_FORMATS[media_type]}
        return {"type": "input_audio", "input_audio": audio}
    return {"type": "file", "file": {"filename": name, "file_data": data_url(media_type, data)}}


def chat_part_of_document(block: Mapping[str, Any]) -> list[dict[str, Any]]:
    """An Anthropic ``document`` block as chat content parts: a PDF as a ``file`` part, a text
    document (plain or as content blocks) as its text, by URL or by Anthropic file id as a
    line that names it."""
    source = block.get("source")
    source = source if isinstance(source, Mapping) else {}
    title = block.get("title") if isinstance(block.get("title"), str) else None
    kind = source.get("type")
    if kind == "base64" and isinstance(source.get("data"), str):
        media = str(source.get("media_type") or "application/pdf")
        file = {"filename": title or _DOCUMENT_NAME, "file_data": data_url(media, source["data"])}
        return [{"type": "file", "file": file}]
    if kind == "text" and isinstance(source.get("data"), str):
        return [_said(f"{title}\n\n{source['data']}" if title else source["data"])]
    if kind == "content":
        return _content_parts(source.get("content"), title)
    where = source.get("url") or source.get("file_id") or "attached"
    return [_said(f"[document: {title}: {where}]" if title else f"[document: {where}]")]


def _content_parts(content: object, title: str | None) -> list[dict[str, Any]]:
    """A ``content`` document's blocks: its texts joined (under its title), its images."""
    if isinstance(content, str):
        content = [{"type": "text", "text": content}]
    texts = [title] if title else []
    images: list[dict[str, Any]] = []
    for block in content if isinstance(content, list) else ():
        if not isinstance(block, Mapping):
            continue
        if block.get("type") == "text" and isinstance(block.get("text"), str):
            texts.append(block["text"])
        elif block.get("type") == "image" and (url := image_url_of(block.get("source"))):
            images.append({"type": "image_url", "image_url": {"url": url}})
    return ([_said("\n\n".join(texts))] if texts else []) + images


def chat_part_of_input_file(part: Mapping[str, Any]) -> dict[str, Any]:
    """A Responses ``input_file`` part as a chat part: its data or its id (the same provider's
    files) as a ``file`` part; by URL, which chat has no field for, a line that names it."""
    name = part.get("filename") if isinstance(part.get("filename"), str) else None
    if isinstance(part.get("file_data"), str):
        return {
            "type": "file",
            "file": {"filename": name or "file", "file_data": part["file_data"]},
        }
    if isinstance(part.get("file_id"), str):
        file = {"file_id": part["file_id"], **({"filename": name} if name else {})}
        return {"type": "file", "file": file}
    where = part.get("file_url") or name or "attached"
    return _said(f"[file: {where}]")


def document_of_chat_part(part: Mapping[str, Any]) -> dict[str, Any]:
    """A chat ``file`` or ``input_audio`` part as an Anthropic block: a PDF as a base64
    ``document`` (its bytes not decoded), a text file as a text document; what Claude cannot
    take (an OpenAI file id, another kind of file, audio) as a text block naming it."""
    file = _file_of(part) if part.get("type") == "file" else {}
    name = file.get("filename") if isinstance(file.get("filename"), str) else None
    titled = {"title": name} if name else {}
    found = split_data_url(file.get("file_data"))
    if found is not None and is_pdf(*found):
        source = {"type": "base64", "media_type": "application/pdf", "data": found[1]}
        return {"type": "document", "source": source, **titled}
    if found is not None and is_text(found[0]):
        text = decoded_data_url(file.get("file_data"))
        if text is not None:
            data = text[1].decode("utf-8", errors="replace")
            source = {"type": "text", "media_type": "text/plain", "data": data}
            return {"type": "document", "source": source, **titled}
    return _said(label(part))


def _file_of(part: Mapping[str, Any]) -> Mapping[str, Any]:
    file = part.get("file")
    return file if isinstance(file, Mapping) else {}


def input_file_of_chat_part(part: Mapping[str, Any]) -> dict[str, Any]:
    """A chat ``file`` part as a Responses ``input_file`` (the same fields); an ``input_audio``
    part, which a Responses message has no part for, as a line naming it."""
    if part.get("type") == "input_audio":
        return {"type": "input_text", "text": label(part)}
    file = _file_of(part)
    fields = {key: file[key] for key in ("file_data", "file_id", "filename") if key in file}
    return {"type": "input_file", **fields}
