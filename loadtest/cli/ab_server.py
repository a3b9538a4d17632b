"""``ab --server-sweep`` and ``--sampling-sweep``: their flags, their checks, and a
sweep or search per value of a server setting or of a request field."""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from loadtest.cli.parser import Parser
from loadtest.errors import UsageError

if TYPE_CHECKING:
    from loadtest.app.ab.server_sweep import ServerSweep
    from loadtest.app.ab.sides import Side
    from loadtest.app.options import RunOptions
    from loadtest.model.decision import Decision

__all__ = ["add_server_flags", "server_spec", "server_sweep"]


def add_server_flags(ab: Parser) -> None:
    """``--server-sweep SETTING=V,V,...``."""
    ab.add_argument(
        "--server-sweep",
        metavar="SETTING=V,V,...",
        help="with --sweep or --search: run it once per value of a server setting of the "
        "sides ab starts, each a fresh server: llama: parallel, threads, ctx_per_slot; "
        "vllm: max_num_seqs, max_model_len, num_speculative_tokens, kv_cache_gb; sim: a "
        "numeric [sim] setting (e.g. max_running=2,4,8)",
    )
    ab.add_argument(
        "--sampling-sweep",
        metavar="FIELD=V,V,...",
        help="with --sweep or --search: run it once per value of a request field sent to "
        "both sides, e.g. reasoning_effort=low,medium,high (as [sampling] sends it)",
    )


def server_spec(args: argparse.Namespace, sides: dict[str, Side]) -> ServerSweep | None:
    """The setting to sweep, checked against every side at every value, or None."""
    from loadtest.app.ab.server_sweep import parse_sampling_sweep, parse_server_sweep, with_setting

    given = [
        f
        for f, v in (
            ("--server-sweep", args.server_sweep),
            ("--sampling-sweep", args.sampling_sweep),
        )
        if v
    ]
    if not given:
        return None
    if len(given) > 1:
        raise UsageError("--server-sweep and --sampling-sweep: one dimension at a time")
    if args.sweep is None and args.search is None:
        raise UsageError(f"{given[0]} runs a --sweep or a --search per value: give one")
    if args.server_sweep:
        sweep = parse_server_sweep(args.server_sweep)
    else:
        sweep = parse_sampling_sweep(args.sampling_sweep)
    for value in sweep.values:
        for side in sides.values():
            with_setting(side, sweep, value)
    return sweep


def server_sweep(
    sweep: ServerSweep,
    sides: dict[str, Side],
    base: RunOptions,
    name: str,
    at: Callable[[dict[str, Side], RunOptions], tuple[Decision, bool]],
) -> bool:
    """``at`` once per value; prints the answers per value; returns whether stopped."""
    from loadtest.app.ab.server_sweep import render_server_sweep, run_server_sweep

    def decide_at(
        value: float | str | bool,
        on: dict[str, Side],
        out: str,
        labels: tuple[tuple[str, str], ...],
    ) -> tuple[Decision, bool]:
        sampling = (*base.sampling, (sweep.name, value)) if sweep.request else base.sampling
        options = dataclasses.replace(base, out=out, live_labels=labels, sampling=sampling)
        return at(on, options)

    result, folder, stopped = run_server_sweep(
        sweep, sides, Path(base.out), name, decide_at, base.live_labels
    )
    print()
    print(render_server_sweep(result))
    print(f"\n{'sampling' if sweep.request else 'server'} sweep: {folder / 'server-sweep.json'}")
    return stopped
