"""``ab --server-sweep``: its flag, its checks, and a sweep or search per server setting."""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from loadtest.cli.parser import Parser
from loadtest.errors import UsageError

if TYPE_CHECKING:
    from loadtest.app.ab_sides import Side
    from loadtest.app.options import RunOptions
    from loadtest.app.server_sweep import ServerSweep
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


def server_spec(args: argparse.Namespace, sides: dict[str, Side]) -> ServerSweep | None:
    """The setting to sweep, checked against every side at every value, or None."""
    from loadtest.app.server_sweep import parse_server_sweep, with_setting

    if args.server_sweep is None:
        return None
    if args.sweep is None and args.search is None:
        raise UsageError("--server-sweep runs a --sweep or a --search per setting: give one")
    sweep = parse_server_sweep(args.server_sweep)
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
    from loadtest.app.server_sweep import render_server_sweep, run_server_sweep

    def decide_at(
        on: dict[str, Side], out: str, labels: tuple[tuple[str, str], ...]
    ) -> tuple[Decision, bool]:
        return at(on, dataclasses.replace(base, out=out, live_labels=labels))

    result, folder, stopped = run_server_sweep(
        sweep, sides, Path(base.out), name, decide_at, base.live_labels
    )
    print()
    print(render_server_sweep(result))
    print(f"\nserver sweep: {folder / 'server-sweep.json'}")
    return stopped
