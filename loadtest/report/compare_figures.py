"""Run-level figures of a comparison's sides, and the run-to-run spread of a side.

Completion, validity, tokens per chunk, acceptance, memory, power, cold start: one number
per side, read from the runs' summaries (pooled or averaged), set beside the other
side's. With several runs on a side, each run's p50/p95 per metric and their standard
deviation show how far a single run can be trusted.
"""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from loadtest.model.json import JsonObject
from loadtest.report.compare_checks import CacheUse

__all__ = ["SIDE_FIELDS", "SideFigures", "side_figures", "spread"]


@dataclass(frozen=True, slots=True)
class SideFigures:
    """One side's run-level figures (None: no run of the side reported it)."""

    runs: tuple[str, ...]
    endpoint: str
    completion_rate: float | None
    validity_rate: float | None
    output_tokens_per_s: float | None
    tokens_per_chunk_p50: float | None
    acceptance_rate_timings: float | None
    acceptance_rate_metrics: float | None
    client_overhead_p50_ms: float | None
    target_rss_mib_peak: float | None
    gpu_memory_mib_peak: float | None
    gpu_power_w_peak: float | None
    time_to_ready_s: float | None
    restart_first_token_s: float | None
    prompt_cache_share: float | None
    """Share of prompt tokens the engine served from its cache (llama.cpp timings)."""

    def to_json(self) -> JsonObject:
        """A JSON-ready dict."""
        return {**dataclasses.asdict(self), "runs": list(self.runs)}


SIDE_FIELDS = tuple(f.name for f in dataclasses.fields(SideFigures))[2:]
"""The figures set side by side, in order."""


def _mean(values: Sequence[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return round(statistics.fmean(known), 4) if known else None


def _peak(values: Sequence[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return max(known) if known else None


def side_figures(sums: Sequence[JsonObject], cache: CacheUse) -> SideFigures:
    """The figures of a side from its runs' summary.json (read as JSON, as written)."""
    sent = sum(s["requests"]["sent"] for s in sums)
    ok = sum(s["requests"]["ok"] for s in sums)
    calls = sum(s.get("tool_calls", {}).get("responses_with_calls", 0) for s in sums)
    valid = sum(s.get("tool_calls", {}).get("valid", 0) for s in sums)
    timings = [s.get("server_timings") or {} for s in sums]
    server = [s.get("server") or {} for s in sums]
    restarts = [
        f.get("time_to_first_token_s")
        for s in sums
        for f in s.get("faults") or []
        if f.get("kind") == "restart"
    ]
    share = cache.share
    return SideFigures(
        runs=tuple(s["run"]["id"] for s in sums),
        endpoint=sums[0]["run"]["endpoint"],
        completion_rate=round(ok / sent, 4) if sent else None,
        validity_rate=round(valid / calls, 4) if calls else None,
        output_tokens_per_s=_mean([s["throughput"]["output_tokens_per_s"] for s in sums]),
        tokens_per_chunk_p50=_mean([s.get("tokens_per_chunk", {}).get("p50") for s in sums]),
        acceptance_rate_timings=_mean([t.get("acceptance_rate") for t in timings]),
        acceptance_rate_metrics=_mean([v.get("acceptance_rate") for v in server]),
        client_overhead_p50_ms=_mean(
            [(t.get("client_overhead_ms") or {}).get("p50") for t in timings]
        ),
        target_rss_mib_peak=_peak([v.get("target_rss_mib_peak") for v in server]),
        gpu_memory_mib_peak=_peak([v.get("gpu_memory_mib_peak") for v in server]),
        gpu_power_w_peak=_peak([v.get("gpu_power_w_peak") for v in server]),
        time_to_ready_s=_mean([s["run"].get("target_time_to_ready_s") for s in sums]),
        restart_first_token_s=_mean(restarts),
        prompt_cache_share=None if share is None else round(share, 4),
    )


@dataclass(frozen=True, slots=True)
class Spread:
    """One percentile of one metric, per run of a side, and its standard deviation."""

    runs: tuple[float, ...]
    stdev: float


def spread(
    samples: Sequence[dict[str, np.ndarray]], metrics: Sequence[str]
) -> dict[str, dict[str, Spread]]:
    """Per metric with values in two or more runs: p50 and p95 per run, and their stdev."""
    out: dict[str, dict[str, Spread]] = {}
    for m in metrics:
        per_run = {
            p: tuple(round(float(np.percentile(r[m], q)), 3) for r in samples if r[m].size)
            for p, q in (("p50", 50), ("p95", 95))
        }
        if len(per_run["p50"]) > 1:
            out[m] = {p: Spread(v, round(statistics.stdev(v), 3)) for p, v in per_run.items()}
    return out
