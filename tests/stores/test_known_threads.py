"""What a process remembers of its threads (`KnownThreads`): the newest it saw, within its size."""

from __future__ import annotations

from workingmem.stores._known import Known, KnownThreads


def test_the_threads_seen_least_recently_are_forgotten_first() -> None:
    known = KnownThreads(size=2)
    known.saw("t", "a", 1, "k")
    known.saw("t", "b", 1, "k")
    known.saw("t", "a", 3, "k")  # seen again: the newest now
    known.saw("t", "c", 1, "k")
    assert known.get("t", "a") == Known(3, "k")
    assert known.get("t", "b") is None
    assert known.get("t", "c") == Known(1, "k")


def test_a_long_run_of_new_threads_keeps_exactly_the_newest() -> None:
    known = KnownThreads(size=100)
    for n in range(10_000):
        known.saw("t", f"th{n}", n, "k")
    assert known.get("t", "th9899") is None
    assert [known.get("t", f"th{n}") for n in (9900, 9999)] == [Known(9900, "k"), Known(9999, "k")]
    assert known.get("u", "th9999") is None  # another tenant's thread of the same id
