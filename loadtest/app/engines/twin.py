"""``loadtest sim --fit RUN ...``: a simulator profile fitted to runs against a real engine.

Best fed the steps of a sweep (several loads, the same prompts). From the measured,
successful requests of each run it fits the simulator's own model
(``sim/load.py``, ``sim/model.py``):

- TTFT against prompt tokens, on the least loaded runs: ``ttft_ms`` (the intercept),
  ``ttft_per_1k_tokens_ms`` (the slope) and ``ttft_sigma`` (the log spread around it);
  where the engine timed its prefills (llama.cpp's ``prompt_ms``), the line is that of
  the prefills that overlapped no other, plus what a calm request waited beyond it;
- step time against batch: each run's median gap (its median TPOT where the run has
  no gap percentiles) against its batch ``B`` (the requests in flight by Little's law,
  capped at the engine's slots), as ``itl_ms * (1 + step_token_share * (B - 1))``,
  least squares: a median gap is one step, which a prefill held now and then does not
  move, where a TPOT is;
- TPOT's spread: split into the engine's pace (``pace_sigma``, shared by a request's
  gaps and by the streams running with it, for about a request's time,
  ``pace_period_ms``) and gap to gap (``itl_sigma``), from the calmest runs' gap
  percentiles and TPOTs;
- llama.cpp's prefill (``prefill_stall``): how much of another prompt's prefill a
  decoding stream waits out, read off its chunk stamps where the runs recorded them
  (``--record-chunks``; ``twin_prefill``);
- the engine's slots (``max_running``): the running peak of a run that had requests
  waiting, from the server's own metrics; queueing beyond them is what the twin's
  TTFT then reproduces;
- batching: the twin steps its streams together (``lockstep``), as every engine does:
  streams that start together end together, and free their slots together;
- output lengths: the share of ``max_tokens`` below which 5% of answers stop;
- acceptance: a per-token acceptance that gives the engine's acceptance rate.

What cannot be fitted from what the runs hold is said in the notes at the top of the
profile, and the range of load and prompt lengths it saw is recorded, so the twin can
warn when it is used beyond them.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from pathlib import Path

import numpy as np

from loadtest.app.engines.twin_prefill import prefill_line, stall_share
from loadtest.app.engines.twin_runs import RunPoint, run_folders, run_point
from loadtest.model.atomic import write_atomic
from loadtest.sim.profile import FittedRange, Settings, profile_text

__all__ = ["fit_profile", "fit_runs"]

_ENOUGH = 20
"""Requests the TTFT line is fitted on, at the least (from the calmest runs up)."""
_MAX_SIGMA = 0.5
"""The widest gap spread a fit writes: a wider one in per-request TPOT is load or noise
shared by a request's gaps, which independent draws per gap cannot reproduce."""
_Z90 = 1.2816
"""The 90th percentile of a standard normal: a log-normal's p90/p50 is exp(1.2816 sigma)."""
_SPREAD_TOKENS = 100
"""Prompt lengths must span this many tokens for the TTFT line to have a slope."""


def _line(x: list[float], y: list[float]) -> tuple[float, float]:
    """Intercept and slope of a least-squares line (slope 0 where x does not vary)."""
    if len(set(x)) < 2:
        return statistics.median(y), 0.0
    slope, intercept = np.polyfit(np.asarray(x), np.asarray(y), 1)
    return float(intercept), float(slope)


def _per_token_acceptance(rate: float, k: int) -> float:
    """The per-token acceptance ``p`` whose ``(p + ... + p^k) / k`` is ``rate``."""
    lo, hi = 0.0, 1.0
    for _ in range(60):
        mid = (lo + hi) / 2
        if sum(mid**i for i in range(1, k + 1)) / k < rate:
            lo = mid
        else:
            hi = mid
    return round(lo, 4)


def _ttft_line(
    points: list[RunPoint],
    batches: list[float],
    share: float,
    slots: int,
    notes: list[str],
    line: tuple[float, float] | None = None,
) -> tuple[float, float, float]:
    """TTFT's intercept, slope per token and log spread, from the calmest runs where no
    request queued for a slot, each TTFT taken back to a batch of one by its run's step
    factor: enough requests for a line. Given the ``line`` (the engine timed its
    prefills), only its spread is read, off the least loaded runs (two prompts
    prefilled together take a TTFT the line of one does not give)."""
    calm: list[tuple[float, float]] = []
    least = min(p.in_flight for p in points)
    for p, b in sorted(zip(points, batches, strict=True), key=lambda x: x[0].in_flight):
        if calm and (len(calm) >= _ENOUGH or (slots and p.in_flight > slots)):
            break
        if line is not None and p.in_flight > least:
            break
        factor = 1 + share * (b - 1)
        calm += [(float(t), ms / factor) for t, ms in zip(p.prompt_tokens, p.ttft_ms, strict=True)]
    lengths = [t for t, _ in calm]
    if line is not None:
        base, per_token = line
    elif max(lengths) - min(lengths) >= _SPREAD_TOKENS:
        base, per_token = _line(lengths, [ms for _, ms in calm])
    else:
        # Prompts this alike cannot separate the prefill's cost per token from noise.
        base, per_token = statistics.median(ms for _, ms in calm), 0.0
        notes.append(
            f"prompts of {min(lengths):.0f}-{max(lengths):.0f} tokens: too alike to fit "
            "the prefill's cost per token (ttft_per_1k_tokens_ms 0)"
        )
    per_token = max(0.0, per_token)
    base = max(0.1, base)
    logs = [math.log(ms / (base + per_token * t)) for t, ms in calm if ms > 0]
    return base, per_token, statistics.pstdev(logs) if len(logs) > 1 else 0.0


def _mean_gaps(p: RunPoint) -> float:
    """Gaps between tokens a request of the run had, on average (at least one)."""
    return max(1.0, statistics.mean(max(1, n - 1) for n in p.output_tokens))


def _calmest(points: list[RunPoint]) -> RunPoint:
    """The runs at the least load as one (a sweep in rounds has several): their
    requests together, their gap percentiles the median of theirs."""
    least = min(p.in_flight for p in points)
    runs = [p for p in points if p.in_flight == least]
    if len(runs) == 1:
        return runs[0]
    gaps = [p.itl_p50_p90 for p in runs if p.itl_p50_p90 is not None]
    return dataclasses.replace(
        runs[0],
        folder=",".join(p.folder for p in runs),
        prompt_tokens=tuple(t for p in runs for t in p.prompt_tokens),
        ttft_ms=tuple(t for p in runs for t in p.ttft_ms),
        tpot_ms=tuple(t for p in runs for t in p.tpot_ms),
        output_tokens=tuple(n for p in runs for n in p.output_tokens),
        itl_p50_p90=(
            (statistics.median(g[0] for g in gaps), statistics.median(g[1] for g in gaps))
            if len(gaps) == len(runs)
            else None
        ),
        windows=tuple(w for p in runs for w in p.windows),
    )


def _gap_spreads(calmest: RunPoint) -> tuple[float, float]:
    """The log spread of one gap around the engine's pace (``itl_sigma``) and of the
    pace from request to request (``pace_sigma``), on the calmest run.

    A request's TPOT is the mean of its ``g`` gaps, so its log variance is about
    ``r^2 + s^2 / g``, while all gaps together have ``r^2 + s^2``: the run's gap
    percentiles and its requests' TPOTs give both. Without gap percentiles, all of the
    TPOT spread is put on the pace (a spread in TPOT is shared by a request's gaps).
    """
    tpot_logs = [math.log(t) for t in calmest.tpot_ms if t > 0]
    if len(tpot_logs) < 2:
        return 0.0, 0.0
    v_request = statistics.pvariance(tpot_logs)
    g = _mean_gaps(calmest)
    if calmest.itl_p50_p90 is None or g <= 1:
        return 0.0, min(math.sqrt(v_request), _MAX_SIGMA)
    p50, p90 = calmest.itl_p50_p90
    v_gap = (math.log(p90 / p50) / _Z90) ** 2 if p90 > p50 > 0 else 0.0
    r2 = max(0.0, (v_request - v_gap / g) / (1 - 1 / g))
    s2 = max(0.0, v_gap - r2)
    return min(math.sqrt(s2), _MAX_SIGMA), min(math.sqrt(r2), _MAX_SIGMA)


def _step_line(points: list[RunPoint], batches: list[float]) -> tuple[float, float, bool]:
    """``itl_ms`` and ``step_token_share``: each run's median gap against its batch
    where the engine timed its prefills (a median gap is one step; the few a prefill
    held, llama.cpp's, do not move it), else its median TPOT (True: on the gaps)."""
    gaps = [p.itl_p50_p90[0] for p in points if p.itl_p50_p90 is not None and p.windows]
    # Gaps where the engine timed its prefills (llama.cpp, whose prefills stall the
    # other streams: a TPOT holds them); else TPOTs, exact means of the gaps.
    by_gap = len(gaps) == len(points)
    if not by_gap:
        gaps = [statistics.median(p.tpot_ms) for p in points]
    # The median run at each batch: one round the machine slowed moves no point.
    at: dict[float, list[float]] = {}
    for b, g in zip(batches, gaps, strict=True):
        at.setdefault(b, []).append(g)
    itl, slope = _line([b - 1 for b in at], [statistics.median(g) for g in at.values()])
    return itl, max(0.0, slope / max(itl, 0.01)), by_gap


def fit_runs(points: list[RunPoint]) -> tuple[Settings, FittedRange, list[str]]:
    """The profile's settings, its range, and notes on what the fit could not see."""
    notes: list[str] = []
    queued = [p for p in points if (p.waiting_peak or 0) > 0 and p.running_peak]
    slots = int(max(p.running_peak or 0 for p in queued)) if queued else 0
    if not any(p.running_peak is not None for p in points):
        notes.append("no server metrics in the runs: the engine's slots are not known")
    batches = [min(p.in_flight, slots) if slots else p.in_flight for p in points]
    itl, share, gap_medians = _step_line(points, batches)
    timed = [p.windows for p in points if p.windows and len(p.windows) == len(p.ttft_ms)]
    line = prefill_line(timed) if len(timed) == len(points) else None
    if line is not None:
        # The engine timed its prefills (llama.cpp): their line is the prefill's cost,
        # and what a request waits beyond it at the calmest load (the HTTP round trip,
        # the step in progress) is added to the intercept.
        calm = _calmest(points)
        waits = zip(calm.ttft_ms, calm.windows, strict=True)
        extra = max(0.0, statistics.median(t - w.prompt_ms for t, w in waits))
        notes.append(
            f"prefill from the engine's prompt_ms (the prefills that overlapped no other): "
            f"{line[0]:.1f} ms + {1000 * line[1]:.1f} ms per 1k tokens, {extra:.1f} ms around it"
        )
        line = (line[0] + extra, line[1])
    base, per_token, ttft_sigma = _ttft_line(points, batches, share, slots, notes, line)
    stall = stall_share(timed, lambda d: max(itl, 0.01) * (1 + share * (d - 1)))
    if stall is not None and stall > 0:
        # The engine's decodes waited out part of the other prompts' prefills (llama.cpp
        # prefills a prompt whole): the twin adds those waits itself (prefill_stall).
        notes.append(f"decodes waited {stall:.0%} of the prefills that ended during them")
    itl = max(itl, 0.01)
    calmest = _calmest(points)
    # Each calm run's spreads, the median run's: the pooled runs' would count a round
    # the machine slowed as the engine's pace.
    least = min(p.in_flight for p in points)
    spreads = [_gap_spreads(p) for p in points if p.in_flight == least]
    gap_sigma = statistics.median(g for g, _ in spreads)
    pace_sigma = statistics.median(r for _, r in spreads)
    if calmest.itl_p50_p90 is None:
        notes.append("no gap percentiles in the runs: the TPOT spread is all put on the pace")
    outputs = [n for p in points for n in p.output_tokens]
    stopped = sum(p.stopped for p in points)
    settings: Settings = {
        "ttft_ms": round(base, 3),
        "ttft_per_1k_tokens_ms": round(1000 * per_token, 3),
        "ttft_sigma": round(ttft_sigma, 4),
        # TPOT is a mean of gaps, and the simulator draws each gap log-normal around a
        # median: the median that gives the fitted mean.
        "itl_ms": round(itl if gap_medians else itl / math.exp(gap_sigma**2 / 2), 3),
        "itl_sigma": round(gap_sigma, 4),
        "pace_sigma": round(pace_sigma, 4),
        # The pace holds about one request's decode: what the TPOT spread was shared by.
        "pace_period_ms": round(statistics.median(calmest.tpot_ms) * _mean_gaps(calmest), 1),
        "step_token_share": round(share, 5),
        "max_running": slots,
        # An engine steps its running sequences together: they end together.
        "lockstep": True,
        # The prefill's cost is in the fitted TTFT: no chunk is added to other steps.
        "prefill_chunk_tokens": 0,
        "prefill_stall": round(stall or 0.0, 3),
        "min_output_fraction": round(
            1.0 if stopped == 0 else float(np.percentile(outputs, 5)) / max(outputs), 3
        ),
    }
    sim_tokens = sum(sum(p.prompt_tokens) for p in points)
    engine = sum(p.engine_tokens for p in points)
    if engine and abs(sim_tokens / engine - 1) > 0.05:
        notes.append(
            f"prompts counted as the simulator does (characters / 4): {sim_tokens} tokens "
            f"where the engine counted {engine}; the prefill cost is per the simulator's"
        )
    rates = [p.acceptance for p in points if p.acceptance is not None]
    if rates:
        k = 4
        p_token = _per_token_acceptance(statistics.median(rates), k)
        settings |= {f"accept_{c}": p_token for c in ("tool_calls", "code", "chat", "multilingual")}
        notes.append(
            f"acceptance rate {statistics.median(rates):.3f} -> per-token {p_token} for every "
            f"category at spec_k {k}; serve with --spec for the speculative twin"
        )
    if len(points) < 2:
        notes.append("one run: step time against batch is not fitted (flat)")
    fitted = FittedRange(
        running=(
            max(1, math.floor(min(p.in_flight for p in points))),
            max(1, math.ceil(max(p.in_flight for p in points))),
        ),
        prompt_tokens=(
            min(t for p in points for t in p.prompt_tokens),
            max(t for p in points for t in p.prompt_tokens),
        ),
        engine=points[0].engine,
        runs=tuple(p.folder for p in points),
    )
    return settings, fitted, notes


def fit_profile(given: list[str], out: Path) -> tuple[Path, Settings, list[str]]:
    """Fit the runs (folders, or sweep folders of them) and write the profile."""
    points = [run_point(f) for f in run_folders(given)]
    settings, fitted, notes = fit_runs(points)
    write_atomic(out, profile_text(settings, fitted, notes).encode())
    return out, settings, notes
