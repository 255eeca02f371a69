"""The public surface is declared: everything public is in __all__, and __all__ resolves."""

from __future__ import annotations

import workingmem as wm


def test_all_names_resolve() -> None:
    for name in wm.__all__:
        assert hasattr(wm, name), name


def test_every_public_name_is_exported() -> None:
    public = {
        name
        for name, value in vars(wm).items()
        if not name.startswith("_") and not isinstance(value, type(wm))
    }
    assert public <= set(wm.__all__), public - set(wm.__all__)


def test_contract_names_of_the_core_api() -> None:
    """Tests outside this repository use exactly these names."""
    for name in (
        "open_store",
        "WorkingMemory",
        "WorkingMemoryConfig",
        "Strategy",
        "ModelInfo",
        "Profile",
        "count_tokens",
        "NotFoundError",
        "ValidationError",
        "ContextOverflowError",
        "WorkingMemoryError",
    ):
        assert name in wm.__all__
    assert {s.value for s in wm.Strategy} == {"SLIDING_WINDOW", "SUMMARY_BUFFER"}
    assert isinstance(wm.Strategy.SLIDING_WINDOW, str)
    for error in (wm.NotFoundError, wm.ValidationError, wm.ContextOverflowError):
        assert issubclass(error, wm.WorkingMemoryError)
