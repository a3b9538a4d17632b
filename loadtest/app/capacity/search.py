"""``sweep --search``: runs the capacity search's plan (``search_plan``), one run a point.

Each point is a whole ``loadtest run`` into ``OUT/<search-id>/point-NN-<load>/``, as a
sweep's step is; after each, ``capacity.json`` is written again with every point, the
plan's reason for it, the bracket, the SLO margins' fit and the answer so far, so a
killed search loses at most the point it was running: ``--resume FOLDER`` reads the
points back and goes on where the plan left off (the plan is a function of the points,
so a resumed search asks for what an unbroken one would have).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import orjson

from loadtest.app.capacity.search_plan import (
    Bracket,
    Point,
    SearchSpec,
    bracket,
    margin_fit,
    next_load,
)
from loadtest.app.capacity.sweep import step_slo
from loadtest.errors import UsageError
from loadtest.model.atomic import write_atomic
from loadtest.model.search import MarginFit, SearchPoint, SearchResult
from loadtest.model.summary import Summary

__all__ = ["answer_text", "point_of", "run_search"]

RESULT = "capacity.json"


def point_of(load: float, summary: Summary) -> Point:
    """What the search reads from one run: met, missed or cannot tell, and the margins."""
    said, need = step_slo(summary)
    if said == "none":
        raise UsageError("--search looks for the largest load meeting the SLOs: give --slo")
    margins = tuple(
        (c["slo"], round(value / c["limit"], 4))
        for c in summary["slo"]["checks"]
        if (value := c["value"]) is not None and c["limit"] > 0
    )
    saturated = [s["reason"] for s in summary.get("stopped", []) if s["rule"] == "saturated"]
    if saturated:  # ended early: the endpoint could not keep up, whatever the SLOs say
        return Point(load, "fail", margins, saturated[0])
    if said == "met":
        return Point(load, "pass", margins)
    if said in ("missed", "not sustained"):  # a load the endpoint could not take fails
        return Point(load, "fail", margins)
    ok = summary["requests"].get("measured_ok", summary["requests"]["ok"])
    why = f"too few requests to judge the SLOs ({ok}, need {need}): give a longer --duration"
    return Point(load, "cannot tell", margins, why)


def answer_text(spec: SearchSpec, b: Bracket, stop: str, fits: list[MarginFit]) -> str:
    """The search's answer as one sentence (or why there is none)."""
    kind = spec.kind
    cross = [
        f"{f['slo']} crosses its limit at {at:g}"
        for f in fits
        if (at := f["crosses_at"]) is not None
    ]
    fit = f" (fitted: {'; '.join(cross)})" if cross else ""
    if b.passes is not None and b.fails is not None:
        agree = (b.low, b.high) == (b.passes, b.fails)
        lo = "-" if b.low is None else f"{b.low:g}"
        hi = "-" if b.high is None else f"{b.high:g}"
        spread = "every run agrees" if agree else f"runs disagree: the boundary is in [{lo}, {hi}]"
        if b.closed(spec):
            return (
                f"meets the SLOs up to {kind} {b.passes:g}; fails from {b.fails:g} ({spread}){fit}"
            )
        return (
            f"cannot tell between {kind} {b.passes:g} (met) and {b.fails:g} (missed): {stop}{fit}"
        )
    if b.passes is not None:
        return f"meets the SLOs up to {kind} {b.passes:g}, the highest load tried: {stop}"
    if b.fails is not None:
        return f"fails the SLOs from {kind} {b.fails:g}, the lowest load tried: {stop}"
    return f"no answer: {stop}"


def _margins(row: SearchPoint) -> tuple[tuple[str, float], ...]:
    return tuple((m["slo"], m["margin"]) for m in row["margins"])


def _read(folder: Path) -> list[SearchPoint]:
    path = folder / RESULT
    try:
        data = orjson.loads(path.read_bytes())
        points: list[SearchPoint] = data["points"]
    except (OSError, orjson.JSONDecodeError, KeyError, TypeError) as exc:
        raise UsageError(f"--resume {folder}: no search to resume there ({exc})") from exc
    return points


def run_search(
    spec: SearchSpec,
    out: Path,
    name: str,
    run_step: Callable[[float, Path], tuple[Summary, bool]],
    say: Callable[[str], None] = print,
    resume: Path | None = None,
) -> tuple[SearchResult, Path, bool]:
    """Run the plan to its end; returns (capacity.json's content, folder, stopped)."""
    if resume is not None:
        folder, rows = resume, _read(resume)
    else:
        stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime())
        folder, rows = out / f"{stamp}-search-{name}", list[SearchPoint]()
        folder.mkdir(parents=True, exist_ok=True)
    points = [
        Point(
            r["load"], r["outcome"], tuple((m["slo"], m["margin"]) for m in r["margins"]), r["why"]
        )
        for r in rows
    ]
    stopped = False
    while True:
        decision = next_load(spec, points)
        if decision.load is None:
            break
        load = decision.load
        say(f"point {len(points) + 1}: {spec.kind} {load:g} ({decision.why})")
        run_dir = folder / f"point-{len(points):02d}-{load:g}"
        summary, interrupted = run_step(load, run_dir)
        if interrupted:  # a point cut short says nothing: it is run again on --resume
            stopped = True
            break
        point = point_of(load, summary)
        points.append(point)
        rows.append(
            {
                "load": load,
                "outcome": point.outcome,
                "margins": [{"slo": n, "margin": m} for n, m in point.margins],
                "why": point.why,
                "plan": decision.why,
                "run": run_dir.name,
            }
        )
        _write(folder, spec, rows, points, "searching", stopped)
    stop = "stopped by Ctrl-C (--resume the folder to go on)" if stopped else decision.why
    return _write(folder, spec, rows, points, stop, stopped), folder, stopped


def _write(
    folder: Path,
    spec: SearchSpec,
    rows: list[SearchPoint],
    points: list[Point],
    stop: str,
    stopped: bool,
) -> SearchResult:
    b = bracket(points)
    fits = margin_fit(points)
    result: SearchResult = {
        "search": {
            "kind": spec.kind,
            "lo": spec.lo,
            "hi": spec.hi,
            "tolerance": spec.tolerance,
            "budget": spec.budget,
        },
        "points": rows,
        "runs": len(points),
        "bracket": {
            "passes": b.passes,
            "fails": b.fails,
            "low": b.low,
            "high": b.high,
            "closed": b.closed(spec),
        },
        "fit": fits,
        "stopped_because": stop,
        "answer": answer_text(spec, b, stop, fits),
        "interrupted": stopped,
    }
    write_atomic(folder / RESULT, orjson.dumps(result, option=orjson.OPT_INDENT_2))
    return result
