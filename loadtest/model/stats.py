"""The statistics every block of a summary is made of: one histogram's figures."""

from __future__ import annotations

from typing import Literal, NotRequired, TypedDict

__all__ = ["MetricStats", "Outcome", "Percentiles", "StatKey"]

Outcome = Literal["ok", "failed", "cancelled"]
StatKey = Literal["count", "min", "mean", "p50", "p90", "p95", "p99", "p999", "max"]
"""The keys of ``MetricStats``."""


class MetricStats(TypedDict):
    """count/min/mean/p50/p90/p95/p99/p999/max of one histogram (only count when empty)."""

    count: int
    min: NotRequired[float]
    mean: NotRequired[float]
    p50: NotRequired[float]
    p90: NotRequired[float]
    p95: NotRequired[float]
    p99: NotRequired[float]
    p999: NotRequired[float]
    max: NotRequired[float]


class Percentiles(TypedDict, total=False):
    """Some of p50/p95/p99, in ms."""

    p50: float
    p95: float
    p99: float
