"""Figures a window's judge and its kinds read from the scraped ``/metrics`` samples.

Pure: the samples are ``metrics.jsonl`` lines (times in seconds from the run's start).
"""

from __future__ import annotations

from collections.abc import Sequence

from loadtest.features.server_summary import acceptance
from loadtest.measure.hdr import percentile
from loadtest.model.json import JsonObject

__all__ = ["acceptance_between", "count_delta", "pct"]


def pct(values: Sequence[float], q: float) -> float | None:
    """The ``q``th percentile of ``values``, rounded to 3 places (None: no values)."""
    p = percentile(values, q)
    return None if p is None else round(p, 3)


def _between(
    samples: Sequence[JsonObject], a_s: float, b_s: float, *, inner: bool
) -> tuple[JsonObject | None, JsonObject | None]:
    """Two good samples bounding the span ``a_s``..``b_s``.

    ``inner``: the first sample at or after ``a_s`` and the last at or before ``b_s``
    (nothing from outside the span leaks in: rates *within* it). Otherwise the last
    sample at or before ``a_s`` and the first at or after ``b_s`` (every change that
    happened in the span is caught: counts of events).
    """
    ok = [s for s in samples if s.get("ok")]
    # A scrape reads the server at some moment between its request (t_s) and its
    # answer (t_end_s); under load that gap is not small, so each bound takes the side
    # that keeps the reading on the correct side of the span edge.
    if inner:
        inside = [s for s in ok if a_s <= s["t_s"] and _answered_s(s) <= b_s]
        return (inside[0], inside[-1]) if len(inside) >= 2 else (None, None)
    if not ok:
        return None, None
    first = next((s for s in reversed(ok) if _answered_s(s) <= a_s), ok[0])
    last = next((s for s in ok if s["t_s"] >= b_s), ok[-1])
    return first, last


def _answered_s(sample: JsonObject) -> float:
    return float(sample.get("t_end_s") or sample["t_s"])


def acceptance_between(samples: Sequence[JsonObject], a_s: float, b_s: float) -> float | None:
    """The draft acceptance rate within the span (None: not two samples inside it)."""
    first, last = _between(samples, a_s, b_s, inner=True)
    if first is None or last is None or first is last:
        return None
    rate = acceptance(first, last)
    return None if rate is None else round(rate, 4)


def count_delta(samples: Sequence[JsonObject], field: str, a_s: float, b_s: float) -> int | None:
    """How much the counter ``field`` rose over the span (a count: an int)."""
    first, last = _between(samples, a_s, b_s, inner=False)
    if first is None or last is None or field not in first or field not in last:
        return None
    return round(float(last[field]) - float(first[field]))
