"""The error an integration raises when its framework is not installed."""

from __future__ import annotations

__all__ = ["missing_extra"]


def missing_extra(extra: str, framework: str) -> ImportError:
    """An ImportError that says which extra installs `framework`: raise it ``from`` the
    original one, so the missing module is still in the traceback."""
    return ImportError(
        f"workingmem's {framework} integration needs {framework}: pip install 'workingmem[{extra}]'"
    )
