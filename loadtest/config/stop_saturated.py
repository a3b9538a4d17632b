"""The ``saturated`` stop rule: a load the endpoint cannot keep up with ends early.

An open loop offered more than the endpoint serves builds a queue that only grows:
completions fall behind arrivals, the requests in flight climb, and every request waits
longer than the one before it. Waiting out the step's duration adds nothing but a longer
queue, and in a capacity search it is a fail whatever its percentiles say. The rule
fires when, over the last ``window_s`` of measured requests, **both** the requests in
flight and the time to first token from the intended send rise steadily: each by a
least-squares slope at least ``T_MIN`` standard errors above zero, and each by at least
``rise`` of its starting level (in flight by at least ``MIN_QUEUE`` requests too). One
slow request, a burst that drains, or a high but flat latency does not fire it. In a
closed loop the sessions bound the requests in flight (each waits for its answer), so
once every session is busy the rule does not fire there.

The evidence is in the reason: the window, in flight and TTFT at its start and end (by
the fitted lines), and completions per second against the arrivals they fell behind.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from loadtest.config.stop_rules import RunSoFar, TrendSample
from loadtest.config.toml_tables import Table

__all__ = ["DEFAULT", "SATURATED", "SaturationSettings", "fitted_rise", "ticked"]

T_MIN = 5.0
"""Standard errors a slope must clear: a steady climb, not noise (t >= 5)."""
MIN_QUEUE = 4.0
"""The fewest extra requests in flight over the window that count as a growing queue."""
MIN_SAMPLES = 20
TICK_S = 0.5
"""Judged when a request's end crosses a new half second of measured load: at most twice
a second, whatever the rate (a fit over the window costs more than a count, and at
1,000 req/s a window holds 10,000 requests)."""


@dataclass(frozen=True, slots=True)
class SaturationSettings:
    """``saturated``'s settings."""

    window_s: float
    """The trailing window the trends are fitted over (seconds of measured load)."""
    rise: float
    """The least rise over the window, as a share of the fitted start (0.5: +50%)."""


DEFAULT = SaturationSettings(window_s=10.0, rise=0.5)
"""A 10 s window and +50%: ``--stop-saturated`` and a table that sets nothing."""


def fitted_rise(x: np.ndarray, y: np.ndarray) -> tuple[float, float, float]:
    """A least-squares line through (x, y): its value at the window's start and end, and
    its slope in standard errors (inf for a perfect climb, 0 for a flat or falling one)."""
    xm = x - x.mean()
    sxx = float(np.dot(xm, xm))
    if sxx <= 0:
        return float(y.mean()), float(y.mean()), 0.0
    slope = float(np.dot(xm, y - y.mean())) / sxx
    start = float(y.mean()) + slope * float(x.min() - x.mean())
    end = float(y.mean()) + slope * float(x.max() - x.mean())
    residual = y - (y.mean() + slope * xm)
    dof = max(len(x) - 2, 1)
    se = math.sqrt(float(np.dot(residual, residual)) / dof / sxx)
    if slope <= 0:
        return start, end, 0.0
    return start, end, (math.inf if se == 0 else slope / se)


def ticked(recent: Sequence[TrendSample]) -> bool:
    """The last request ended in a new ``TICK_S`` of measured load: judge now."""
    if len(recent) < 2:
        return False
    return int(recent[-1].end_s / TICK_S) != int(recent[-2].end_s / TICK_S)


def _window(recent: Sequence[TrendSample], window_s: float) -> list[TrendSample]:
    """The requests of the trailing window, walked back from the newest only as far as
    the window reaches (``recent`` holds a minute)."""
    if not recent:
        return []
    start = recent[-1].end_s - window_s
    out = list(itertools.takewhile(lambda s: s.end_s >= start, reversed(recent)))
    out.reverse()
    return out


class Saturated:
    """The ``saturated`` rule: a queue that grows without bound ends the run, failing it."""

    keys = frozenset({"window_s", "rise"})
    fails = True

    def parse(self, table: Table) -> SaturationSettings:
        window = table.number("window_s", DEFAULT.window_s, strict=True)
        rise = table.number("rise", DEFAULT.rise, strict=True)
        assert window is not None
        assert rise is not None
        return SaturationSettings(window, rise)

    def share(self, settings: SaturationSettings, worker: int, workers: int) -> object:
        return settings  # each process's own queue and latencies show the same trend

    def reached(self, settings: SaturationSettings, seen: RunSoFar) -> str | None:
        if seen.elapsed_s < settings.window_s or not ticked(seen.recent):
            return None
        window = _window(seen.recent, settings.window_s)
        timed = [s for s in window if s.ttft_ms is not None]
        if len(timed) < MIN_SAMPLES:
            return None
        t = np.array([s.end_s for s in window])
        q0, q1, q_t = fitted_rise(t, np.array([s.in_flight for s in window], dtype=float))
        if q_t < T_MIN or q1 - q0 < max(MIN_QUEUE, settings.rise * max(q0, 1.0)):
            return None
        tt = np.array([s.end_s for s in timed])
        f0, f1, f_t = fitted_rise(tt, np.array([s.ttft_ms for s in timed], dtype=float))
        if f_t < T_MIN or f1 - f0 < settings.rise * max(f0, 1.0):
            return None
        span = max(float(t.max() - t.min()), 1e-9)
        done = len(window) / span
        behind = (q1 - q0) / span
        return (
            f"saturated: over the last {span:.1f} s in flight rose {q0:.0f} -> {q1:.0f} and "
            f"TTFT from the intended send {f0:,.0f} -> {f1:,.0f} ms (fitted); completions "
            f"{done:.1f}/s behind arrivals ~{done + behind:.1f}/s"
        )


SATURATED = Saturated()
