"""The report's bar chart, drawn with matplotlib: a title, labelled axes, each bar's value on it
and a legend.

matplotlib is optional (the ``charts`` extra: ``pip install 'frontdesk[charts]'``), so the
runtime stays lean: without it ``bar_chart_png`` raises ``ChartUnavailable`` with a one-line
reason and the report is written without its chart. matplotlib is imported on the first chart,
not with the plugin.

Drawing uses the object-oriented API on the non-interactive Agg canvas (a ``Figure`` and
``FigureCanvasAgg``, never ``pyplot``), so no GUI backend, no global figure state, and the
fonts are the DejaVu fonts matplotlib ships (nothing is downloaded). Text is never read as
mathtext, so a "$" in an amount or a caller's name stays a "$". Colours are the Okabe-Ito
palette, which stays distinct for colour-blind readers.

``figure(chart)`` builds the ``Figure`` and ``png(fig, chart)`` encodes it; they are separate so
a test can read the title, labels and legend before the pixels.
"""

from __future__ import annotations

import io
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

INSTALL_HINT = "install frontdesk[charts]"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
WIDTH_IN, HEIGHT_IN, DPI = 8.0, 4.5, 100  # an 800 x 450 pixel PNG

# Okabe-Ito, by name so a report can give a meaning its colour (succeeded is green).
COLOURS = {
    "blue": "#0072B2",
    "green": "#009E73",
    "orange": "#E69F00",
    "vermillion": "#D55E00",
    "sky": "#56B4E9",
    "purple": "#CC79A7",
    "yellow": "#F0E442",
    "grey": "#999999",
}
PALETTE = tuple(COLOURS.values())
_MAX_LABEL = 60  # a longer title or category is cut, so it cannot push the plot off the image

# matplotlib's text layout caches are not documented as thread-safe; reports run in threads.
_DRAWING = threading.Lock()


class ChartUnavailable(RuntimeError):
    """The chart cannot be drawn here; ``str(exc)`` says why in one line."""


def _count(value: float) -> str:
    return f"{value:g}"


@dataclass(frozen=True)
class Series:
    """One entry of the legend: a value per category (bars of several series are stacked)."""

    name: str
    values: Sequence[float]
    colour: str | None = None  # a COLOURS name or any matplotlib colour; None: the palette


@dataclass(frozen=True)
class Chart:
    title: str
    xlabel: str
    ylabel: str
    categories: Sequence[str]  # the bars, left to right
    series: Sequence[Series]
    value_format: Callable[[float], str] = _count  # the value written on each bar and tick
    integer: bool = False  # counts: whole-number ticks only
    empty_note: str = "Nothing to show for this period"
    legend_title: str | None = None
    description: str = ""  # the PNG's text alternative (its Description chunk)


def _short(text: str) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= _MAX_LABEL else text[: _MAX_LABEL - 3] + "..."


def _matplotlib() -> tuple[Any, Any, Any]:
    try:
        import matplotlib  # noqa: F401
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
        from matplotlib.ticker import FuncFormatter
    except ImportError:
        raise ChartUnavailable(f"matplotlib is not installed ({INSTALL_HINT})") from None
    return Figure, FigureCanvasAgg, FuncFormatter


def available() -> str | None:
    """None if charts can be drawn, else the one-line reason they cannot."""
    try:
        _matplotlib()
    except ChartUnavailable as exc:
        return str(exc)
    return None


def figure(chart: Chart) -> Any:
    """The chart as a matplotlib ``Figure`` on an Agg canvas (``ChartUnavailable`` without
    matplotlib). Negative values are drawn as zero."""
    Figure, FigureCanvasAgg, FuncFormatter = _matplotlib()
    fig = Figure(figsize=(WIDTH_IN, HEIGHT_IN), dpi=DPI, layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    plain = {"parse_math": False}
    ax.set_title(_short(chart.title), fontsize=13, fontweight="bold", pad=12, **plain)
    ax.set_xlabel(_short(chart.xlabel), **plain)
    ax.set_ylabel(_short(chart.ylabel), **plain)
    ax.spines[["top", "right"]].set_visible(False)
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _pos: chart.value_format(v)))
    if chart.integer:
        ax.yaxis.get_major_locator().set_params(integer=True)
    ax.grid(axis="y", color="#E1E1E1", linewidth=0.8)
    ax.set_axisbelow(True)

    names = [_short(c) for c in chart.categories]
    positions = list(range(len(names)))
    bottoms = [0.0] * len(names)
    drawn = []
    for n, series in enumerate(chart.series):
        heights = [max(float(v), 0.0) for v in series.values]
        colour = COLOURS.get(series.colour or "", series.colour) or PALETTE[n % len(PALETTE)]
        bars = ax.bar(
            positions, heights, width=0.6, bottom=bottoms, color=colour,
            label=_short(series.name), edgecolor="white", linewidth=0.8,
        )  # fmt: skip
        drawn.append((bars, heights))
        bottoms = [b + h for b, h in zip(bottoms, heights, strict=True)]
    totals = bottoms
    top = max(totals, default=0.0)
    ax.set_ylim(0, top * 1.18 if top > 0 else 1)
    ax.set_xticks(positions, names, **plain)
    if len(names) > 5 or any(len(n) > 12 for n in names):
        ax.tick_params(axis="x", labelrotation=20)
        for label in ax.get_xticklabels():
            label.set_horizontalalignment("right")

    # Each bar's value on top of it; a stack's segments also get theirs inside, when they fit.
    if drawn:
        last = drawn[-1][0]
        ax.bar_label(
            last, labels=[chart.value_format(t) for t in totals], padding=3, fontsize=10,
            fontweight="bold", **plain,
        )  # fmt: skip
    # A bar that is a stack of two or more segments also has each segment's value inside it.
    stacks = {i for i in positions if sum(1 for _, heights in drawn if heights[i] > 0) > 1}
    for bars, heights in drawn if stacks else ():
        inside = [
            chart.value_format(h) if i in stacks and h >= top * 0.08 else ""
            for i, h in enumerate(heights)
        ]
        ax.bar_label(bars, labels=inside, label_type="center", color="white", fontsize=9, **plain)
    if top <= 0:
        ax.text(
            0.5, 0.5, chart.empty_note, transform=ax.transAxes, ha="center", va="center",
            color="#555555", fontsize=11, **plain,
        )  # fmt: skip
    if drawn:
        # Beside the plot, so it never covers a bar (constrained layout makes room for it).
        legend = fig.legend(title=chart.legend_title, frameon=False, loc="outside right upper")
        for text in legend.get_texts():
            text.set_parse_math(False)
    return fig


def png(fig: Any, chart: Chart) -> bytes:
    """The figure as PNG bytes; the title and description go in its text chunks too."""
    out = io.BytesIO()
    metadata = {"Title": _short(chart.title), "Description": chart.description or None}
    fig.savefig(out, format="png", dpi=DPI, metadata=metadata, facecolor="white")
    return out.getvalue()


def bar_chart_png(chart: Chart) -> bytes:
    """Draw ``chart`` and return the PNG (``ChartUnavailable`` without matplotlib)."""
    _matplotlib()  # fail fast, before the lock
    with _DRAWING:
        return png(figure(chart), chart)
