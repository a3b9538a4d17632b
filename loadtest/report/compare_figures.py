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

from loadtest.features.faults.kinds.restart import RestartFigures
from loadtest.features.faults.own_figures import top_figures
from loadtest.model.comparison import DeploymentRun, DeploymentSide, SideJson
from loadtest.model.summary import Summary
from loadtest.report.compare_checks import CacheUse

__all__ = [
    "NOT_MANAGED",
    "SIDE_FIELDS",
    "SideFigures",
    "deployment_side",
    "memory_added",
    "side_figures",
    "spread",
]

NOT_MANAGED = "not measured: not a managed deployment"


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

    def to_json(self) -> SideJson:
        """A JSON-ready dict."""
        return {
            "runs": list(self.runs),
            "endpoint": self.endpoint,
            "completion_rate": self.completion_rate,
            "validity_rate": self.validity_rate,
            "output_tokens_per_s": self.output_tokens_per_s,
            "tokens_per_chunk_p50": self.tokens_per_chunk_p50,
            "acceptance_rate_timings": self.acceptance_rate_timings,
            "acceptance_rate_metrics": self.acceptance_rate_metrics,
            "client_overhead_p50_ms": self.client_overhead_p50_ms,
            "target_rss_mib_peak": self.target_rss_mib_peak,
            "gpu_memory_mib_peak": self.gpu_memory_mib_peak,
            "gpu_power_w_peak": self.gpu_power_w_peak,
            "time_to_ready_s": self.time_to_ready_s,
            "restart_first_token_s": self.restart_first_token_s,
            "prompt_cache_share": self.prompt_cache_share,
        }


SIDE_FIELDS = tuple(f.name for f in dataclasses.fields(SideFigures))[2:]
"""The figures set side by side, in order."""


def _mean(values: Sequence[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return round(statistics.fmean(known), 4) if known else None


def _peak(values: Sequence[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return max(known) if known else None


def side_figures(sums: Sequence[Summary], cache: CacheUse) -> SideFigures:
    """The figures of a side from its runs' summaries (read through the model)."""
    sent = sum(s["requests"]["sent"] for s in sums)
    ok = sum(s["requests"]["ok"] for s in sums)
    calls = sum(s["tool_calls"]["responses_with_calls"] for s in sums)
    valid = sum(s["tool_calls"]["valid"] for s in sums)
    timings = [t for s in sums if (t := s.get("server_timings"))]
    server = [v for s in sums if (v := s.get("server"))]
    restarts = [
        top_figures(f, RestartFigures).get("time_to_first_token_s")
        for s in sums
        for f in s.get("faults") or []
        if f["kind"] == "restart"
    ]
    share = cache.share
    return SideFigures(
        runs=tuple(s["run"]["id"] for s in sums),
        endpoint=_endpoints([s["run"]["endpoint"] for s in sums]),
        completion_rate=round(ok / sent, 4) if sent else None,
        validity_rate=round(valid / calls, 4) if calls else None,
        output_tokens_per_s=_mean([s["throughput"]["output_tokens_per_s"] for s in sums]),
        tokens_per_chunk_p50=_mean([s["tokens_per_chunk"].get("p50") for s in sums]),
        acceptance_rate_timings=_mean([t["acceptance_rate"] for t in timings]),
        acceptance_rate_metrics=_mean([v.get("acceptance_rate") for v in server]),
        client_overhead_p50_ms=_mean([t["client_overhead_ms"].get("p50") for t in timings]),
        target_rss_mib_peak=_peak([v.get("target_rss_mib_peak") for v in server]),
        gpu_memory_mib_peak=_peak([v.get("gpu_memory_mib_peak") for v in server]),
        gpu_power_w_peak=_peak([v.get("gpu_power_w_peak") for v in server]),
        time_to_ready_s=_mean([s["run"].get("target_time_to_ready_s") for s in sums]),
        restart_first_token_s=_mean(restarts),
        prompt_cache_share=None if share is None else round(share, 4),
    )


def _median(values: Sequence[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return round(statistics.median(known), 3) if known else None


def deployment_side(
    runs: Sequence[DeploymentRun | None], output_tokens: Sequence[int]
) -> DeploymentSide:
    """A side's deployment cost over its runs; ``NOT_MANAGED`` when no run measured any."""
    measured = [r for r in runs if r is not None]
    if not measured:
        return {
            "deployment": None,
            "note": NOT_MANAGED,
            "starts": 0,
            "ready_s": None,
            "first_token_s": None,
            "rss_steady_mib": None,
            "rss_peak_mib": None,
            "energy_j_per_run": None,
            "energy_j_per_output_token": None,
            "energy": NOT_MANAGED,
        }
    joules = [r["energy_j"] for r in measured]
    known = [j for j in joules if j is not None]
    # Energy only where every run could read it: a mean over some runs would mislead.
    per_run = round(statistics.fmean(known), 3) if len(known) == len(joules) else None
    tokens = sum(t for r, t in zip(runs, output_tokens, strict=True) if r is not None)
    if per_run is not None:
        sources = sorted({r["energy_source"] or "?" for r in measured})
        energy = f"{per_run:.1f} J per run ({', '.join(sources)}; the machine's, not the process's)"
    else:
        # Only the runs that could not read it say why; a run that could has no reason.
        reasons = sorted(
            {r["energy_reason"] or "unknown" for r in measured if r["energy_j"] is None}
        )
        energy = "; ".join(reasons)
        if known:
            energy += f" (read in {len(known)} of {len(joules)} runs: not averaged)"
    return {
        "deployment": measured[0]["deployment"],
        "note": None,
        "starts": len(measured),
        "ready_s": _mean([r["ready_s"] for r in measured]),
        "first_token_s": _mean([r["first_token_s"] for r in measured]),
        "rss_steady_mib": _median([r["rss_steady_mib"] for r in measured]),
        "rss_peak_mib": _peak([r["rss_peak_mib"] for r in measured]),
        "energy_j_per_run": per_run,
        "energy_j_per_output_token": (
            round(sum(known) / tokens, 5) if per_run is not None and tokens else None
        ),
        "energy": energy,
    }


def memory_added(a: DeploymentSide, b: DeploymentSide) -> float | None:
    """B's steady RSS over A's, minus 1: the share of memory a draft model adds."""
    ra, rb = a["rss_steady_mib"], b["rss_steady_mib"]
    return round(rb / ra - 1, 4) if ra and rb is not None else None


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


def _endpoints(given: Sequence[str]) -> str:
    """The side's endpoint, or, for a side started anew for each run (a managed one, the
    built-in simulator), how many there were: the first run's alone was named as if the
    others had used it too."""
    ends = list(dict.fromkeys(given))
    if len(ends) == 1:
        return ends[0]
    return f"a server started for each run: {', '.join(ends[:2])}{', ...' * (len(ends) > 2)}"
