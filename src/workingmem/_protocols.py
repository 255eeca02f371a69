"""Whether an object implements a runtime-checkable protocol, answered once per class.

    if implements(store, AskLockStore): ...

``isinstance`` against a runtime-checkable protocol looks up each of the protocol's members on
every call (about 9 µs on CPython 3.11); the hot paths ask it on every request about objects
whose class decides the answer.
"""

from __future__ import annotations

import functools

__all__ = ["implements"]


def implements(obj: object, protocol: type) -> bool:
    """`isinstance(obj, protocol)` for a protocol of methods only, remembered per class (a
    caller that narrows wraps it in a ``TypeGuard`` of its protocol)."""
    kind: type = type(obj)
    return _is_subclass(kind, protocol)


@functools.cache
def _is_subclass(kind: type, protocol: type) -> bool:
    return issubclass(kind, protocol)
