"""What a summary update may change: the helper proposes, the library applies.

    facts, notes = merge_facts(old, proposed, removals, max_facts=50)
    repeats(summary, [fact.text for fact in facts] + [last_turn_text])   # a summary to refuse

A small model's answer can be valid JSON within every cap and still spoil the memory: one
sentence repeated as eight facts, a new list that silently loses what an early turn said, a
summary that is only the last message again. So the library never takes a whole new list on
trust. An old fact stays unless the update names it in ``remove`` as contradicted or obsolete;
the facts the update gives are added, or merged into the old fact they repeat (its turn range
grown); exact and near-exact repeats are one fact; the cap holds by leaving out the new facts
that do not fit, never an old one. Pure functions: no I/O, no model.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from difflib import SequenceMatcher

from .types import Fact

__all__ = ["NEAR", "Removal", "merge_facts", "near_same", "normalized", "repeats"]

NEAR = 0.9
"""Two texts whose normalized forms match this closely (difflib's ratio) say the same."""

_NOT_WORD = re.compile(r"[\W_]+")
_ARTICLES = frozenset({"a", "an", "the"})
_NUMBER = re.compile(r"\d+")


@dataclass(frozen=True, slots=True)
class Removal:
    """An old fact the update names as no longer true: its text as the prompt gave it."""

    text: str
    why: str
    """``contradicted`` or ``obsolete``."""


def normalized(text: str) -> str:
    """Case, accents, punctuation, spacing and articles aside: what a text says, for comparing."""
    folded = unicodedata.normalize("NFKD", text.casefold())
    plain = folded if folded.isascii() else "".join(_uncombined(folded))
    return " ".join(w for w in _NOT_WORD.sub(" ", plain).split() if w not in _ARTICLES)


def _uncombined(text: str) -> Iterable[str]:
    """`text` without its combining marks (the accents NFKD split off their letters)."""
    return (c for c in text if not unicodedata.combining(c))


def near_same(a: str, b: str) -> bool:
    """Whether two normalized texts are the same or nearly (a typo, a word changed); never
    two that differ in a number (locker 3 is not locker 4)."""
    return _near(_Said(a), _Said(b))


class _Said:
    """A normalized text, with what `_near` compares before difflib's ratio found at most
    once, when first asked: a merge compares each fact with every other (building difflib's
    matcher for each pair cost more than the rest of a summary update), and most pairs part at
    their lengths, before anything else is looked at."""

    __slots__ = ("_letters", "_numbers", "text")

    def __init__(self, text: str) -> None:
        self.text = text
        self._numbers: list[str] | None = None
        self._letters: Counter[str] | None = None

    @property
    def numbers(self) -> list[str]:
        if self._numbers is None:
            self._numbers = _NUMBER.findall(self.text)
        return self._numbers

    @property
    def letters(self) -> Counter[str]:
        if self._letters is None:
            self._letters = Counter(self.text)
        return self._letters


def _near(a: _Said, b: _Said) -> bool:
    """`near_same`, with the cheap bounds first: the lengths, the numbers, then difflib's
    quick ratio (the letters two texts share, an upper bound of its ratio)."""
    if a.text == b.text:
        return True
    size_a, size_b = len(a.text), len(b.text)
    if not size_a or not size_b or min(size_a, size_b) < NEAR * max(size_a, size_b):
        return False
    if a.numbers != b.numbers:
        return False
    if 2.0 * (a.letters & b.letters).total() / (size_a + size_b) < NEAR:
        return False
    return SequenceMatcher(None, a.text, b.text, autojunk=False).ratio() >= NEAR


def repeats(summary: str, texts: Iterable[str]) -> bool:
    """Whether `summary` merely repeats one of `texts` (a fact, the last turn)."""
    said = normalized(summary)
    return bool(said) and any(near_same(said, normalized(text)) for text in texts)


def merge_facts(
    old: Sequence[Fact],
    proposed: Sequence[Fact],
    removals: Sequence[Removal],
    *,
    max_facts: int,
) -> tuple[tuple[Fact, ...], list[str]]:
    """The facts after an update, and what was not applied (for the report).

    Old facts in order, less those `removals` name (matched near-exactly; a removal that
    names no old fact is ignored), then the proposed facts that repeat none of them, in
    order; a proposed fact that repeats a fact keeps that fact's text and widens its turn
    range. At most `max_facts`: new facts past it are left out.
    """
    notes: list[str] = []
    kept = _Kept()
    gone = [_Said(normalized(removal.text)) for removal in removals]
    matched = [False] * len(gone)
    for fact in old:
        key = _Said(normalized(fact.text))
        hit = next((i for i, g in enumerate(gone) if _near(key, g)), None)
        if hit is not None:
            matched[hit] = True
            continue
        kept.add(fact, key)
    unmatched = [r.text for r, found in zip(removals, matched, strict=True) if not found]
    if unmatched:
        notes.append(f"{len(unmatched)} removals named no fact (e.g. {unmatched[0][:60]!r})")
    left_out = 0
    for fact in proposed:
        key = _Said(normalized(fact.text))
        if any(_near(key, g) for g in gone):
            continue  # removed and given again in one answer: removed
        if not kept.add(fact, key) and len(kept.facts) > max_facts:
            kept.drop_last()
            left_out += 1
    if left_out:
        notes.append(f"{left_out} new facts over the cap of {max_facts} left out")
    return tuple(kept.facts), notes


class _Kept:
    """The facts kept so far, their keys, and where each key's text is.

    A fact given again word for word (a model that echoes the old list, as most do) is found
    by its text at once, not after a comparison with every fact before it. It is the first
    fact it nearly repeats too: no kept fact nearly repeats one before it (each was compared
    with those when it was added), so none before it nearly repeats their common text.
    """

    def __init__(self) -> None:
        self.facts: list[Fact] = []
        self._keys: list[_Said] = []
        self._at: dict[str, int] = {}

    def add(self, fact: Fact, key: _Said) -> bool:
        """Appends `fact`, or merges it into the fact it repeats; True when merged."""
        index = self._at.get(key.text)
        if index is None:
            index = next((i for i, other in enumerate(self._keys) if _near(key, other)), None)
        if index is not None:
            self.facts[index] = _widened(self.facts[index], fact)
            return True
        self._at[key.text] = len(self.facts)
        self.facts.append(fact)
        self._keys.append(key)
        return False

    def drop_last(self) -> None:
        """Leaves the newest fact out (over the cap)."""
        self.facts.pop()
        del self._at[self._keys.pop().text]


def _widened(fact: Fact, again: Fact) -> Fact:
    """`fact` with the turn range that covers `again`'s too."""
    firsts = [t for t in (fact.first_turn, again.first_turn) if t is not None]
    lasts = [t for t in (fact.last_turn, again.last_turn) if t is not None]
    if not firsts:
        return fact
    return Fact(fact.text, first_turn=min(firsts), last_turn=max(lasts or firsts))
