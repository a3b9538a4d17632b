"""The capacity sweep's result (``capacity.json``): one flat row per load step.

Flat rows, because the same rows are the columns of ``capacity.csv``; ``step_stat``
reads a ``<metric>_<pct>`` column by name for the plots.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal, NotRequired, TypedDict

__all__ = [
    "SWEEP_METRICS",
    "SWEEP_PCTS",
    "CapacityResult",
    "StepSlo",
    "SweepStep",
    "best_load_text",
    "knee_text",
    "step_stat",
]

SWEEP_METRICS = ("ttft_ms", "tpot_ms", "itl_ms", "e2e_ms", "tool_call_ms")
SWEEP_PCTS: tuple[Literal["p50", "p95", "p99"], ...] = ("p50", "p95", "p99")


StepSlo = Literal["met", "missed", "too few", "not sustained", "none"]
"""A step's SLOs: all met, one missed, too few requests to tell (``requests_to_judge``),
the offered rate not sustained (its figures are of a lighter load), or none given."""


class SweepStep(TypedDict):
    """One step of a sweep: its load, throughput, goodput, errors and percentiles (ms)."""

    load: float
    requests: int
    """Measured requests (sent after the warm-up)."""
    requests_per_s: float
    """Measured ok requests over the arrival window (the measured duration of a
    duration-bound step): over the whole measured time, the drain in it, a rate of 2
    read 1.2 req/s."""
    warmup_requests: NotRequired[int]
    """Requests of the step's warm-up, not measured (absent from older tables)."""
    output_tokens_per_s: float
    goodput_per_s: float | None
    error_rate: float
    slo_met: bool
    """``slo`` is ``met``: only such a step counts toward ``best_load``."""
    slo: NotRequired[StepSlo]
    measured_ok: NotRequired[int]
    requests_to_judge: NotRequired[int]
    """The fewest measured ok requests that tell the SLOs (a p99 needs 100)."""
    not_sustained: NotRequired[str]
    """Why an open-loop step's offered rate was not what it sent (``unsustained``)."""
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
    waiting_peak: NotRequired[float | None]
    """The server's most requests waiting, where its ``/metrics`` were scraped."""
    preemptions: NotRequired[int | None]
    """Running requests the server preempted for KV room (vLLM's counter), likewise:
    from the step where it starts, the load is past what the KV cache holds."""


class CapacityResult(TypedDict):
    """``capacity.json``: the steps, the highest load meeting the SLOs and the knee."""

    kind: str
    """``concurrency`` or ``rate``."""
    steps: list[SweepStep]
    best_load: float | None
    knee: float | None
    """None when median e2e never climbed past the tolerance: no knee within the range."""
    knee_tolerance: float
    flat_to: NotRequired[float | None]
    """The highest load whose median e2e stayed within the tolerance of its lowest."""
    interrupted: bool


def step_stat(step: SweepStep, metric: str, pct: str) -> float | None:
    """The ``<metric>_<pct>`` column of a step (None: not measured, or no such column)."""
    row: Mapping[str, object] = step
    v = row.get(f"{metric}_{pct}")
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else None


def knee_text(result: CapacityResult) -> str:
    """The knee as said: the load, or that none occurred within the steps run."""
    knee = result["knee"]
    if knee is not None:
        return f"{knee:g}"
    flat = result.get("flat_to")
    if flat is None:
        return "none (too few steps with a median e2e)"
    return f"no knee within the range (flat up to {flat:g})"


def best_load_text(result: CapacityResult) -> str:
    """``highest rate meeting the SLOs: 4``, or why no load can be named: no SLOs
    given, or the step after the last that met them too small to tell; and every step
    not sustained that the sentence does not explain, named (each stood in the table as
    NOT SUSTAINED with no word)."""
    kind, rows = result["kind"], result["steps"]
    said = [r.get("slo") for r in rows]
    if said and all(v == "none" for v in said):
        return f"highest {kind} meeting the SLOs: no SLOs given (--slo METRIC.STAT=LIMIT)"
    after = next((r for r in rows if not r["slo_met"]), None)
    text = _best_said(result, after)
    explained = after if after is not None and after.get("slo") == "not sustained" else None
    also = [r["load"] for r in rows if r.get("slo") == "not sustained" and r is not explained]
    if also:
        loads = " and ".join(f"{v:g}" for v in also)
        text += f"; {kind} {loads} not sustained{' either' if explained else ''}: " + (
            "its figures are of a lighter load"
            if len(also) == 1
            else "their figures are of a lighter load"
        )
    return text


def _best_said(result: CapacityResult, after: SweepStep | None) -> str:
    kind, best = result["kind"], result["best_load"]
    if after is not None and after.get("slo") == "not sustained":
        named = "none" if best is None else f"{best:g}"
        why = f"{kind} {after['load']:g} was not sustained: {after.get('not_sustained', '')}"
        return f"highest {kind} meeting the SLOs: {named} ({why})"
    if after is None or after.get("slo") != "too few":
        return f"highest {kind} meeting the SLOs: {'none' if best is None else f'{best:g}'}"
    short = (
        f"{kind} {after['load']:g}: {after.get('measured_ok', 0)} measured requests, the SLOs "
        f"need {after.get('requests_to_judge', 0)}; a longer --duration"
    )
    if best is None:
        return f"highest {kind} meeting the SLOs: cannot tell ({short})"
    return f"highest {kind} meeting the SLOs: {best:g}, and cannot tell above ({short})"
