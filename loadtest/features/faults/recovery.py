"""Whether latency after a fault window came back to its level before it.

A fixed "within 10% of the median before" flips on an unchanged deployment: the median
of one 1 s slice of sends moves by more than 10% from slice to slice on its own (few
requests per slice, a mix of prompt kinds, a shared machine). So a slice after the
window counts as *back* when its median is within what the before phase itself shows
of such a median, the widest of:

- the before phase's median plus the tolerance (``recovery_tolerance``, 10%) and a
  0.5 ms slack for timer noise on fast endpoints;
- the 99th percentile of the median of as many requests as the slice has, drawn from
  the before phase's requests (a bootstrap: how high a slice median of that size goes
  by chance when nothing changed);
- the slowest 1 s slice median of the before phase (its own run-to-run spread, which
  also carries what the bootstrap cannot: the whole machine slowing for a second).

Deterministic: the bootstrap draws from a fixed seed, so the same rows get the same
answer (the dashboard and the summary agree).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from loadtest.model.verdict import PhaseStats, RequestRow

__all__ = ["MIN_REQUESTS", "Baseline", "recovery_s"]

MIN_REQUESTS = 5
"""Completed requests a phase needs before its latency is compared with another's."""

_SLACK_MS = 0.5  # absolute slack: timer noise on fast endpoints
_DRAWS = 400
_QUANTILE = 99.0
_SEED = 0x7EC0


@dataclass(frozen=True, slots=True)
class _Metric:
    values: tuple[float, ...]
    """Every completed request's value in the before phase (sorted)."""
    slice_max: float | None
    """The highest median of a 1 s slice of the before phase's sends."""
    _cache: dict[int, float] = field(default_factory=dict, compare=False)

    @property
    def median(self) -> float | None:
        return float(np.median(self.values)) if self.values else None

    def bound(self, n: int, tolerance: float) -> float | None:
        """The highest median of ``n`` requests that still counts as the level before."""
        median = self.median
        if median is None:
            return None
        if n not in self._cache:
            bound = median * (1 + tolerance) + _SLACK_MS
            if len(self.values) > 1:
                rng = np.random.default_rng(_SEED + n)
                draws = rng.choice(np.asarray(self.values), size=(_DRAWS, n))
                bound = max(bound, float(np.percentile(np.median(draws, axis=1), _QUANTILE)))
            if self.slice_max is not None:
                bound = max(bound, self.slice_max)
            self._cache[n] = bound
        return self._cache[n]


def _metric(
    rows: Sequence[RequestRow], key: Literal["ttft_ms", "tpot_ms"], start_ms: float
) -> _Metric:
    pairs = [(r["sent_ms"], v) for r in rows if (v := r[key]) is not None]
    slices: dict[int, list[float]] = {}
    for sent, v in pairs:
        slices.setdefault(int((sent - start_ms) // 1000), []).append(v)
    medians = [float(np.median(s)) for s in slices.values()]
    return _Metric(
        tuple(sorted(v for _, v in pairs)),
        max(medians) if len(medians) > 1 else None,
    )


@dataclass(frozen=True, slots=True)
class Baseline:
    """The before phase's latencies, which the slices after a window are held to."""

    ttft: _Metric
    tpot: _Metric
    ok: int
    """Completed requests of the before phase."""

    @classmethod
    def of_rows(cls, rows: Sequence[RequestRow]) -> Baseline:
        """From the before phase's rows (its completed requests)."""
        ok = [r for r in rows if r["outcome"] == "ok"]
        start = min((r["sent_ms"] for r in ok), default=0.0)
        return cls(_metric(ok, "ttft_ms", start), _metric(ok, "tpot_ms", start), len(ok))

    @classmethod
    def of_stats(cls, before: PhaseStats) -> Baseline:
        """From the medians alone: no spread known, so only the tolerance applies."""
        ttft, tpot = before["ttft_p50_ms"], before["tpot_p50_ms"]
        return cls(
            _Metric((ttft,) if ttft is not None else (), None),
            _Metric((tpot,) if tpot is not None else (), None),
            before["ok"],
        )


def recovery_s(
    rows: Sequence[RequestRow],
    end_ms: float,
    before: PhaseStats | Baseline,
    tolerance: float = 0.10,
) -> float | None:
    """Seconds after ``end_ms`` until the median TTFT and TPOT of a 1 s slice of sends
    are back to the level before (see the module); None if they never are."""
    base = before if isinstance(before, Baseline) else Baseline.of_stats(before)
    if base.ttft.median is None:
        return None
    last = max((r["sent_ms"] for r in rows), default=end_ms)
    second = 0
    while end_ms + second * 1000 <= last:
        lo, hi = end_ms + second * 1000, end_ms + (second + 1) * 1000
        ok = [r for r in rows if lo <= r["sent_ms"] < hi and r["outcome"] == "ok"]
        ttft = [t for r in ok if (t := r["ttft_ms"]) is not None]
        tpot = [t for r in ok if (t := r["tpot_ms"]) is not None]
        tpot_back = base.tpot.median is None or not tpot or _within(tpot, base.tpot, tolerance)
        if ttft and _within(ttft, base.ttft, tolerance) and tpot_back:
            return float(second)
        second += 1
    return None


def _within(values: list[float], metric: _Metric, tolerance: float) -> bool:
    bound = metric.bound(len(values), tolerance)
    return bound is not None and float(np.median(values)) <= bound
