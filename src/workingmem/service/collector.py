"""The garbage collector of a process that does nothing but serve (`workingmem serve`).

    tune_for_serving()   # once started: the app, its store and its gateway built

CPython collects its youngest generation each time 700 more container objects are alive than
at the last collection, and now and then walks every object alive. A started server holds
about 250,000 objects for good (modules, schemas, routes, the tokenizers' tables), so each
full collection walked them all: 127 ms, once every 6,000 requests or so, a stall for every
request in flight; and under load the young collections came 20 times a second, 47 µs a
request in all (measured with `gc.callbacks` in the service under load). `gc.freeze` sets
what startup built out of the collector's reach, and a threshold of `YOUNG_THRESHOLD` lets a
request's short-lived objects die by their reference counts before a collection looks at
them: two young collections in 10,000 requests, 0.5 µs a request.
"""

from __future__ import annotations

import gc

__all__ = ["YOUNG_THRESHOLD", "tune_for_serving"]

YOUNG_THRESHOLD = 10_000
"""New container objects between two collections of the youngest generation (CPython: 700)."""


def tune_for_serving() -> None:
    """Collects once, freezes what is alive, and collects the young generation less often.
    For a process of its own only: the threshold is the whole process's."""
    gc.collect()
    gc.freeze()
    _, middle, oldest = gc.get_threshold()
    gc.set_threshold(YOUNG_THRESHOLD, middle, oldest)
