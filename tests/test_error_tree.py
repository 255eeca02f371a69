"""One error tree: drawn in errors.py's docstring, copied in the API reference's errors page,
true of the classes."""

from __future__ import annotations

import re
from pathlib import Path

import workingmem as wm
from workingmem import errors

ERRORS_PAGE = Path(__file__).resolve().parents[1] / "docs" / "reference" / "errors.md"


def _page_tree() -> list[str]:
    text = ERRORS_PAGE.read_text(encoding="utf-8")
    block = text.split("```text", 1)[1].split("```", 1)[0]
    return [line.rstrip() for line in block.strip().splitlines()]


def _docstring_tree() -> list[str]:
    doc = errors.__doc__ or ""
    block = doc.split("::", 1)[1].strip().split("\n\n", 1)[0]
    return [line.strip() for line in block.splitlines()]


def test_the_errors_page_copies_the_tree_of_errors_py() -> None:
    assert _page_tree() == _docstring_tree()


def test_the_tree_is_the_class_hierarchy() -> None:
    names = [re.sub(r"^[├└]── ", "", line).split()[0] for line in _docstring_tree()]
    root, *children = names
    assert root == "WorkingMemoryError"
    for name in children:
        error = getattr(wm, name)
        assert error.__bases__[0] is wm.WorkingMemoryError, name
    listed = set(children)
    direct = {cls.__name__ for cls in wm.WorkingMemoryError.__subclasses__()}
    assert direct <= listed, direct - listed
