"""Sparklines whose bars start at zero: a zero draws nothing, the largest value fills.

Textual's ``Sparkline`` scales from the series' minimum to its maximum and draws a
single value as a full block, so a replay's first second (``requests/s 0.0``) or an
idle spell showed as solid bars, and a dip from 40 to 38 req/s read as a fall to
nothing. Here a bar's height is its value over the largest one; any value above zero
shows at least the lowest eighth of a cell.
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction

from rich.color import Color, blend_rgb
from rich.console import Console, ConsoleOptions, RenderResult
from rich.segment import Segment
from rich.style import Style
from textual.app import RenderResult as WidgetRender
from textual.widgets import Sparkline

__all__ = ["ZeroSparkline", "bar_levels", "spark_rows"]

_BARS = " ▁▂▃▄▅▆▇█"
_STEPS = len(_BARS) - 1


def bar_levels(data: Sequence[float], width: int, height: int) -> list[float]:
    """The height of each of ``width`` bars, in eighths of a cell (0 .. 8 * ``height``).

    Each bar stands for the largest value of its share of ``data`` (fewer values than
    bars: each value is drawn over several).
    """
    if width <= 0 or not data:
        return [0.0] * max(width, 0)
    top = max(data)
    if top <= 0:
        return [0.0] * width
    full = _STEPS * height
    levels = []
    for col in range(width):
        lo = int(Fraction(len(data) * col, width))
        hi = max(lo + 1, int(Fraction(len(data) * (col + 1), width)))
        v = max(data[lo:hi])
        levels.append(0.0 if v <= 0 else max(1.0, round(v / top * full)))
    return levels


def spark_rows(data: Sequence[float], width: int, height: int) -> list[str]:
    """The sparkline as ``height`` lines of text, top line first."""
    levels = bar_levels(data, width, height)
    rows = []
    for row in reversed(range(height)):
        base = row * _STEPS
        rows.append("".join(_BARS[int(min(_STEPS, max(0.0, lv - base)))] for lv in levels))
    return rows


class _Bars:
    """The Rich renderable: ``spark_rows`` coloured from ``low`` to ``high`` by height."""

    def __init__(
        self, data: Sequence[float], width: int, height: int, low: Color, high: Color
    ) -> None:
        self.data = data
        self.width = width
        self.height = height
        self.low = low.get_truecolor()
        self.high = high.get_truecolor()

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        levels = bar_levels(self.data, self.width, self.height)
        full = _STEPS * self.height or 1
        shades: dict[float, Style] = {}
        for lv in levels:
            if lv not in shades:
                shade = blend_rgb(self.low, self.high, lv / full)
                shades[lv] = Style(color=Color.from_triplet(shade))
        for i, line in enumerate(spark_rows(self.data, self.width, self.height)):
            if i:
                yield Segment.line()
            # One segment per run of equal cells: the dashboard's process draws less.
            start = 0
            for end in range(1, len(line) + 1):
                if end < len(line) and line[end] == line[start] and levels[end] == levels[start]:
                    continue
                text = line[start:end]
                yield Segment(text, shades[levels[start]] if text[0] != " " else None)
                start = end


class ZeroSparkline(Sparkline):
    """Textual's ``Sparkline`` (same styles and ``data``), drawn from zero up."""

    def render(self) -> WidgetRender:
        """The bars of ``data`` at the widget's size."""
        _, base = self.background_colors
        low = base + self.get_component_styles("sparkline--min-color").color
        high = base + self.get_component_styles("sparkline--max-color").color
        data = self.data or []
        return _Bars(data, self.size.width, self.size.height, low.rich_color, high.rich_color)
