"""``loadtest ab``: baseline and candidate endpoints, run interleaved, then compared.

Runs alternate A, B, B, A, A, B, ... so that whatever drifts on the machine or the
network over time (thermal state, a neighbour's load, caches warming) falls on both
sides alike. Every run records its outputs and, unless asked otherwise, samples at
temperature 0, so the comparison can also check that the candidate answers exactly as
the baseline does: speculative decoding must not change the output, and a difference
points to a bug in the deployment, not to the draft model.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

from loadtest.app.options import RunOptions
from loadtest.report.atomic import write_atomic
from loadtest.report.compare import RunData, compare_runs, load_run

__all__ = ["ab_order", "run_ab"]

RunFn = Callable[[RunOptions], tuple[dict[str, Any], Path, bool]]


def ab_order(repeat: int) -> list[str]:
    """``baseline``/``candidate`` in ABBA order over ``repeat`` pairs."""
    order: list[str] = []
    for i in range(repeat):
        pair = ["baseline", "candidate"]
        order += pair if i % 2 == 0 else pair[::-1]
    return order


def run_ab(
    base: RunOptions,
    endpoints: dict[str, str | None],
    repeat: int,
    name: str,
    run: RunFn,
) -> tuple[dict[str, Any], Path, bool]:
    """Run both sides ``repeat`` times, interleaved; returns (comparison, folder, stopped).

    ``endpoints`` maps ``baseline`` and ``candidate`` to a URL (None: the simulator).
    ``comparison.json`` is written into the folder, with the runs done so far when a
    run was stopped.
    """
    folder = Path(base.out) / (time.strftime("%Y%m%d-%H%M%S", time.localtime()) + f"-ab-{name}")
    runs: dict[str, list[RunData]] = {"baseline": [], "candidate": []}
    stopped = False
    for side in ab_order(repeat):
        options = dataclasses.replace(
            base, endpoint=endpoints[side], out=str(folder / side), record_outputs=True
        )
        _, run_dir, interrupted = run(options)
        runs[side].append(load_run(run_dir))
        if interrupted:
            stopped = True
            break
    result: dict[str, Any] = {"repeat": repeat, "interrupted": stopped}
    if runs["baseline"] and runs["candidate"]:
        result |= compare_runs(runs["baseline"], runs["candidate"])
    write_atomic(folder / "comparison.json", orjson.dumps(result, option=orjson.OPT_INDENT_2))
    return result, folder, stopped
