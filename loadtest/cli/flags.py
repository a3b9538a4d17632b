"""The flags ``run``, ``sweep`` and ``ab`` share, and turning them into ``RunOptions``.

Only argument definitions and their translation live here; the checks of values
(positive rates, finite durations) are in ``job.apply_overrides``, where flags coming
from Python callers are checked too.
"""

from __future__ import annotations

import argparse
from typing import Any

from loadtest.app.job import RunOptions
from loadtest.errors import UsageError

__all__ = ["add_run_flags", "run_options"]


def add_run_flags(p: argparse.ArgumentParser, *, single_load: bool = True) -> None:
    """Add the flags of one run; ``single_load`` adds ``--concurrency N | --rate R``."""
    p.add_argument("scenario", nargs="?", help="scenario TOML (default: scenarios/mixed.toml)")
    p.add_argument(
        "--endpoint",
        help="base URL, e.g. http://127.0.0.1:8000 (default: start the built-in simulator)",
    )
    p.add_argument(
        "--model", help="model name (default: the scenario's, else the first of /v1/models)"
    )
    if single_load:
        load = p.add_mutually_exclusive_group()
        load.add_argument("--concurrency", type=int, help="closed loop with N sessions")
        load.add_argument(
            "--rate",
            type=float,
            help="open loop at R requests/s (Poisson unless "
            "the scenario names another arrival process)",
        )
    stop = p.add_mutually_exclusive_group()
    stop.add_argument("--duration", type=float, help="seconds of measured load")
    stop.add_argument("--requests", type=int, help="number of measured requests")
    p.add_argument("--max-tokens", type=int, help="max_tokens of every request")
    p.add_argument("--warmup", type=float, help="seconds of warm-up, not measured")
    p.add_argument("--out", default="out", help="results folder (default: out)")
    p.add_argument("--seed", type=int, help="seed of prompt choice and arrivals")
    p.add_argument(
        "--api-key-env",
        metavar="NAME",
        help="environment variable holding the bearer token (default: OPENAI_API_KEY)",
    )
    p.add_argument(
        "--api-key-file", metavar="PATH", help="file holding the bearer token (first line)"
    )
    # A key on the command line shows in process lists and shell history: refuse it.
    p.add_argument("--api-key", help=argparse.SUPPRESS)
    p.add_argument("--ca-bundle", metavar="PEM", help="trust this CA for an https endpoint")
    p.add_argument(
        "--insecure",
        action="store_true",
        help="do not verify the endpoint's TLS certificate (self-signed staging servers)",
    )
    p.add_argument(
        "--slo",
        action="append",
        default=[],
        metavar="METRIC.STAT=LIMIT",
        help="an objective, e.g. ttft_ms.p95=500 or error_rate=0.01 (repeatable); "
        "a missed one makes the command exit 1",
    )
    p.add_argument("--no-keepalive", action="store_true", help="a new connection per request")
    p.add_argument(
        "--workers",
        type=int,
        default=1,
        help="driver processes, each with its share of the load; results merged (default: 1)",
    )
    p.add_argument(
        "--ray",
        metavar="ADDRESS",
        help="run the --workers as tasks on a Ray cluster (ADDRESS of its head, or auto); "
        "needs the ray extra",
    )
    p.add_argument(
        "--loop",
        choices=("asyncio", "uvloop"),
        default="asyncio",
        help="event loop without the TUI (default: asyncio; uvloop costs less per read "
        "with many slow streams, but its arrivals are not kernel-stamped and it records "
        "no write_ms)",
    )


def run_options(args: argparse.Namespace, **over: Any) -> RunOptions:
    """``RunOptions`` from parsed flags, with ``over`` on top."""
    if args.api_key is not None:
        raise UsageError(
            "--api-key is not accepted: a key on the command line shows in process lists and "
            "shell history; put it in $OPENAI_API_KEY, or use --api-key-env NAME or "
            "--api-key-file PATH"
        )
    values: dict[str, Any] = {
        "scenario": args.scenario,
        "endpoint": args.endpoint,
        "model": args.model,
        "concurrency": getattr(args, "concurrency", None),
        "rate": getattr(args, "rate", None),
        "duration": args.duration,
        "requests": args.requests,
        "max_tokens": args.max_tokens,
        "warmup": args.warmup,
        "out": args.out,
        "seed": args.seed,
        "tui": not getattr(args, "no_tui", True),
        "api_key_env": args.api_key_env,
        "api_key_file": args.api_key_file,
        "ca_bundle": args.ca_bundle,
        "insecure": args.insecure,
        "slo": tuple(args.slo),
        "record_chunks": getattr(args, "record_chunks", False),
        "record_outputs": getattr(args, "record_outputs", False),
        "keepalive": not args.no_keepalive,
        "uvloop": args.loop == "uvloop",
        "workers": args.workers,
        "ray": args.ray,
    }
    values.update(over)
    return RunOptions(**values)
