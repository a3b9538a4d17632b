"""``loadtest ab``: baseline and candidate endpoints, run interleaved, then compared.

Runs alternate A, B, B, A, A, B, ... so that whatever drifts on the machine or the
network over time (thermal state, a neighbour's load, caches warming) falls on both
sides alike. Every run records its outputs and, unless asked otherwise, samples at
temperature 0, so the comparison can also check that the candidate answers exactly as
the baseline does: speculative decoding must not change the output, and a difference
points to a bug in the deployment, not to the draft model, once the baseline's own
divergence (the same prompt answered twice on one side) is taken out.

Both sides get the same scenario, seed, prompts in the same order and the same warm-up,
so prompt caches start alike; ``[sampling] cache_prompt = false`` in the scenario asks
llama.cpp-style engines not to reuse cached prompts at all, and ``comparison.json``
records which was used (``prompt_cache``). A comparison that measured nothing, too
little, or under unlike conditions says so first (``compare_checks``).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypedDict, final

import numpy as np
import orjson

from loadtest.app.ab.sides import RunFn, Side, run_side
from loadtest.app.options import RunOptions, resolve_scenario
from loadtest.measure.stats import MIN_EFFECT
from loadtest.model.atomic import write_atomic
from loadtest.model.comparison import Comparison
from loadtest.report.compare import RunData, compare_runs, load_run
from loadtest.report.evidence import run_evidence

__all__ = [
    "AbStopped",
    "ab_order",
    "comparison_name",
    "letter",
    "run_ab",
    "run_ab_many",
    "side_line",
]

LETTERS = {"baseline": "A", "candidate": "B"}
"""How the comparison names the sides, and each run's line and progress lines too."""


def letter(side: str) -> str:
    """``A``, ``B``, or ``B[K=4]`` for ``candidate-k4`` (a draft length of a sweep)."""
    if side.startswith("candidate-k"):
        return f"B[K={side.removeprefix('candidate-k')}]"
    return LETTERS[side]


def comparison_name(side: str) -> str:
    """``comparison.json`` for the one candidate, ``comparison-candidate-k4.json`` else."""
    return "comparison.json" if side == "candidate" else f"comparison-{side}.json"


@final
class AbStopped(TypedDict):
    """``comparison.json`` of an ab stopped before both sides had a run."""

    repeat: int
    interrupted: bool
    prompt_cache: str


def ab_order(repeat: int, names: tuple[str, ...] = ("baseline", "candidate")) -> list[str]:
    """The sides in ABBA order over ``repeat`` rounds (A B C, C B A, ... with more)."""
    order: list[str] = []
    for i in range(repeat):
        order += names if i % 2 == 0 else names[::-1]
    return order


def run_ab(
    base: RunOptions,
    sides: dict[str, Side],
    repeat: int,
    name: str,
    run: RunFn,
    *,
    min_effect: float = MIN_EFFECT,
    say: Callable[[str], None] = print,
    folder: Path | None = None,
) -> tuple[Comparison | AbStopped, Path, bool]:
    """Run both sides ``repeat`` times, interleaved; returns (comparison, folder, stopped).

    ``sides`` maps ``baseline`` and ``candidate`` to a URL, the simulator or a managed
    deployment (``ab.sides``). ``comparison.json`` is written into the folder, with the
    runs done so far when a run was stopped. Each run is labelled ``A 1/2`` (side, run
    of the side) on its progress lines, and ``say`` gets one line for it when it ends
    (``side_line``): the runs' own tables are in their folders. ``folder`` (default
    ``OUT/<time>-ab-<name>``) and ``base.label`` (before ``A 1/2``) are how a sweep's
    steps are kept apart.
    """
    done, folder, stopped = run_ab_many(
        base, sides, repeat, name, run, min_effect=min_effect, say=say, folder=folder
    )
    return done["candidate"], folder, stopped


def run_ab_many(
    base: RunOptions,
    sides: dict[str, Side],
    repeat: int,
    name: str,
    run: RunFn,
    *,
    min_effect: float = MIN_EFFECT,
    say: Callable[[str], None] = print,
    folder: Path | None = None,
) -> tuple[dict[str, Comparison | AbStopped], Path, bool]:
    """``run_ab`` with one baseline and any number of candidates (``candidate-k1``, ...:
    a draft-length sweep), all interleaved; one comparison against the baseline per
    candidate, each written to ``comparison_name(candidate)``. The baseline's runs are
    shared: every candidate is judged against the same baseline, run among them."""
    if folder is None:
        stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime())
        folder = Path(base.out) / f"{stamp}-ab-{name}"
    names = ("baseline", *(s for s in sides if s != "baseline"))
    runs: dict[str, list[RunData]] = {s: [] for s in names}
    stopped = False
    for side in ab_order(repeat, names):
        label = (
            f"{base.label} " * bool(base.label) + f"{letter(side)} {len(runs[side]) + 1}/{repeat}"
        )
        # Named here, not by the second it starts (the run id): two short runs of a
        # side back to back started in one second and the second overwrote the first.
        stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime())
        run_dir = folder / side / f"{stamp}-{name}-{len(runs[side]) + 1:02d}"
        options = dataclasses.replace(
            base,
            out=str(folder / side),
            run_dir=str(run_dir),
            record_outputs=True,
            label=label,
            live_labels=(*base.live_labels, ("side", side)),
        )
        run_dir, interrupted = run_side(sides[side], options, run)
        data = load_run(run_dir)
        runs[side].append(data)
        say(side_line(label, side, data, run_dir))
        if interrupted:
            stopped = True
            break
    done: dict[str, Comparison | AbStopped] = {}
    for side in names[1:]:
        result: Comparison | AbStopped = {
            "repeat": repeat,
            "interrupted": stopped,
            "prompt_cache": prompt_cache_policy(base),
        }
        if runs["baseline"] and runs[side]:
            c = compare_runs(runs["baseline"], runs[side], min_effect=min_effect)
            c["repeat"], c["interrupted"], c["prompt_cache"] = (
                repeat,
                stopped,
                prompt_cache_policy(base),
            )
            result = c
        folder.mkdir(parents=True, exist_ok=True)
        data_bytes = orjson.dumps(result, option=orjson.OPT_INDENT_2)
        write_atomic(folder / comparison_name(side), data_bytes)
        done[side] = result
    return done, folder, stopped


def side_line(label: str, side: str, data: RunData, run_dir: Path) -> str:
    """``A 1/2 baseline   ok 60  TTFT p50 22.9 ms  -> out/.../baseline/<run-id>``: the
    p50 as the comparison takes it of each run (its measured values, interpolated), as
    the run's own HDR p50 (the lower middle value of 20) was printed beside a "run by
    run" figure of the same run 0.5 ms apart."""
    summary = data.summary
    r = summary["requests"]
    ok = r.get("measured_ok", r["ok"])
    counts = f"ok {ok}" + (f" failed {r['failed']}" if r["failed"] else "")
    counts += f" cancelled {r['cancelled']}" if r["cancelled"] else ""
    ttft = data.samples.get("ttft_ms")
    # Rounded as the comparison's figure is, so both print the same tenth.
    p50 = None if ttft is None or not ttft.size else round(float(np.percentile(ttft, 50)), 3)
    shown = "no data" if p50 is None else f"{p50:.1f} ms"
    notes = ["INTERRUPTED"] * summary["run"]["interrupted"]
    notes += [f"STOPPED EARLY: {s['reason']}" for s in summary.get("stopped", [])]
    notes += [f"STOP: {why}" for why in run_evidence(summary).reasons]
    tail = "".join(f"  {n}" for n in notes)
    return f"{label} {side:<9}  {counts}  TTFT p50 {shown}{tail}  -> {run_dir}"


def prompt_cache_policy(base: RunOptions) -> str:
    """What the runs asked of the engines' prompt caches (from ``[sampling]``)."""
    scenario = resolve_scenario(base)
    value = scenario.sampling.get("cache_prompt")
    if value is None:
        return "engine default (no cache_prompt sent)"
    return f"cache_prompt = {str(value).lower()} sent with every request"
