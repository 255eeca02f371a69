"""Window selection for the strategies: pure functions of (turns, counts, budget).

SLIDING_WINDOW, SUMMARY_BUFFER and the switched-off memory all pick their verbatim turns with
`select_window`; they differ only in the share of the budget and how far back they may reach.
"""

from .summary_buffer import render_notes, tail_start, update_due
from .window import Selection, Unit, group_units, select_window

__all__ = [
    "Selection",
    "Unit",
    "group_units",
    "render_notes",
    "select_window",
    "tail_start",
    "update_due",
]
