"""``loadtest sweep``: one run per load step (a grid), or the capacity search (``--search``)."""

from __future__ import annotations

import argparse
import time
from dataclasses import replace
from typing import TYPE_CHECKING

from loadtest.cli.codes import EXIT_INTERRUPTED, EXIT_OK, EXIT_SLO_MISSED
from loadtest.cli.flags import open_live, run_options
from loadtest.errors import UsageError

if TYPE_CHECKING:
    from loadtest.app.ab.server_sweep import ServerSweep

__all__ = ["run_sweep_command"]


def run_sweep_command(args: argparse.Namespace) -> int:
    """``loadtest sweep``: a grid of load steps, or the capacity search (``--search``)."""
    from pathlib import Path

    from loadtest.app.ab.sweep import parse_sweep
    from loadtest.app.capacity.sweep import (
        SweepPlan,
        parse_steps,
        render_capacity,
        run_sweep,
        step_slo,
    )
    from loadtest.app.run.job import run_job
    from loadtest.cli.exits import closing
    from loadtest.model.summary import Summary
    from loadtest.report.exit_reasons import run_reasons

    if args.search:
        if args.sampling_sweep:
            raise UsageError(
                "--sampling-sweep runs a grid per value: give --concurrency or --rates"
            )
        return _search(args)
    if args.resume:
        raise UsageError("--resume goes on with a --search: give --search too")
    if args.sweep:
        planned = parse_sweep(args.sweep)
        kind, loads = planned.kind, planned.steps
    else:
        kind = "concurrency" if args.concurrency_steps else "rate"
        loads = parse_steps(args.concurrency_steps or args.rates, kind)
    plan = SweepPlan(kind, loads, max(0.0, args.knee_tolerance))
    # --concurrency here lists the steps: each step's value is applied as a dimension.
    run_base = base = run_options(args)
    reasons: list[str] = []  # why each step would exit 1, named by its load
    at = ""  # with --sampling-sweep, the value the grid now runs at (``base`` carries it)

    live = open_live(args)

    def step(load: float, out: Path) -> tuple[Summary, bool]:
        labels = (*base.live_labels, ("step", f"{load:g}"))
        step_options = replace(
            base,
            run_dir=str(out),
            print_results=False,
            live_labels=labels,
            steps=(*base.steps, (kind, load)),
        )
        summary, _, interrupted = run_job(step_options, live)
        where = f"{at}{kind} {load:g}"
        reasons.extend(f"{where}: {r}" for r in run_reasons(summary, args.fail_on))
        said, need = step_slo(summary)
        untold = any(c.get("verdict") == "inconclusive" for c in summary["slo"]["checks"])
        if said == "too few" and not untold:  # run_reasons names an untold check itself
            ok = summary["requests"].get("measured_ok", summary["requests"]["ok"])
            reasons.append(f"{where}: too few requests for the SLOs ({ok}, need {need})")
        return summary, interrupted

    name = Path(base.scenario).stem if base.scenario else "mixed"
    dimension = _dimension(args)
    values = dimension.values if dimension is not None else (None,)
    outer = Path(base.out)
    if dimension is not None:
        stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime())
        outer = outer / f"{stamp}-sampling-sweep-{name}"
    stopped = False
    try:
        for value in values:
            if dimension is not None and value is not None:
                label = dimension.label(value)
                at = f"{label}, "
                print(f"request field {label}")
                sampling = (*run_base.sampling, (dimension.name, value))
                base = replace(run_base, sampling=sampling)
                out = outer / label
            else:
                out = outer
            result, folder, stopped = run_sweep(plan, out, name, step)
            print(render_capacity(result))
            print(f"\ncapacity: {folder / 'capacity.csv'}")
            if stopped:
                break
    finally:
        if live is not None:
            live.close()
    return EXIT_INTERRUPTED if stopped else closing(reasons, EXIT_SLO_MISSED)


def _dimension(args: argparse.Namespace) -> ServerSweep | None:
    """``--sampling-sweep``: the request field the grid is run once per value of."""
    from loadtest.app.ab.server_sweep import parse_sampling_sweep

    return parse_sampling_sweep(args.sampling_sweep) if args.sampling_sweep else None


def _search(args: argparse.Namespace) -> int:
    """``sweep --search``: the capacity search (``app.capacity.search``)."""
    from pathlib import Path

    from loadtest.app.capacity.search import run_search
    from loadtest.app.capacity.search_plan import SearchSpec, parse_search
    from loadtest.app.run.job import run_job
    from loadtest.config.dimensions import DIMENSIONS, known_dimensions
    from loadtest.model.summary import Summary

    known = known_dimensions()
    kind, lo, hi = parse_search(args.search, known)
    if not 0 < args.tolerance < 1:
        raise UsageError(f"--tolerance {args.tolerance:g}: give a fraction, e.g. 0.1")
    if args.budget < 2:
        raise UsageError(f"--budget {args.budget}: a search needs at least 2 runs")
    resume = Path(args.resume) if args.resume else None
    if resume is not None and not (resume / "capacity.json").exists():
        raise UsageError(f"--resume {resume}: no capacity.json of a search there")
    spec = SearchSpec(kind, lo, hi, args.tolerance, args.budget, whole_steps=known[kind])
    # An open loop past capacity only grows its queue: such a point ends early, a fail.
    open_loop = DIMENSIONS.load(kind).open_loop
    base = run_options(args, stop_saturated=args.stop_saturated or open_loop)
    live = open_live(args)

    def point(load: float, out: Path) -> tuple[Summary, bool]:
        labels = (*base.live_labels, ("step", f"{load:g}"))
        steps = (*base.steps, (kind, load))
        options = replace(
            base, run_dir=str(out), print_results=False, live_labels=labels, steps=steps
        )
        summary, _, interrupted = run_job(options, live)
        return summary, interrupted

    name = Path(base.scenario).stem if base.scenario else "mixed"
    try:
        result, folder, stopped = run_search(spec, Path(base.out), name, point, resume=resume)
    finally:
        if live is not None:
            live.close()
    print(f"\n{result['answer']} ({result['runs']} runs)")
    print(f"search: {folder / 'capacity.json'}")
    if stopped:
        return EXIT_INTERRUPTED
    # An answer is a closed bracket, or the range's top met; anything else (the bottom
    # failed, the budget ran out first, a point could not tell) must not pass a gate.
    b = result["bracket"]
    answered = b["closed"] or (b["passes"] is not None and b["passes"] >= spec.hi)
    return EXIT_OK if answered else EXIT_SLO_MISSED
