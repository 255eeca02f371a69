"""The words a recall searches for, from a turn's text: the same on every database.

    terms("When did Caroline go to the LGBTQ support group?")
    # ['caroline', 'go', 'lgbtq', 'support', 'group']

Each database stems and ranks them its own way (SQLite's FTS5 with BM25, PostgreSQL's English
text search); what they are given is bounded here: the distinct words of the query, less the
English words too common to tell turns apart, at most `MAX_TERMS` of them.
"""

from __future__ import annotations

import re

__all__ = ["MAX_TERMS", "terms"]

MAX_TERMS = 32
"""The most words one search asks for (a long message is a question of its first words)."""

_WORD = re.compile(r"\w+")
_COMMON_WORDS = """
a about above after again against all am an and any are as at be because been before being
below between both but by can could did do does doing down during each few for from further had
has have having he her here hers herself him himself his how i if in into is it its itself just
me more most my myself no nor not now of off on once only or other our ours ourselves out over
own same she should so some such than that the their theirs them themselves then there these
they this those through to too under until up very was we were what when where which while who
whom why will with would you your yours yourself yourselves s t d ll m re ve don didn doesn isn
wasn aren weren hasn haven hadn won wouldn couldn shouldn let also yes yeah oh hey hi ok okay
really
"""
"""English words too common to tell turns apart (and contractions' pieces)."""
_STOPWORDS = frozenset(_COMMON_WORDS.split())


def terms(text: str) -> list[str]:
    """The distinct searchable words of `text`, in order, lower-cased; [] for none."""
    found: dict[str, None] = {}
    for match in _WORD.finditer(text.casefold()):
        word = match.group().strip("_")
        if word and word not in _STOPWORDS and word not in found:
            found[word] = None
            if len(found) >= MAX_TERMS:
                break
    return list(found)
