"""SVG charts of what a benchmark has just measured, for the documentation site.

    from _plot import Bars, Line, bar_chart, line_chart
    line_chart(folder / "load-latency.svg", title=..., x_label=..., y_label=..., lines=[...])

matplotlib (the ``bench`` extra) is imported by the first chart drawn, never when this module
is imported: a benchmark run without ``--plot`` neither needs it nor pays for it.

The charts sit on a page that has a light and a dark theme, so they draw on a transparent
background with mid-grey text, axes and grid, and colours that read on white and on near-black.
The files are stable: the SVG's ids come from a fixed salt and its metadata carries no date,
so a rerun that measured the same figures writes the same bytes (and a changed file in a diff
means changed figures).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["Bars", "Guide", "Line", "bar_chart", "line_chart", "spans_decades"]

GREY = "#8a8a8a"
"""Text, axes and ticks: readable on a white page and on a dark one."""
COLOURS = ("#3b8fd9", "#e07b39", "#2fa37a", "#b866d6", "#d4a20f", "#d64f6b", "#8a8a8a")
"""Mid-tone colours, in the order lines and bars take them: none vanishes on either theme."""
MARKERS = ("o", "s", "^", "D", "v", "P", "X")
"""A marker per line as well, so the lines part without colour (print, colour blindness)."""
STYLE: dict[str, Any] = {
    "svg.hashsalt": "workingmem-benchmarks",  # the ids of clip paths etc.: stable across runs
    "svg.fonttype": "path",  # glyphs drawn as paths: the same text in every browser
    "font.family": "DejaVu Sans",  # matplotlib's own font, so no machine's fonts change a file
    "font.size": 10,
    "text.color": GREY,
    "axes.labelcolor": GREY,
    "axes.edgecolor": GREY,
    "axes.titlecolor": GREY,
    "axes.titlesize": 12,
    "axes.titleweight": "bold",
    "axes.facecolor": "none",
    "axes.spines.top": False,
    "axes.spines.right": False,
    "xtick.color": GREY,
    "ytick.color": GREY,
    "grid.color": GREY,
    "grid.alpha": 0.3,
    "grid.linewidth": 0.6,
    "legend.frameon": False,
    "legend.labelcolor": GREY,
    "figure.facecolor": "none",
    "savefig.facecolor": "none",
    "savefig.transparent": True,
}
LEGEND_INSIDE = 3
"""Up to this many lines the legend goes inside the axes; more would hide some of them."""
DECADES = 100.0
"""Values whose largest is at least this multiple of the smallest get a log axis."""


@dataclass(frozen=True)
class Line:
    """One series of a line chart: its points, in order of x."""

    label: str
    x: Sequence[float]
    y: Sequence[float]
    dashed: bool = False


@dataclass(frozen=True)
class Bars:
    """One group member of a bar chart: a value per category, in the categories' order."""

    label: str
    values: Sequence[float]


@dataclass(frozen=True)
class Guide:
    """A horizontal reference line (a limit, a budget) with its label."""

    y: float
    label: str


def spans_decades(values: Iterable[float]) -> bool:
    """Whether positive values spread over two decades or more, where a linear axis would
    crush the small ones against zero."""
    found = [v for v in values if v > 0]
    return bool(found) and max(found) / min(found) >= DECADES


def line_chart(
    path: Path,
    *,
    title: str,
    x_label: str,
    y_label: str,
    lines: Sequence[Line],
    log_x: bool | None = None,
    log_y: bool | None = None,
    guides: Sequence[Guide] = (),
) -> Path:
    """Writes a line chart to `path` (SVG) and returns it.

    `log_x` / `log_y` None: logarithmic when the data spans decades (`spans_decades`). The x
    ticks are the measured x values when there are few of them: a benchmark's sizes are the
    points worth reading off, not round numbers between them.
    """
    xs = sorted({float(x) for line in lines for x in line.x})
    ys = [float(y) for line in lines for y in line.y] + [guide.y for guide in guides]
    log_x = spans_decades(xs) if log_x is None else log_x
    log_y = spans_decades(ys) if log_y is None else log_y
    matplotlib, ticker = _matplotlib()
    with matplotlib.rc_context(STYLE):
        figure = matplotlib.figure.Figure(figsize=(8, 4.6), layout="constrained")
        axes = figure.add_subplot()
        for i, line in enumerate(lines):
            axes.plot(
                line.x,
                line.y,
                label=line.label,
                color=COLOURS[i % len(COLOURS)],
                marker=MARKERS[i % len(MARKERS)],
                markersize=5,
                linewidth=1.8,
                linestyle="--" if line.dashed else "-",
            )
        for guide in guides:
            axes.axhline(guide.y, color=GREY, linestyle=":", linewidth=1.2)
            axes.annotate(
                guide.label,
                (0, guide.y),
                xycoords=("axes fraction", "data"),
                xytext=(4, 3),
                textcoords="offset points",
                fontsize=9,
            )
        if log_x:
            axes.set_xscale("log")
        if log_y:
            axes.set_yscale("log")
            if max(ys) / min(y for y in ys if y > 0) < DECADES * 10:
                # Two or three decades: 1-2-5 ticks, or the axis would carry two labels.
                axes.yaxis.set_major_locator(ticker.LogLocator(subs=(1.0, 2.0, 5.0)))
        if 0 < len(xs) <= 10:
            axes.set_xticks(xs)
            axes.xaxis.set_minor_locator(ticker.NullLocator())
        axes.xaxis.set_major_formatter(ticker.FuncFormatter(_number))
        axes.yaxis.set_major_formatter(ticker.FuncFormatter(_number))
        if not log_y:
            axes.set_ylim(bottom=0)
        axes.grid(True, which="major")
        axes.set_title(title, loc="left")
        axes.set_xlabel(x_label)
        axes.set_ylabel(y_label)
        if len(lines) <= LEGEND_INSIDE:
            axes.legend(loc="best")
        else:  # under the chart, where it hides no line
            figure.legend(loc="outside lower center", ncols=2)
        return _save(figure, path)


def bar_chart(
    path: Path,
    *,
    title: str,
    value_label: str,
    categories: Sequence[str],
    groups: Sequence[Bars],
    unit: str = "",
    limit: float | None = None,
) -> Path:
    """Writes a horizontal grouped bar chart to `path` (SVG) and returns it.

    Horizontal, so the categories' names (a benchmark's contenders, often long; a second line
    after "\\n") read without turning; the first category on top, each value written at the
    end of its bar.
    """
    matplotlib, ticker = _matplotlib()
    with matplotlib.rc_context(STYLE):
        height = 1.2 + 0.32 * len(categories) * max(1, len(groups))
        figure = matplotlib.figure.Figure(figsize=(8, height), layout="constrained")
        axes = figure.add_subplot()
        slot = 0.8 / max(1, len(groups))
        for i, group in enumerate(groups):
            positions = [c + (i - (len(groups) - 1) / 2) * slot for c in range(len(categories))]
            bars = axes.barh(
                positions,
                group.values,
                height=slot * 0.9,
                label=group.label,
                color=COLOURS[i % len(COLOURS)],
            )
            axes.bar_label(
                bars, labels=[f"{v:.1f}{unit}" for v in group.values], padding=3, fontsize=8.5
            )
        axes.set_yticks(range(len(categories)), labels=list(categories))
        axes.invert_yaxis()
        axes.tick_params(axis="y", length=0)
        top = limit if limit is not None else max(v for g in groups for v in g.values)
        axes.set_xlim(0, top * 1.1)  # room for the value written after the longest bar
        axes.xaxis.set_major_formatter(ticker.FuncFormatter(lambda v, _: f"{v:g}{unit}"))
        axes.grid(True, axis="x")
        axes.set_axisbelow(True)
        # The figure's title, from its left edge: the categories' names take the axes' left.
        figure.suptitle(title, x=0, ha="left", fontsize=12, fontweight="bold")
        axes.set_xlabel(value_label)
        axes.legend(loc="lower left", bbox_to_anchor=(0, 1.0), ncols=len(groups), borderaxespad=0)
        return _save(figure, path)


def _matplotlib() -> tuple[Any, Any]:
    """matplotlib on the Agg backend (no display), imported on first use only."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.figure
    import matplotlib.ticker

    return matplotlib, matplotlib.ticker


def _number(value: float, _position: object = None) -> str:
    """Tick labels as the reports write figures: 100,000 and 0.05, not 10^5 and 5e-2."""
    if value == 0 or not math.isfinite(value):
        return "0"
    if abs(value) >= 1:
        return f"{value:,.0f}"
    return f"{value:.{max(0, -math.floor(math.log10(abs(value))))}f}"


def _save(figure: Any, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, format="svg", bbox_inches="tight", metadata={"Date": None})
    return path
