"""Capacity sweeps: one run per load step, then the capacity table and where it bends.

``loadtest sweep`` runs the steps in order, each a whole ``loadtest run`` (warm-up
included) into ``OUT/<sweep-id>/step-NN-<load>/`` (the run's files directly there),
and writes ``capacity.csv`` and ``capacity.json`` beside them; it prints one line as
each step starts and the capacity table at the end (not every step's summary: each is
in its folder). From the table it names:

- the **highest load that met every SLO** (and every step below it met them too: a
  capacity that fails at a lower load is not a capacity);
- the **knee**: the last load before median end-to-end latency climbed past
  ``(1 + knee_tolerance)`` times its lowest value, i.e. where queueing starts to
  dominate. When no step climbed past it there is no knee within the range (the top
  step is not one). ``capacity_rows``, ``find_knee`` and ``best_load`` are pure.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import textwrap
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Literal

import orjson

from loadtest.config.dimensions import parse_values
from loadtest.measure.slo import requests_to_judge, stat_of, values_to_judge
from loadtest.model.atomic import write_atomic
from loadtest.model.summary import ServerBlock, StatKey, Summary
from loadtest.model.sweep import CapacityResult, StepSlo, SweepStep, best_load_text, knee_text
from loadtest.report.evidence import run_evidence

__all__ = [
    "SweepPlan",
    "best_load",
    "capacity_rows",
    "find_knee",
    "knee_in_range",
    "parse_steps",
    "render_capacity",
    "run_sweep",
    "step_slo",
    "unsustained",
]


@dataclasses.dataclass(frozen=True, slots=True)
class SweepPlan:
    """The steps of a sweep: closed-loop concurrencies or open-loop rates, in order."""

    kind: str
    """``concurrency`` or ``rate``."""
    steps: tuple[float, ...]
    knee_tolerance: float = 0.5


def parse_steps(text: str, kind: str) -> tuple[float, ...]:
    """``1,2,4,8`` into increasing numbers; ``UsageError`` naming the flag and the bad item."""
    flag = "--concurrency" if kind == "concurrency" else "--rates"
    return parse_values(text, f"{flag} {text}", whole=kind == "concurrency")


def capacity_rows(loads: Sequence[float], summaries: Sequence[Summary]) -> list[SweepStep]:
    """One flat row per step: load, throughput, goodput, error rate, percentiles."""
    rows = []
    for load, s in zip(loads, summaries, strict=True):
        slo = s["slo"]
        good = slo.get("goodput")
        server: ServerBlock = s.get("server") or {"samples": 0, "scraped": 0}

        def p(metric: str, pct: StatKey, s: Summary = s) -> float | None:
            stats = s["metrics"].get(metric)
            return None if stats is None else stats.get(pct)

        verdict, need = step_slo(s)
        ok = s["requests"].get("measured_ok", s["requests"]["ok"])
        window = s["run"]["load"].get("duration_s") or s["run"]["measured_s"]

        def per_s(n: float, window: float = window) -> float:
            return round(n / window, 3) if window > 0 else 0.0

        row = SweepStep(
            load=load,
            requests=s["requests"]["sent"] - s["requests"]["warmup"],
            requests_per_s=per_s(ok),
            warmup_requests=s["requests"]["warmup"],
            output_tokens_per_s=round(per_s(s["throughput"]["output_tokens"]), 1),
            goodput_per_s=per_s(good["requests"]) if good else None,
            error_rate=s["requests"]["error_rate"],
            slo_met=verdict == "met",
            slo=verdict,
            measured_ok=ok,
            requests_to_judge=need,
            run_id=s["run"]["id"],
            ttft_ms_p50=p("ttft_ms", "p50"),
            ttft_ms_p95=p("ttft_ms", "p95"),
            ttft_ms_p99=p("ttft_ms", "p99"),
            tpot_ms_p50=p("tpot_ms", "p50"),
            tpot_ms_p95=p("tpot_ms", "p95"),
            tpot_ms_p99=p("tpot_ms", "p99"),
            itl_ms_p50=p("itl_ms", "p50"),
            itl_ms_p95=p("itl_ms", "p95"),
            itl_ms_p99=p("itl_ms", "p99"),
            e2e_ms_p50=p("e2e_ms", "p50"),
            e2e_ms_p95=p("e2e_ms", "p95"),
            e2e_ms_p99=p("e2e_ms", "p99"),
            tool_call_ms_p50=p("tool_call_ms", "p50"),
            tool_call_ms_p95=p("tool_call_ms", "p95"),
            tool_call_ms_p99=p("tool_call_ms", "p99"),
            waiting_peak=server.get("waiting_peak"),
            preemptions=server.get("preemptions"),
        )
        why = unsustained(s)
        if why:
            row["not_sustained"] = why
        rows.append(row)
    return rows


def step_slo(s: Summary) -> tuple[StepSlo, int]:
    """Whether a step met its SLOs, with the requests it needed to tell.

    A step that measured nothing (or mostly drained) meets nothing; one with fewer
    measured ok requests than its SLOs need (``requests_to_judge``) cannot tell, met
    or not: a p99 of 6 requests is their slowest, and rate 8 of 3 s was "met"."""
    checks = s["slo"]["checks"]
    need = requests_to_judge(checks)
    if not checks:
        return "none", need
    if run_evidence(s).blocking:
        return "missed", need
    if unsustained(s):
        return "not sustained", need
    told = any(c.get("verdict") == "inconclusive" for c in checks)  # a check's own rule
    if told or s["requests"].get("measured_ok", s["requests"]["ok"]) < need:
        return "too few", need
    return ("met" if s["slo"]["met"] else "missed"), need


def unsustained(s: Summary) -> str | None:
    """Why an open-loop step did not send the rate it offered, or None.

    Its sends wait when an in-flight cap (``concurrency``) is full or the driver falls
    behind: a request that leaves later than the next one was due is one arrival behind.
    When half of them are (dispatch lag p50 over the mean interval), the step ran a
    lighter load than its rate, and its raw latencies, measured from the late sends,
    do not describe the rate (rate 32 under a cap of 32: 5.8 req/s sent, TTFT p95 64 ms
    raw, 9.4 s from the intended times)."""
    load = s["run"]["load"]
    rate = load.get("rate")
    stats = s["metrics"].get("dispatch_lag_ms")
    lag = None if stats is None else stats.get("p50")
    if load["mode"] == "closed" or not rate or lag is None or lag <= 1000 / rate:
        return None
    cap = load.get("concurrency")
    held = f"an in-flight cap of {cap} or " if cap else ""
    late = f"{lag / 1000:.1f} s" if lag >= 1000 else f"{lag:.0f} ms"
    # The table has no corrected column: the figure from the intended sends is given
    # here (it said "see TTFT corrected", which no table showed).
    raw = stat_of(s["metrics"], "ttft_ms", "p95")
    corrected = stat_of(s["metrics"], "ttft_ms_corrected", "p95")
    both = (
        f" (TTFT p95 {raw:.1f} ms raw, {corrected:.1f} ms from the intended sends)"
        if raw and corrected  # a p95 of 0.0 or none: nothing measured
        else ""
    )
    return (
        f"half its requests left {late} or more late (dispatch lag p50, over the "
        f"{1000 / rate:.0f} ms between arrivals), held back by {held}the endpoint; its "
        f"raw latencies are of a lighter load{both}"
    )


def find_knee(rows: Sequence[SweepStep], tolerance: float = 0.5) -> float | None:
    """The last load whose median e2e stayed within (1 + tolerance) x its lowest, up to
    the first that did not: the knee when ``knee_in_range`` says a step climbed past."""
    lat = [(r["load"], r["e2e_ms_p50"]) for r in rows]
    known = [v for _, v in lat if v is not None]
    if len(known) < 2:
        return None
    floor = min(known)
    knee = None
    for load, v in lat:
        if v is None or v > floor * (1 + tolerance):
            break
        knee = load
    return knee


def knee_in_range(rows: Sequence[SweepStep], tolerance: float = 0.5) -> bool:
    """Whether some step's median e2e climbed past (1 + tolerance) x its lowest: without
    one, the steps never reached the knee, and the top step is not it."""
    known = [r["e2e_ms_p50"] for r in rows if r["e2e_ms_p50"] is not None]
    if len(known) < 2:
        return False
    floor = min(known)
    return any(r["e2e_ms_p50"] is None or r["e2e_ms_p50"] > floor * (1 + tolerance) for r in rows)


def best_load(rows: Sequence[SweepStep]) -> float | None:
    """The highest load whose step, and every step below it, met every SLO."""
    best = None
    for r in rows:
        if not r["slo_met"]:
            break
        best = r["load"]
    return best


_TAIL_NEEDS: dict[Literal["ttft_ms_p95", "e2e_ms_p99"], int] = {
    "ttft_ms_p95": values_to_judge("ttft_ms.p95", 0),
    "e2e_ms_p99": values_to_judge("e2e_ms.p99", 0),
}
"""The fewest values each printed tail figure can be told on (``values_to_judge``)."""

_SLO_WORD: dict[StepSlo, str] = {
    "met": "met",
    "missed": "MISSED",
    "too few": "too few",
    "not sustained": "NOT SUSTAINED",
    "none": "-",
}


def render_capacity(result: CapacityResult) -> str:
    """The capacity table as printed at the end of a sweep."""
    kind = result["kind"]
    cols: tuple[str, ...] = ("req/s", "tok/s", "good/s", "TTFT p95", "e2e p50", "e2e p99")
    # The server's preemptions, where it counts them (vLLM): where the KV cache filled.
    preempts = any(r.get("preemptions") is not None for r in result["steps"])
    cols += ("preempt",) if preempts else ()
    head = f"{kind:>12}" + "".join(f"{c:>10}" for c in cols) + "  SLO"
    lines = [head, "-" * len(head)]

    def f(v: float | None) -> str:
        return f"{v:>10.1f}" if isinstance(v, int | float) else f"{'-':>10}"

    few = False
    for r in result["steps"]:
        count = r.get("preemptions")
        extra = "" if not preempts else f"{'-' if count is None else count:>10}"
        said = r.get("slo", "met" if r["slo_met"] else "missed")  # older tables: a bool
        # A tail of fewer values than it needs is their slowest, not a p95 or a p99.
        ok = r.get("measured_ok", r.get("requests"))
        short = {k: ok is not None and ok < need for k, need in _TAIL_NEEDS.items()}
        p95, p99 = (
            f"{'n<' + str(_TAIL_NEEDS[k]):>10}" if short[k] else f(r[k])
            for k in ("ttft_ms_p95", "e2e_ms_p99")
        )
        few |= any(short.values())
        lines.append(
            f"{r['load']:>12g}{f(r['requests_per_s'])}{f(r['output_tokens_per_s'])}"
            f"{f(r['goodput_per_s'])}{p95}{f(r['e2e_ms_p50'])}"
            f"{p99}{extra}  {_SLO_WORD[said]}"
        )
    if few:
        lines += textwrap.wrap(
            "n<N: the step measured fewer ok requests than the percentile needs (a p95 "
            "20, a p99 100): its figure would be their slowest; capacity.json keeps it",
            80,
        )
    # A step's own summary divides by its whole measured time, the drain in it.
    lines.append("req/s, tok/s, good/s: over each step's arrival window")
    lines += textwrap.wrap(best_load_text(result), 80, subsequent_indent="  ")
    tolerance = result["knee_tolerance"]
    lines.append(f"knee (median e2e within {tolerance:.0%} of its lowest): {knee_text(result)}")
    return "\n".join(lines)


def write_capacity(folder: Path, result: CapacityResult) -> None:
    """``capacity.json`` (everything) and ``capacity.csv`` (the table), atomically."""
    write_atomic(folder / "capacity.json", orjson.dumps(result, option=orjson.OPT_INDENT_2))
    text = io.StringIO(newline="")
    rows = result["steps"]
    # Every row's keys, in order: a row may hold one the first lacks (not_sustained).
    names = list(dict.fromkeys(k for r in rows for k in r)) or ["load"]
    w = csv.DictWriter(text, fieldnames=names)
    w.writeheader()
    w.writerows(rows)
    write_atomic(folder / "capacity.csv", text.getvalue())


def run_sweep(
    plan: SweepPlan,
    out: Path,
    name: str,
    run_step: Callable[[float, Path], tuple[Summary, bool]],
    say: Callable[[str], None] = print,
) -> tuple[CapacityResult, Path, bool]:
    """Run every step through ``run_step(load, out_dir)``; returns (result, folder, stopped).

    ``say`` gets one line as each step starts (``step 2/4: concurrency 4``).

    A step stopped by Ctrl-C ends the sweep; the steps done so far are still written.
    """
    folder = out / (time.strftime("%Y%m%d-%H%M%S", time.localtime()) + f"-sweep-{name}")
    folder.mkdir(parents=True, exist_ok=True)
    loads: list[float] = []
    summaries: list[Summary] = []
    stopped = False
    for i, load in enumerate(plan.steps):
        say(f"step {i + 1}/{len(plan.steps)}: {plan.kind} {load:g}")
        summary, interrupted = run_step(load, folder / f"step-{i:02d}-{load:g}")
        loads.append(load)
        summaries.append(summary)
        if interrupted:
            stopped = True
            break
    rows = capacity_rows(loads, summaries)
    flat_to = find_knee(rows, plan.knee_tolerance)
    result: CapacityResult = {
        "kind": plan.kind,
        "steps": rows,
        "best_load": best_load(rows),
        "knee": flat_to if knee_in_range(rows, plan.knee_tolerance) else None,
        "knee_tolerance": plan.knee_tolerance,
        "flat_to": flat_to,
        "interrupted": stopped,
    }
    write_capacity(folder, result)
    return result, folder, stopped
