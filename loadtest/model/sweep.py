"""The capacity sweep's result (``capacity.json``): one flat row per load step.

Flat rows, because the same rows are the columns of ``capacity.csv``; ``step_stat``
reads a ``<metric>_<pct>`` column by name for the plots.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal, TypedDict

__all__ = ["SWEEP_METRICS", "SWEEP_PCTS", "CapacityResult", "SweepStep", "step_stat"]

SWEEP_METRICS = ("ttft_ms", "tpot_ms", "itl_ms", "e2e_ms", "tool_call_ms")
SWEEP_PCTS: tuple[Literal["p50", "p95", "p99"], ...] = ("p50", "p95", "p99")


class SweepStep(TypedDict):
    """One step of a sweep: its load, throughput, goodput, errors and percentiles (ms)."""

    load: float
    requests: int
    requests_per_s: float
    output_tokens_per_s: float
    goodput_per_s: float | None
    error_rate: float
    slo_met: bool
    run_id: str
    ttft_ms_p50: float | None
    ttft_ms_p95: float | None
    ttft_ms_p99: float | None
    tpot_ms_p50: float | None
    tpot_ms_p95: float | None
    tpot_ms_p99: float | None
    itl_ms_p50: float | None
    itl_ms_p95: float | None
    itl_ms_p99: float | None
    e2e_ms_p50: float | None
    e2e_ms_p95: float | None
    e2e_ms_p99: float | None
    tool_call_ms_p50: float | None
    tool_call_ms_p95: float | None
    tool_call_ms_p99: float | None


class CapacityResult(TypedDict):
    """``capacity.json``: the steps, the highest load meeting the SLOs and the knee."""

    kind: str
    """``concurrency`` or ``rate``."""
    steps: list[SweepStep]
    best_load: float | None
    knee: float | None
    knee_tolerance: float
    interrupted: bool


def step_stat(step: SweepStep, metric: str, pct: str) -> float | None:
    """The ``<metric>_<pct>`` column of a step (None: not measured, or no such column)."""
    row: Mapping[str, object] = step
    v = row.get(f"{metric}_{pct}")
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else None
