"""What a paired sweep costs: memory against a budget, time against a budget, and the
requests a cell needs to see a 10% difference (``--memory-budget``, ``--budget``,
``--check``). Pure functions; the sweep and the command line print what they return.

**Memory**: a managed side's resident memory is sampled through each of its runs
(``deployment.json``: steady = median, and the peak); a side fits when its peak over a
step's runs is within the budget, with the rest as headroom. A URL's server (or the
simulator) is not ours to sample: "cannot tell".

**Time**: ``--budget 15m`` trims repeats, never steps: a sweep with fewer loads no
longer answers where the candidate stops paying, while fewer repeats only widen the
intervals. The time a run takes is known only for a duration-bound scenario.

**Requests per cell**: the median's relative standard error from ``n`` requests of
log-spread ``s`` is about 1.2533 s / sqrt(n) (the median of a near-normal sample), and
whole runs shift by ``RUN_SPREAD`` beyond that; with R runs a side
SE^2 = (RUN_SPREAD^2 + (1.2533 s)^2 / n) / R, and a difference ``d`` is called 19 times in 20 when
(z(1 - alpha / 2 / family) + z(0.95)) * sqrt(2) * SE <= d. The spreads are those
``benchmarks/bench_power.py`` measured on the simulator (docs/capacity-and-ab.md):
an endpoint's own may be larger, and an ab of it measures them.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

from scipy import stats as sp

from loadtest.errors import UsageError
from loadtest.measure.stats import ALPHA
from loadtest.model.comparison import DeploymentRun
from loadtest.model.decision import MemoryBudget, SideMemory

__all__ = [
    "REQUEST_SPREAD",
    "RUN_SPREAD",
    "memory_budget",
    "parse_duration",
    "parse_memory",
    "requests_per_cell",
    "side_memory",
    "trim_repeats",
]

RUN_SPREAD = 0.056
"""How much a whole run's median e2e moves between runs of one configuration beyond the
sampling noise of its requests, relative (bench_power on the simulator, 6 runs of 40
requests, the shared 2-core machine at a load average of ~6, 2026-12-01)."""
REQUEST_SPREAD = 0.28
"""Log standard deviation of one request's e2e within a run, likewise (answers of 8 to
16 tokens)."""
SPREAD_SOURCE = (
    "the simulator's spreads, which benchmarks/bench_power.py measured: a run's median "
    f"moves {RUN_SPREAD:.1%} from one run to the next (more than its requests' own spread "
    f"explains), and one request's e2e varies {REQUEST_SPREAD:.0%} within a run; an "
    "endpoint's usually vary more"
)
_UNITS = {"": 1, "b": 1, "k": 1e3, "kb": 1e3, "kib": 1024, "m": 1e6, "mb": 1e6}
_UNITS |= {"mib": 1024**2, "g": 1e9, "gb": 1e9, "gib": 1024**3, "t": 1e12, "tb": 1e12}
_UNITS |= {"tib": 1024**4}
MIB = 1024 * 1024


def parse_memory(text: str) -> float:
    """``2GiB``, ``1.5GB``, ``512MiB`` -> MiB; ``UsageError`` naming ``--memory-budget``."""
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([a-zA-Z]*)\s*", text)
    unit = m.group(2).lower() if m else ""
    if m is None or unit not in _UNITS or float(m.group(1)) <= 0:
        raise UsageError(f"--memory-budget {text!r}: expected a size like 2GiB, 1.5GB, 512MiB")
    return float(m.group(1)) * _UNITS[unit] / MIB


def parse_duration(text: str) -> float:
    """``15m``, ``90s``, ``1.5h`` (a bare number is seconds) -> seconds; ``UsageError``."""
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*(s|m|min|h)?\s*", text)
    if m is None or float(m.group(1)) <= 0:
        raise UsageError(f"--budget {text!r}: expected a time like 15m, 90s or 1.5h")
    scale = {"s": 1, None: 1, "m": 60, "min": 60, "h": 3600}[m.group(2)]
    return float(m.group(1)) * scale


def side_memory(
    load: float, side: str, given: str | None, runs: Sequence[DeploymentRun | None], budget: float
) -> SideMemory:
    """One side at one load against ``budget`` MiB (its peak over the step's runs)."""
    measured = [r for r in runs if r is not None and r["rss_samples"]]
    if not measured:
        why = "cannot tell: not a deployment ab starts, so its memory is not sampled"
        return {
            "load": load,
            "side": side,
            "deployment": given,
            "peak_mib": None,
            "steady_mib": None,
            "fits": None,
            "headroom_mib": None,
            "note": why,
        }
    peak = max(r["rss_peak_mib"] for r in measured)
    steady = max(r["rss_steady_mib"] for r in measured)
    room = budget - peak
    note = (
        f"fits: peak {peak:.0f} MiB, {room:.0f} MiB ({room / budget:.0%}) to spare"
        if room >= 0
        else f"does NOT fit: peak {peak:.0f} MiB, {-room:.0f} MiB over"
    )
    return {
        "load": load,
        "side": side,
        "deployment": given,
        "peak_mib": round(peak, 1),
        "steady_mib": round(steady, 1),
        "fits": room >= 0,
        "headroom_mib": round(room, 1),
        "note": note,
    }


def memory_budget(given: str, budget: float, sides: list[SideMemory]) -> MemoryBudget:
    """The budget's verdict over every side and step: each fits, one does not, or some
    cannot be told."""
    said = {s["fits"] for s in sides}
    fits = False if False in said else (None if None in said or not sides else True)
    return {"budget": given, "budget_mib": round(budget, 1), "fits": fits, "sides": sides}


def trim_repeats(
    budget_s: float, steps: int, sides: int, repeat: int, per_run_s: float | None
) -> tuple[int, str]:
    """The repeats that fit ``budget_s`` (never fewer steps), and what was done, in words."""
    if per_run_s is None:
        return repeat, (
            f"--budget: cannot tell how long a run takes (a request-bound scenario): "
            f"repeats kept at {repeat}; bound the runs by duration to budget them"
        )
    fits = int(budget_s // (steps * sides * per_run_s))
    if fits >= repeat:
        total = steps * sides * repeat * per_run_s
        return repeat, f"--budget: {repeat} repeats fit ({total / 60:.1f} min of runs)"
    kept = max(fits, 1)
    over = "; even one repeat is over the budget, run anyway" if fits < 1 else ""
    return kept, (
        f"--budget: repeats trimmed {repeat} -> {kept} to fit {budget_s / 60:g} min "
        f"({steps} steps kept: steps are never trimmed){over}"
    )


def requests_per_cell(
    repeat: int,
    family: int,
    difference: float = 0.10,
    min_effect: float = 0.02,
    run_spread: float = RUN_SPREAD,
    request_spread: float = REQUEST_SPREAD,
) -> tuple[int | None, str]:
    """Requests a side needs in each run of a cell to call ``difference`` 19 times in
    20 with ``family`` tests under Holm (the first, strictest step), and why."""
    if difference < min_effect:
        return None, f"a {difference:.0%} difference is below the practical bar {min_effect:.0%}"
    z = sp.norm.ppf(1 - ALPHA / 2 / max(family, 1)) + sp.norm.ppf(0.95)
    room = (difference / (z * math.sqrt(2))) ** 2 - run_spread**2 / repeat
    if room <= 0:
        # The fewest repeats whose run-to-run spread leaves room, and twice as many:
        # what would reach it, said, where it once said only "cannot be reached".
        fewest = math.floor(run_spread**2 / (difference / (z * math.sqrt(2))) ** 2) + 1
        reach = []
        for r in (fewest, 2 * fewest):
            n, _ = requests_per_cell(r, family, difference, min_effect, run_spread, request_spread)
            reach.append(f"--repeat {r} with {n} requests a run")
        return None, (
            f"no request count sees {difference:.0%} with {repeat} repeat(s): the "
            f"run-to-run spread alone ({run_spread:.1%}) is too large; "
            f"{' or '.join(reach)} would; from {SPREAD_SOURCE}"
        )
    n = math.ceil((1.2533 * request_spread) ** 2 / (repeat * room))
    return n, f"from {SPREAD_SOURCE}"
