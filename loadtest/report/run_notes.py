"""Notes a run's figures need beside them, read off its summary: why a corrected figure
counts more values than its raw one."""

from __future__ import annotations

from collections.abc import Mapping

from loadtest.model.summary import MetricStats

__all__ = ["corrected_counts_note"]


def corrected_counts_note(metrics: Mapping[str, MetricStats]) -> str | None:
    """Why a corrected figure counts more values than its raw one, where one does.

    In closed loop the correction is HdrHistogram's: a request slower than the expected
    interval between a session's sends also records the sends it held back, so
    ``tool_call_ms_corrected`` counted 90 beside ``tool_call_ms``'s 89, unexplained."""
    more = [
        (m, raw["count"], fixed["count"])
        for m, raw in metrics.items()
        if (fixed := metrics.get(f"{m}_corrected")) is not None and fixed["count"] > raw["count"]
    ]
    if not more:
        return None
    name, raw_n, fixed_n = max(more, key=lambda x: x[2] - x[1])
    return (
        f"(a corrected figure counts more values than its raw one, {fixed_n} against "
        f"{raw_n} for {name}: in closed loop the correction adds a value for each send a "
        "slow request held back, HdrHistogram's coordinated-omission correction)"
    )
