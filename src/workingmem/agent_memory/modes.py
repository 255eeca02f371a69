"""The three modes of a working memory: what an update may contain and what gets stored.

    mode = mode_for(template="# Profile\\n- Name:\\n", schema=None, max_chars=8_000)
    mode.format                                   # "markdown"
    mode.apply(current=None, content="# Profile\\n- Name: Ada\\n").content

- Template (Markdown) and free-form: the content is text, and an update replaces the whole
  document (the model sends the complete new version). The template is the starting content
  and the shape the model is asked to keep; nothing enforces its headings.
- Schema (JSON): the content is a JSON object; an update merges into the stored document
  (see `merge`), unless `replace=True` asks for the update to be the whole document. What is
  stored is the validated document as compact JSON text.

Every mode refuses blank content (clearing is `clear_working_memory`, not an empty update) and
content whose stored form is longer than the cap, with its size and the limit.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel

from ..errors import ValidationError
from .merge import Path, merge_update
from .schema import DocumentSchema, json_path

__all__ = [
    "TEXT_PATTERN",
    "Format",
    "Mode",
    "SchemaMode",
    "TextMode",
    "Update",
    "parse_json_object",
]

Format = Literal["markdown", "json"]

_MAX_UNWRAP = 2


@dataclass(frozen=True, slots=True)
class Update:
    """The document an update stores."""

    content: str
    """The full stored text."""
    ignored_nulls: tuple[str, ...] = ()
    """Schema mode: the JSON paths whose null was ignored as "no change"."""


_SPACE = r"\t-\r\x1c-\x20\x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"
"""What Python's `str.strip` removes, spelled as a character class."""

TEXT_PATTERN = rf"^[^\x00]*[^\x00{_SPACE}][^\x00]*$"
"""A text-mode document as one regular expression (the OpenAPI document publishes it, with
``maxLength`` the mode's `max_chars`): something besides spaces, no NUL character."""


class TextMode:
    """Template (Markdown) or free-form: whole-document text, within the cap."""

    def __init__(self, *, template: str | None, max_chars: int) -> None:
        self.template = template
        self.max_chars = max_chars

    @property
    def format(self) -> Format | None:
        return "markdown" if self.template is not None else None

    def apply(self, *, current: str | None, content: object, replace: bool = True) -> Update:
        """The new document: `content` itself, once checked (`current` does not matter)."""
        if not isinstance(content, str):
            raise ValidationError(
                "content",
                f"must be a string (the whole document), got {_kind(content)}",
            )
        self.check(content)
        return Update(content=content)

    def check(self, content: str) -> None:
        """Raises `ValidationError` unless `content` may be stored."""
        if not content.strip():
            raise ValidationError(
                "content", "is empty; send the whole document, or clear the working memory"
            )
        if "\x00" in content:
            raise ValidationError("content", "must not contain NUL characters")
        _check_size(len(content), self.max_chars, "")


class SchemaMode:
    """JSON validated against a schema; updates merge into the stored document."""

    format: Format = "json"
    template: str | None = None

    def __init__(self, *, schema: DocumentSchema, max_chars: int) -> None:
        self.schema = schema
        self.max_chars = max_chars

    def apply(self, *, current: str | None, content: object, replace: bool = False) -> Update:
        """The merged (or, with `replace`, the given) document, validated and serialized."""
        update = parse_json_object(content)
        ignored: list[Path] = []
        if replace:
            document = update
        else:
            stored = json.loads(current) if current is not None else {}
            document, ignored = merge_update(
                stored, update, null_is_value=self.schema.null_is_value
            )
        valid = self.schema.validate(document)
        text = dumps_document(valid)
        _check_size(len(text), self.max_chars, " as JSON")
        return Update(content=text, ignored_nulls=tuple(json_path(p) for p in ignored))

    def check(self, content: str) -> None:
        """Raises `ValidationError` unless the stored text is a document the schema accepts."""
        valid = self.schema.validate(parse_json_object(content))
        _check_size(len(dumps_document(valid)), self.max_chars, " as JSON")


Mode = TextMode | SchemaMode


def dumps_document(document: dict[str, Any]) -> str:
    """The one serializer of schema-mode documents: compact JSON, order kept, UTF-8 as is."""
    return json.dumps(document, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def parse_json_object(content: object) -> dict[str, Any]:
    """A JSON object from a dict, a Pydantic model, or a JSON text (even a JSON text of a
    JSON text, as models sometimes send); else `ValidationError` saying what came instead."""
    value = content
    for _ in range(_MAX_UNWRAP + 1):
        if not isinstance(value, str):
            break
        try:
            value = json.loads(value)
        except ValueError:
            raise ValidationError(
                "content", "must be a JSON object matching the schema; got text that is not JSON"
            ) from None
    if isinstance(value, BaseModel):
        value = value.model_dump(mode="json", by_alias=True, exclude_unset=True)
    if not isinstance(value, dict):
        raise ValidationError(
            "content", f"must be a JSON object matching the schema, got {_kind(value)}"
        )
    try:
        owned: dict[str, Any] = json.loads(dumps_document(value))
    except (TypeError, ValueError) as exc:
        raise ValidationError("content", f"must be JSON data: {exc}") from None
    if owned.keys() != value.keys():
        raise ValidationError("content", "must have string keys (a JSON object)")
    return owned


def _check_size(size: int, limit: int, unit: str) -> None:
    if size > limit:
        raise ValidationError(
            "content",
            f"is {size} characters{unit}; the limit is {limit}: keep what matters, shorten or "
            "drop the rest",
        )


def _kind(value: object) -> str:
    if value is None:
        return "null"
    names = {dict: "an object", list: "an array", str: "a string", bool: "a boolean"}
    for kind, name in names.items():
        if isinstance(value, kind):
            return name
    if isinstance(value, int | float):
        return "a number"
    return type(value).__name__
