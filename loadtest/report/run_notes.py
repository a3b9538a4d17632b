"""Notes a run's figures need beside them, read off its summary: why a corrected figure
counts more values than its raw one."""

from __future__ import annotations

from collections.abc import Collection, Mapping

from loadtest.measure.slo import stat_of, values_to_judge
from loadtest.model.summary import MetricStats

__all__ = ["corrected_counts_note", "lag_said"]


def corrected_counts_note(
    metrics: Mapping[str, MetricStats], shown: Collection[str] | None = None
) -> str | None:
    """Why a corrected figure counts more values than its raw one, where one does.

    In closed loop the correction is HdrHistogram's: a request slower than the expected
    interval between a session's sends also records the sends it held back, so
    ``tool_call_ms_corrected`` counted 90 beside ``tool_call_ms``'s 89, unexplained.
    ``shown``: the metrics the table beside it prints; no other is named (the note said
    ``ttfa_ms adds none`` under a table without a TTFA row)."""
    if shown is not None:
        metrics = {m: stats for m, stats in metrics.items() if m in shown}
    more = [
        (m, raw["count"], fixed["count"])
        for m, raw in metrics.items()
        if (fixed := metrics.get(f"{m}_corrected")) is not None and fixed["count"] > raw["count"]
    ]
    if not more:
        return None
    name, raw_n, fixed_n = max(more, key=lambda x: x[2] - x[1])
    # The ones beside it that add nothing, said too: "TTFT (corrected) 197" beside
    # "end-to-end (corrected) 368" read as one correction applied and the other not.
    same = [
        m
        for m, raw in metrics.items()
        if (fixed := metrics.get(f"{m}_corrected")) is not None
        and raw["count"]
        and fixed["count"] == raw["count"]
    ]
    none = (
        f"; {', '.join(same)} add{'s' * (len(same) == 1)} none, no value of "
        f"{'its' if len(same) == 1 else 'theirs'} being longer than a session's interval"
        if same
        else ""
    )
    return (
        f"(a corrected figure counts more values than its raw one, {fixed_n} against "
        f"{raw_n} for {name}: in closed loop the correction adds a value for each send a "
        f"slow request held back, HdrHistogram's coordinated-omission correction{none})"
    )


def lag_said(metrics: Mapping[str, object], metric: str, p99: float) -> str:
    """``client lag p99 12.08 ms``, as the table prints it (two decimals); of fewer values
    than a p99 needs, what it is, their largest: "p99 12.175 ms" was said of 20 values,
    beside a table that prints 12.18 and a rule that a p99 needs 100."""
    name = metric.removesuffix("_ms").replace("_", " ")
    count = stat_of(metrics, metric, "count")
    if count is not None and count < values_to_judge(f"{metric}.p99", 0.0):
        return f"{name} max {p99:.2f} ms (its largest of {count:.0f} values: too few for a p99)"
    return f"{name} p99 {p99:.2f} ms"
