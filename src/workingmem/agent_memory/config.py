"""AgentMemoryConfig: the mode, the scope and the limits of an agent-editable working memory.

    config = AgentMemoryConfig(template="# Profile\\n- Name:\\n- Role:\\n")      # Markdown
    config = AgentMemoryConfig(schema=Notes, scope="user")                      # JSON, per user
    config = AgentMemoryConfig()                                                # free-form

Frozen and checked when built: a bad setting (a template with a schema, a schema that is not
an object schema, a template longer than the cap) raises `workingmem.ValidationError` naming
the field, at start-up rather than at the first tool call. It is a dataclass, not a Pydantic
model, because a Pydantic model cannot have a field named ``schema``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from ..errors import ValidationError
from ..stores.documents import DEFAULT_KEEP_VERSIONS, Scope, check_keep_versions
from .modes import Mode, SchemaMode, TextMode
from .schema import DocumentSchema

__all__ = ["DEFAULT_MAX_CHARS", "AgentMemoryConfig"]

DEFAULT_MAX_CHARS = 8_000
"""About 2,000 tokens: room for a profile, preferences and open tasks, small enough to ride
along with every request."""

_MAX_CHARS_LIMIT = 1_000_000


@dataclass(frozen=True)
class AgentMemoryConfig:
    """How an `AgentMemory` behaves; the defaults give a free-form, per-conversation memory."""

    enabled: bool = True
    """False: no tools, no instruction block, reads give nothing, updates are refused; clearing
    still works, so that a user can always make the memory forget."""
    template: str | None = None
    """Markdown mode: the starting content and the shape the model is asked to keep."""
    schema: type[BaseModel] | Mapping[str, Any] | None = None
    """JSON mode: a Pydantic model class or a JSON Schema dict describing an object."""
    scope: Scope = "conversation"
    """``conversation``: one document per conversation (thread); ``user``: one per user,
    shared by the user's conversations. Always inside one tenant."""
    max_chars: int = DEFAULT_MAX_CHARS
    """The cap on the stored document, in characters (the compact JSON text in schema mode)."""
    keep_versions: int = DEFAULT_KEEP_VERSIONS
    """How many of the newest versions of a document the history keeps (for roll back)."""
    _mode: Mode = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.enabled, bool):
            raise ValidationError("enabled", f"must be True or False, got {self.enabled!r}")
        if self.scope not in ("conversation", "user"):
            raise ValidationError("scope", f"must be 'conversation' or 'user', got {self.scope!r}")
        if (
            isinstance(self.max_chars, bool)
            or not isinstance(self.max_chars, int)
            or not 1 <= self.max_chars <= _MAX_CHARS_LIMIT
        ):
            raise ValidationError(
                "max_chars", f"must be between 1 and {_MAX_CHARS_LIMIT}, got {self.max_chars!r}"
            )
        check_keep_versions(self.keep_versions)
        if self.template is not None and self.schema is not None:
            raise ValidationError(
                "template", "a template and a schema exclude each other: give one, or neither"
            )
        mode: Mode
        if self.schema is not None:
            mode = SchemaMode(schema=DocumentSchema.build(self.schema), max_chars=self.max_chars)
        else:
            mode = TextMode(template=self._checked_template(), max_chars=self.max_chars)
        object.__setattr__(self, "_mode", mode)

    @property
    def mode(self) -> Mode:
        """The compiled mode: how an update is checked and what is stored."""
        return self._mode

    def _checked_template(self) -> str | None:
        if self.template is None:
            return None
        if not isinstance(self.template, str) or not self.template.strip():
            raise ValidationError("template", "must be a non-empty Markdown string")
        if len(self.template) > self.max_chars:
            raise ValidationError(
                "template",
                f"is {len(self.template)} characters; the limit (max_chars) is {self.max_chars}",
            )
        return self.template
