"""How a schema-mode update changes the stored document: a merge, with explicit rules for null.

    merged, ignored = merge_update(
        {"profile": {"name": "Ada"}, "tasks": ["a"]},
        {"profile": {"timezone": "UTC", "name": None}, "tasks": []},
        null_is_value=lambda path: False,
    )
    merged   # {"profile": {"name": "Ada", "timezone": "UTC"}, "tasks": []}
    ignored  # [("profile", "name")]

The rules (RFC 7396 JSON merge patch, except for null):

- A key the update leaves out keeps its stored value.
- A key set to null: where null is a value of the field (the schema accepts null, and null is
  not the field's default), the value becomes null; elsewhere the null is ignored ("no
  change"). Models pad every field they do not fill with null, and that must not wipe what is
  stored; a Pydantic ``x: str | None = None`` is such a field: its null means "not given".
- An object merges into the stored object, key by key, with these same rules. An object that
  adds nothing (empty, or only ignored nulls) does not create a key that was not there.
- A list replaces the stored list whole: ``[]`` empties it, explicitly.
- A string, number or boolean replaces the stored value.

The merged document is then validated against the schema as a whole; a merge never stores a
document the schema rejects.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["merge_update"]

Path = tuple[str, ...]


def merge_update(
    current: dict[str, Any],
    update: dict[str, Any],
    *,
    null_is_value: Callable[[Path], bool],
) -> tuple[dict[str, Any], list[Path]]:
    """`current` with `update` merged in, and the paths whose null was ignored."""
    ignored: list[Path] = []
    merged = _merge(current, update, (), null_is_value, ignored)
    return merged, ignored


def _merge(
    current: dict[str, Any],
    update: dict[str, Any],
    path: Path,
    null_is_value: Callable[[Path], bool],
    ignored: list[Path],
) -> dict[str, Any]:
    merged = dict(current)
    for key, value in update.items():
        here = (*path, key)
        if value is None:
            if null_is_value(here):
                merged[key] = None
            else:
                ignored.append(here)
        elif isinstance(value, dict):
            stored = merged.get(key)
            base = stored if isinstance(stored, dict) else {}
            inner = _merge(base, value, here, null_is_value, ignored)
            if inner or isinstance(stored, dict):
                merged[key] = inner
        else:
            merged[key] = value
    return merged
