"""The ``summary.json`` document, built from a run's metrics; pure, no files."""

from __future__ import annotations

import math
import time
from collections.abc import Collection, Mapping, Sequence
from typing import cast

from loadtest.config.arrivals import TRACE_MODE
from loadtest.config.scenario import Scenario
from loadtest.engine.blocks import summary_blocks
from loadtest.measure.hdr import metric_stats
from loadtest.measure.recorders import Metrics, MetricSet, new_histogram
from loadtest.measure.slo import SLOSpec, evaluate, stat_of
from loadtest.model.record import ENGINE_CANCELS, ERROR_CLASSES
from loadtest.model.summary import (
    DecodeStepsBlock,
    MetricStats,
    RequestsBlock,
    RunBlock,
    RunExtra,
    RunHead,
    Summary,
)
from loadtest.model.verdict import DriverHealth, SloBlock
from loadtest.report.run_notes import lag_said
from loadtest.report.table import LATENCY_LABELS

__all__ = [
    "BUSY_MS",
    "CLIENT_LAG_MOVES",
    "DISPATCH_LAG_MOVES",
    "DRIVER_METRICS",
    "LAG_SHARE",
    "SCHEMA_VERSION",
    "build_summary",
    "decode_steps",
    "driver_health",
    "error_rate",
    "judge_run",
    "judged_metrics",
    "metrics_block",
    "resolution_ms",
    "run_head",
    "summary_from_head",
]

SCHEMA_VERSION = 1
BUSY_MS = 5.0
"""The lag bar where a run has none of the figures a lag could move (no token times)."""
LAG_SHARE = 0.1
"""A p99 lag counts once it could have moved a reported p99 by more than this share of
it (or by more than the histogram's resolution there, if that is coarser)."""
DRIVER_METRICS = (
    "client_lag_ms",
    "dispatch_lag_ms",
    "itl_ms",
    "ttft_ms",
    "e2e_ms",
    "ttft_ms_corrected",
    "e2e_ms_corrected",
)
"""The metrics ``driver_health`` reads."""
CLIENT_LAG_MOVES = ("ttft_ms", "itl_ms", "e2e_ms")
"""A late read delays a token's stamp: these figures carry the client lag."""
DISPATCH_LAG_MOVES = ("ttft_ms_corrected", "e2e_ms_corrected")
"""A late send is measured from its intended time: only the corrected figures carry it."""

_CHUNK_FIGURES = ("inter-chunk gap", "tokens per chunk", "tokens per step")
"""What a late read moves where the kernel stamped each arrival: chunks read together."""

_RESOLUTION = new_histogram()


def resolution_ms(value_ms: float) -> float:
    """The width of the HDR bucket that holds ``value_ms`` (3 significant digits), in ms;
    never under 0.001 ms, the rounding of the reported figures."""
    us = max(1, int(value_ms * 1e3))
    high, low = (
        _RESOLUTION.get_highest_equivalent_value(us),
        _RESOLUTION.get_lowest_equivalent_value(us),
    )
    return max(0.001, int(high - low + 1) / 1e3)


def _lag_bar(metrics: Mapping[str, object], moves: Sequence[str]) -> tuple[float, str]:
    """The largest lag that moves none of ``moves``' p99 by more than its resolution or
    ``LAG_SHARE`` of it, and what that bar is, in words."""
    figures = [(v, m) for m in moves if (v := stat_of(metrics, m, "p99")) is not None]
    if not figures:
        return BUSY_MS, f"{BUSY_MS:g} ms (no token times to compare with)"
    value, metric = min(figures)
    bar = max(resolution_ms(value), LAG_SHARE * value)
    return bar, f"{bar:.3g} ms, {LAG_SHARE:.0%} of the {metric} p99 of {value:g} ms"


def driver_health(metrics: Mapping[str, object], kernel_share: float | None = None) -> DriverHealth:
    """Whether loadtest itself kept up, from the ``metrics`` block of a summary.

    A lag counts when it could have moved a reported figure by more than that figure's
    own resolution: when its p99 exceeds ``LAG_SHARE`` of the smallest p99 it moves (or
    the HDR bucket width there, if wider). The client lag moves the token times (TTFT,
    inter-chunk gap, end-to-end); the dispatch lag the corrected ones. A run with none of
    those figures falls back to ``BUSY_MS``.

    ``kernel_share`` is the share of measured requests whose arrivals the kernel
    stamped. A late reader does not move those stamps; it costs a chunk its own stamp
    only when the stream's next chunk arrived before the loop read the first, so there
    the client lag counts only once it also exceeds half the median gap between chunks.
    """
    client = stat_of(metrics, "client_lag_ms", "p99")
    dispatch = stat_of(metrics, "dispatch_lag_ms", "p99")
    client_bar, client_why = _lag_bar(metrics, CLIENT_LAG_MOVES)
    if kernel_share is not None and kernel_share >= 1.0:
        gap = stat_of(metrics, "itl_ms", "p50")
        if gap is None:
            client_bar = math.inf
        elif gap / 2 > client_bar:
            client_bar = gap / 2
            client_why = f"{client_bar:.3g} ms, half the median inter-chunk gap (kernel-stamped)"
    dispatch_bar, dispatch_why = _lag_bar(metrics, DISPATCH_LAG_MOVES)
    why: list[str] = []
    moved: list[str] = []

    def named(moves: Sequence[str]) -> list[str]:
        return [LATENCY_LABELS[m] for m in moves if stat_of(metrics, m, "p99") is not None]

    if client is not None and client > client_bar:
        why.append(f"{lag_said(metrics, 'client_lag_ms', client)} over {client_why}")
        # Kernel stamps keep TTFT, TPOT and end-to-end; a late read merges chunks only.
        stamped = kernel_share is not None and kernel_share >= 1.0
        moved += _CHUNK_FIGURES if stamped else named(CLIENT_LAG_MOVES)
    if dispatch is not None and dispatch > dispatch_bar:
        why.append(f"{lag_said(metrics, 'dispatch_lag_ms', dispatch)} over {dispatch_why}")
        moved += named(DISPATCH_LAG_MOVES)
    busy = bool(why)
    affected = ", ".join(moved) or "the latencies"
    return {
        "client_lag_p99_ms": client,
        "dispatch_lag_p99_ms": dispatch,
        "kernel_stamped_share": None if kernel_share is None else round(kernel_share, 4),
        "busy": busy,
        "advice": (
            f"the driver was busy ({'; '.join(why)}): {affected} may include loadtest's "
            "own delay; run fewer streams per process (--workers N) or give it a free core"
            if busy
            else None
        ),
    }


# Counts, not latencies (they are in ``tokens_per_chunk`` and the ``agent`` section).
_NOT_LATENCY = ("tokens_per_chunk", "tokens_per_step", "task_steps", "task_retries")


def metrics_block(ms: MetricSet, names: Collection[str] | None = None) -> dict[str, MetricStats]:
    """The latency stats of ``ms`` (only ``names`` when given: the dashboard's cheap path)."""
    return {
        name: metric_stats(hist, ms.sums[name])
        for name, hist in ms.hists.items()
        if name not in _NOT_LATENCY and (names is None or name in names)
    }


def _tokens_per_chunk(ms: MetricSet, name: str = "tokens_per_chunk") -> MetricStats:
    return metric_stats(ms.hists[name], ms.sums[name], scale=1e3)


def decode_steps(metrics: Metrics) -> DecodeStepsBlock:
    """Tokens per decode step pooled over the measured text streams (``DecodeStepsBlock``)."""
    steps = metrics.decode_steps
    return {
        "streams": metrics.total.hists["tokens_per_step"].get_total_count(),
        "tokens": metrics.decode_tokens,
        "steps": steps,
        "tokens_per_step": round(metrics.decode_tokens / steps, 4) if steps else None,
    }


def error_rate(metrics: Metrics) -> float:
    """Failed requests over sent ones (0 when none was sent)."""
    sent = metrics.sent
    return round(metrics.outcomes["failed"] / sent, 6) if sent else 0.0


def judged_metrics(spec: SLOSpec) -> set[str]:
    """The histograms ``judge_run`` reads: the driver's lags, what they move, the SLOs'."""
    return {*DRIVER_METRICS, *(t.metric for t in spec.thresholds if t.stat)}


def judge_run(
    metrics: Metrics,
    spec: SLOSpec,
    measured_s: float,
    block: Mapping[str, MetricStats] | None = None,
) -> tuple[DriverHealth, SloBlock]:
    """The driver's health and the SLO checks of a run: the one place both are judged.

    The summary passes its full ``metrics`` block; the dashboard passes none and gets
    the few histograms the two verdicts read (percentiles cost time on the event loop).
    Both read the same histograms the same way, so the dashboard's final frame and
    summary.json agree.
    """
    if block is None:
        block = metrics_block(metrics.total, judged_metrics(spec))
    kernel_share = metrics.kernel_stamped / metrics.measured_ok if metrics.measured_ok else None
    driver = driver_health(block, kernel_share)
    slo = evaluate(spec, block, error_rate(metrics), metrics.sent)
    if metrics.goodput_limits:
        slo["goodput"] = {
            "limits": metrics.goodput_limits,
            "requests": metrics.goodput,
            "per_s": round(metrics.goodput / measured_s, 3) if measured_s > 0 else 0.0,
            "share": round(metrics.goodput / metrics.measured_ok, 4)
            if metrics.measured_ok
            else 0.0,
        }
    return driver, slo


def run_head(
    scenario: Scenario,
    *,
    run_id: str,
    endpoint: str,
    model: str,
    started_wall: float,
    prompts: dict[str, int],
) -> RunHead:
    """The ``run`` block as far as it is known when the load starts: what ``run.json``
    holds and ``summary.json`` begins with."""
    load = scenario.load
    own = load.mode not in ("closed", TRACE_MODE)
    return {
        "id": run_id,
        "scenario": scenario.name,
        "scenario_path": scenario.path,
        "endpoint": endpoint,
        "model": model,
        "api": scenario.api,
        "stream": scenario.stream,
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started_wall)),
        "load": {
            "mode": load.mode,
            "concurrency": load.concurrency,
            "rate": load.rate if load.mode != "closed" else None,
            # A trace or a closed loop replaced the scenario's process: its keys are not
            # what was run.
            "burstiness": _burstiness(load.arrival) if own else None,
            "arrival": dict(load.arrival) if own else {},
            "duration_s": load.duration_s,
            "requests": load.requests,
            "warmup_s": load.warmup_s,
        },
        "prompts": prompts,
        "seed": scenario.seed,
    }


def _burstiness(arrival: tuple[tuple[str, float | int | str | bool], ...]) -> float | None:
    """The ``burstiness`` key of the arrival process, where it has one that is a number."""
    value = dict(arrival).get("burstiness")
    return float(value) if isinstance(value, float | int) and not isinstance(value, bool) else None


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
    extra: RunExtra | None = None,
    blocks: Mapping[str, object] | None = None,
    stale_retries: int | None = None,
) -> Summary:
    """The whole summary document of a run that ended; its schema is
    ``docs/summary.schema.json``. ``blocks``: the run's merged summary blocks
    (``engine.blocks.merge_blocks``)."""
    head = run_head(
        scenario,
        run_id=run_id,
        endpoint=endpoint,
        model=model,
        started_wall=started_wall,
        prompts=prompts,
    )
    return summary_from_head(
        head,
        scenario.slo,
        metrics,
        duration_s=duration_s,
        measured_s=measured_s,
        interrupted=interrupted,
        extra=extra,
        blocks=blocks,
        stale_retries=stale_retries,
    )


def summary_from_head(
    head: RunHead,
    slo_spec: SLOSpec,
    metrics: Metrics,
    *,
    duration_s: float,
    measured_s: float,
    interrupted: bool,
    extra: RunExtra | None = None,
    blocks: Mapping[str, object] | None = None,
    stale_retries: int | None = None,
) -> Summary:
    """The summary from the run's ``head`` and its metrics: the one place a summary is
    built, for a run that ended and for one rebuilt from its files after it died.

    ``blocks`` (merged, by name) go in under their keys, beside the empty value of each
    registered block the run had none of (``engine.blocks.summary_blocks``)."""
    sent = metrics.sent
    tool = metrics.tool_stats
    block = metrics_block(metrics.total)
    driver, slo = judge_run(metrics, slo_spec, measured_s, block)
    # The head and the three figures of its end are the whole block; mypy asks the **
    # item for the block's optional keys too (the extras, added below).
    run = cast(
        RunBlock,
        {
            **head,
            "duration_s": round(duration_s, 3),
            "measured_s": round(measured_s, 3),
            "interrupted": interrupted,
        },
    )
    extra = extra or {}
    if "prompt_load_s" in extra:
        run["prompt_load_s"] = extra["prompt_load_s"]
    if "target_time_to_ready_s" in extra:
        run["target_time_to_ready_s"] = extra["target_time_to_ready_s"]
    if "workers" in extra:
        run["workers"] = extra["workers"]
    if "workers_lost" in extra:
        run["workers_lost"] = extra["workers_lost"]
    if "worker_dispatch_lag" in extra:
        run["worker_dispatch_lag"] = extra["worker_dispatch_lag"]
    if "simulated" in extra:
        run["simulated"] = extra["simulated"]
    requests: RequestsBlock = {
        "sent": sent,
        "ok": metrics.outcomes["ok"],
        "failed": metrics.outcomes["failed"],
        "cancelled": metrics.outcomes["cancelled"],
        "warmup": metrics.warmup_requests,
        "errors": {k: metrics.errors[k] for k in ERROR_CLASSES if metrics.errors[k]},
        "error_rate": error_rate(metrics),
        "tokens_estimated": metrics.estimated_token_requests,
        "measured_ok": metrics.measured_ok,
        "cancelled_by": {k: metrics.errors[k] for k in ENGINE_CANCELS if metrics.errors[k]},
    }
    if stale_retries is not None:
        requests["resent_stale_connection"] = stale_retries
    summary: Summary = {
        "schema": SCHEMA_VERSION,
        "run": run,
        "requests": requests,
        "metrics": block,
        "tokens_per_chunk": _tokens_per_chunk(metrics.total),
        "tokens_per_step": _tokens_per_chunk(metrics.total, "tokens_per_step"),
        "decode_steps": decode_steps(metrics),
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
            cat: {"metrics": metrics_block(ms), "tokens_per_chunk": _tokens_per_chunk(ms)}
            for cat, ms in sorted(metrics.by_category.items())
        },
        "out_of_range_values": metrics.total.out_of_range,
        "driver": driver,
        "slo": slo,
        "server_timings": metrics.server_timings.summary(),
    }
    if (reasoning := metrics.reasoning.summary()) is not None:
        summary["reasoning"] = reasoning
    # A block's key and type are its plugin's (``model.blocks.summary_type``).
    cast(dict[str, object], summary).update(summary_blocks(blocks or {}))
    return summary
