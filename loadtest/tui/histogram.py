"""The dashboard's histogram: log buckets, merged to fit the rows the panel has.

A panel shows every bucket or none is hidden: an 80x24 terminal left the histogram
four rows and it showed the first of an 18-bucket ``itl_ms`` (the lowest, mostly empty
ones) and cut the rest. Where the buckets outnumber the rows, adjacent ones are merged
into wider ones (two per half decade, then whole decades, then several), so the rows
still cover the whole distribution. ``log_buckets``, ``fit_buckets`` and
``render_histogram`` are plain functions; the ``Histogram`` widget only holds the frame
and draws it at its own size.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from hdrh.histogram import HdrHistogram
from rich.text import Text
from textual.app import RenderResult
from textual.widget import Widget

from loadtest.measure.recorders import bucket_arrays
from loadtest.tui.frame import Frame

__all__ = ["Histogram", "fit_buckets", "histogram_title", "log_buckets", "render_histogram"]

Bucket = tuple[float, float, int]
"""Lower and upper edge in ms, and the count between them."""
_LABEL = 21
"""Characters before a bar: ``{lo:>8}-{hi:<8} ms `` (``render_histogram``)."""


def log_buckets(hist: HdrHistogram | None, per_decade: int = 4) -> tuple[Bucket, ...]:
    """Counts in log-spaced buckets (``per_decade`` per factor of 10), ms edges."""
    if hist is None or not hist.get_total_count():
        return ()
    lowest, _, counts = bucket_arrays(hist)
    k = np.floor(np.log10(np.maximum(lowest, 1)) * per_decade).astype(np.int64)
    lo = int(k.min())
    per = np.bincount(k - lo, weights=counts)
    return tuple(
        (10 ** ((lo + i) / per_decade) / 1e3, 10 ** ((lo + i + 1) / per_decade) / 1e3, int(c))
        for i, c in enumerate(per)
    )


def fit_buckets(buckets: Sequence[Bucket], rows: int) -> tuple[Bucket, ...]:
    """``buckets`` (``log_buckets``' contiguous ones) in ``rows`` buckets or fewer.

    Adjacent buckets are merged in groups aligned on the log grid (a group of a whole
    decade starts at a power of ten), the smallest groups that fit: a merged bucket's
    edges are those of the buckets it holds, its count their sum.
    """
    rows = max(1, rows)
    if len(buckets) <= rows:
        return tuple(buckets)
    lo0, hi0, _ = buckets[0]
    per_decade = max(1, round(1 / math.log10(hi0 / lo0)))
    index = round(math.log10(lo0 * 1e3) * per_decade)  # of the first bucket, on the grid
    sizes = [d for d in range(1, per_decade + 1) if per_decade % d == 0]
    for size in (*sizes, *range(2 * per_decade, len(buckets) * per_decade + 1, per_decade)):
        groups: dict[int, list[Bucket]] = {}
        for i, b in enumerate(buckets):
            groups.setdefault((index + i) // size, []).append(b)
        if len(groups) <= rows:
            return tuple(
                (group[0][0], group[-1][1], sum(c for _, _, c in group))
                for group in groups.values()
            )
    return ((lo0, buckets[-1][1], sum(c for _, _, c in buckets)),)


def _ms(v: float) -> str:
    """A latency to at least 3 significant digits: never ``0.00`` for a value above 0."""
    if v >= 10:
        return f"{v:.1f}"
    return f"{v:.2f}" if v >= 1 else f"{v:.3g}"


def histogram_title(f: Frame) -> str:
    """What the histogram shows: the metric and category, over log buckets."""
    return f"{f.metric} ({f.category}), log buckets"


def render_histogram(f: Frame, width: int = 36, rows: int | None = None) -> str:
    """The selected metric's distribution as text bars of up to ``width`` cells, one
    line per bucket; in ``rows`` lines or fewer (``fit_buckets``) where given."""
    if not f.buckets:
        return f"{f.metric} ({f.category}): no values yet"
    buckets = f.buckets if rows is None else fit_buckets(f.buckets, rows)
    top = max(c for _, _, c in buckets) or 1
    lines = []
    for lo, hi, c in buckets:
        bar = "█" * max(1 if c else 0, round(c / top * width))
        # The lowest bucket (1 µs) also holds the zero gaps of chunks read together.
        low = "0" if lo <= 0.001 else _ms(lo)
        lines.append(f"{low:>8}-{_ms(hi):<8} ms {bar} {c}")
    return "\n".join(lines)


class Histogram(Widget):
    """The histogram panel: holds the frame it was given and draws it at its size."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._frame: Frame | None = None

    def show(self, f: Frame) -> None:
        """Draw ``f``'s distribution (a redraw only where it changed: each costs a paint)."""
        title = histogram_title(f)
        if self.border_title != title:
            self.border_title = title
        old = self._frame
        if old is None or (old.buckets, old.metric, old.category) != (
            f.buckets,
            f.metric,
            f.category,
        ):
            self._frame = f
            self.refresh()

    def render(self) -> RenderResult:
        """The buckets, merged to the rows the panel has and bars to its width."""
        f = self._frame
        if f is None:
            return ""
        width, rows = self.content_size
        top = max((c for _, _, c in fit_buckets(f.buckets, rows)), default=0)
        bar = max(1, width - _LABEL - 1 - len(str(top)))
        return Text(render_histogram(f, bar, rows), no_wrap=True, overflow="crop")
