"""The ``summary.json`` document, built from a run's metrics; pure, no files."""

from __future__ import annotations

import time
from typing import Any

from hdrh.histogram import HdrHistogram

from loadtest.config.scenario import Scenario
from loadtest.measure.recorders import Metrics, MetricSet
from loadtest.measure.slo import evaluate
from loadtest.model.record import ERROR_CLASSES

__all__ = [
    "BUSY_MS",
    "PERCENTILES",
    "SCHEMA_VERSION",
    "build_summary",
    "driver_health",
    "metric_stats",
]

SCHEMA_VERSION = 1
PERCENTILES = (("p50", 50.0), ("p90", 90.0), ("p95", 95.0), ("p99", 99.0), ("p999", 99.9))


def metric_stats(hist: HdrHistogram, total_us: float, scale: float = 1e3) -> dict[str, Any]:
    """count/min/mean/p50/p90/p95/p99/p999/max of one histogram, in ms (``scale`` µs)."""
    n = hist.get_total_count()
    if n == 0:
        return {"count": 0}
    out: dict[str, Any] = {
        "count": n,
        "min": round(hist.get_min_value() / scale, 3),
        # The running sum is exact; HdrHistogram's own mean is slow and bucketed.
        "mean": round(total_us / n / scale, 3),
    }
    for key, q in PERCENTILES:
        out[key] = round(hist.get_value_at_percentile(q) / scale, 3)
    out["max"] = round(hist.get_max_value() / scale, 3)
    return out


BUSY_MS = 5.0
"""A p99 dispatch or client lag above this says the driver, not only the endpoint, was
measured: its loop was too busy to send on time or to read what had arrived."""


def driver_health(metrics: dict[str, Any], kernel_share: float | None = None) -> dict[str, Any]:
    """Whether loadtest itself kept up, from the ``metrics`` block of a summary.

    ``kernel_share`` is the share of measured requests whose arrivals the kernel
    stamped. A late reader does not move those stamps; it costs a chunk its own stamp
    only when the stream's next chunk arrived before the loop read the first, so there
    the client lag counts once it also exceeds half the median gap between chunks.
    Elsewhere any client lag over ``BUSY_MS`` is in the token times. A busy loop also
    sends late, which the dispatch lag shows either way.
    """
    client = metrics.get("client_lag_ms", {}).get("p99")
    dispatch = metrics.get("dispatch_lag_ms", {}).get("p99")
    bar: float | None = BUSY_MS
    if kernel_share is not None and kernel_share >= 1.0:
        gap = metrics.get("itl_ms", {}).get("p50")
        bar = None if gap is None else max(BUSY_MS, gap / 2)
    busy = (client is not None and bar is not None and client > bar) or (
        dispatch is not None and dispatch > BUSY_MS
    )
    return {
        "client_lag_p99_ms": client,
        "dispatch_lag_p99_ms": dispatch,
        "kernel_stamped_share": None if kernel_share is None else round(kernel_share, 4),
        "busy": busy,
        "advice": (
            f"the driver was busy (p99 lag over {BUSY_MS:g} ms): latencies include its own "
            "delay; run fewer streams per process (--workers N) or give it a free core"
            if busy
            else None
        ),
    }


# Counts, not latencies (they are in ``tokens_per_chunk`` and the ``agent`` section).
_NOT_LATENCY = ("tokens_per_chunk", "tokens_per_step", "task_steps", "task_retries")


def _metric_block(ms: MetricSet) -> dict[str, Any]:
    out = {}
    for name, hist in ms.hists.items():
        if name in _NOT_LATENCY:
            continue
        out[name] = metric_stats(hist, ms.sums[name])
    return out


def _tokens_per_chunk(ms: MetricSet, name: str = "tokens_per_chunk") -> dict[str, Any]:
    return metric_stats(ms.hists[name], ms.sums[name], scale=1e3)


def build_summary(
    *,
    run_id: str,
    scenario: Scenario,
    endpoint: str,
    model: str,
    metrics: Metrics,
    started_wall: float,
    duration_s: float,
    measured_s: float,
    interrupted: bool,
    prompts: dict[str, int],
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The whole summary document; its schema is documented in the README."""
    load = scenario.load
    ok = metrics.outcomes["ok"]
    sent = metrics.sent
    errors = {k: metrics.errors[k] for k in ERROR_CLASSES if metrics.errors[k]}
    tool = metrics.tool_stats
    summary: dict[str, Any] = {
        "schema": SCHEMA_VERSION,
        "run": {
            "id": run_id,
            "scenario": scenario.name,
            "scenario_path": scenario.path,
            "endpoint": endpoint,
            "model": model,
            "api": scenario.api,
            "stream": scenario.stream,
            "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started_wall)),
            "duration_s": round(duration_s, 3),
            "measured_s": round(measured_s, 3),
            "interrupted": interrupted,
            "load": {
                "mode": load.mode,
                "concurrency": load.concurrency,
                "rate": load.rate if load.mode != "closed" else None,
                "burstiness": load.burstiness if load.mode == "gamma" else None,
                "duration_s": load.duration_s,
                "requests": load.requests,
                "warmup_s": load.warmup_s,
            },
            "prompts": prompts,
            "seed": scenario.seed,
        },
        "requests": {
            "sent": sent,
            "ok": ok,
            "failed": metrics.outcomes["failed"],
            "cancelled": metrics.outcomes["cancelled"],
            "warmup": metrics.warmup_requests,
            "errors": errors,
            "error_rate": round(metrics.outcomes["failed"] / sent, 6) if sent else 0.0,
            "tokens_estimated": metrics.estimated_token_requests,
        },
        "metrics": _metric_block(metrics.total),
        "tokens_per_chunk": _tokens_per_chunk(metrics.total),
        "tokens_per_step": _tokens_per_chunk(metrics.total, "tokens_per_step"),
        "throughput": {
            "requests_per_s": round(metrics.measured_ok / measured_s, 3) if measured_s > 0 else 0.0,
            "output_tokens_per_s": round(metrics.output_tokens / measured_s, 1)
            if measured_s > 0
            else 0.0,
            "output_tokens": metrics.output_tokens,
        },
        "tool_calls": {
            "responses_with_calls": tool["responses_with_calls"],
            "valid": tool["valid"],
            "judged": tool["judged"],
            "correct": tool["correct"],
        },
        "by_category": {
            cat: {"metrics": _metric_block(ms), "tokens_per_chunk": _tokens_per_chunk(ms)}
            for cat, ms in sorted(metrics.by_category.items())
        },
        "out_of_range_values": metrics.total.out_of_range,
    }
    kernel_share = metrics.kernel_stamped / metrics.measured_ok if metrics.measured_ok else None
    summary["driver"] = driver_health(summary["metrics"], kernel_share)
    summary["slo"] = evaluate(scenario.slo, summary)
    if metrics.goodput_limits:
        summary["slo"]["goodput"] = {
            "limits": metrics.goodput_limits,
            "requests": metrics.goodput,
            "per_s": round(metrics.goodput / measured_s, 3) if measured_s > 0 else 0.0,
            "share": round(metrics.goodput / metrics.measured_ok, 4)
            if metrics.measured_ok
            else 0.0,
        }
    if extra:
        summary.update(extra)
    return summary
