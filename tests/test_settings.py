"""The library's settings refuse bad values with its own ValidationError, naming the field,
so that ``except wm.ValidationError`` catches every misuse (not pydantic's error)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

import pytest

import workingmem as wm


@pytest.mark.parametrize(
    ("make", "field", "words"),
    [
        (lambda: wm.WorkingMemoryConfig(recent_turns=0), "recent_turns", "greater than"),
        (
            lambda: wm.WorkingMemoryConfig(update_every_turns=20),
            "WorkingMemoryConfig",
            "must not exceed recent_turns",
        ),
        (lambda: wm.ModelInfo(id="m", context_window=0), "context_window", "greater than 0"),
        (lambda: wm.Profile(id="p", **cast(Any, {"surprise": 1})), "surprise", "Extra inputs"),
        (lambda: wm.GatewayConfig(default_model=""), "default_model", "at least 1 character"),
        (
            lambda: wm.GatewayConfig(working_memory=cast(Any, {"recent_turns": 0})),
            "working_memory",
            "recent_turns",
        ),
    ],
)
def test_a_bad_setting_is_the_librarys_validation_error(
    make: Callable[[], object], field: str, words: str
) -> None:
    with pytest.raises(wm.ValidationError) as caught:
        make()
    assert caught.value.field == field
    assert words in caught.value.reason
    assert isinstance(caught.value, ValueError)  # what pydantic's error was, too
