"""The flags sub-commands share (as argparse parents), and turning them into ``RunOptions``.

``add_output_flags`` (``-v``/``-q``) go to every sub-command; ``add_run_flags`` to every
sub-command that makes runs (``run``, ``sweep``, ``ab``), so a flag accepted by one of
them is accepted by all. Only argument definitions and their translation live here; the
checks of values (positive rates, finite durations) are in ``app.options``, where flags
coming from Python callers are checked too.
"""

from __future__ import annotations

import argparse
import dataclasses
from typing import TYPE_CHECKING, Any

from loadtest.errors import UsageError

if TYPE_CHECKING:
    from loadtest.app.options import RunOptions
    from loadtest.app.process.live import LiveExport

__all__ = [
    "add_live_flags",
    "add_load_flags",
    "add_output_flags",
    "add_run_flags",
    "live_outputs_asked",
    "open_live",
    "run_options",
]


def add_output_flags(p: argparse.ArgumentParser) -> None:
    """``-v``/``-q``: how much the command says on stderr (the results are on stdout)."""
    g = p.add_argument_group("output")
    g.add_argument("-v", "--verbose", action="count", default=0, help="say more (debug messages)")
    g.add_argument(
        "-q", "--quiet", action="count", default=0, help="say less: warnings and errors only"
    )


def add_load_flags(p: argparse.ArgumentParser) -> None:
    """``--concurrency N | --rate R``: the load of one run (a sweep has steps instead)."""
    load = p.add_mutually_exclusive_group()
    load.add_argument("--concurrency", type=int, help="closed loop with N sessions")
    load.add_argument(
        "--rate",
        type=float,
        help="open loop at R requests/s (Poisson unless "
        "the scenario names another arrival process)",
    )


def add_live_flags(p: argparse.ArgumentParser) -> None:
    """Each registered live output kind's own flag (``--prometheus HOST:PORT``...)."""
    from loadtest.live.outputs import LIVE_OUTPUTS

    g = p.add_argument_group("live outputs (while the runs go; docs/live.md)")
    for name in LIVE_OUTPUTS.names():
        try:
            kind = LIVE_OUTPUTS.load(name)
        except UsageError as exc:
            # One broken plugin must not break every command: its flag stays, and
            # giving it says why it cannot be used (LiveExport.open loads it again).
            g.add_argument(f"--{name}", dest=f"live_{name}", metavar="VALUE", help=str(exc))
            continue
        g.add_argument(kind.flag, dest=f"live_{name}", metavar=kind.metavar, help=kind.help)


def live_outputs_asked(args: argparse.Namespace) -> dict[str, str]:
    """The live outputs the flags asked for: kind name -> the flag's value."""
    asked = {}
    for key, value in vars(args).items():
        if key.startswith("live_") and value is not None:
            asked[key.removeprefix("live_")] = value
    return asked


def open_live(args: argparse.Namespace) -> LiveExport | None:
    """The command's live outputs, opened (a server listening); None when none asked."""
    asked = live_outputs_asked(args)
    if not asked:
        return None
    from loadtest.app.process.live import LiveExport

    return LiveExport.open(asked)


def add_run_flags(p: argparse.ArgumentParser, *, fail_on_slower: bool = False) -> None:
    """The flags of any command that makes runs: scenario, endpoint, bounds, access..."""
    p.add_argument(
        "scenario",
        nargs="?",
        help="scenario TOML, or the name of a shipped one such as tool-calls (default: mixed)",
    )
    p.add_argument(
        "--endpoint",
        help="base URL, e.g. http://127.0.0.1:8000 (default: start the built-in simulator)",
    )
    p.add_argument(
        "--model", help="model name (default: the scenario's, else the first of /v1/models)"
    )
    stop = p.add_mutually_exclusive_group()
    stop.add_argument("--duration", type=float, help="seconds of measured load")
    stop.add_argument("--requests", type=int, help="number of measured requests")
    p.add_argument(
        "--max-tokens",
        type=int,
        help="max_tokens of every request, over the scenario's, its sources' and prompts'",
    )
    p.add_argument("--warmup", type=float, help="seconds of warm-up, not measured")
    p.add_argument("--out", default="out", help="results folder (default: out)")
    p.add_argument("--seed", type=int, help="seed of prompt choice and arrivals")
    _timeout_flags(p)
    add_live_flags(p)
    _access_flags(p)
    p.add_argument(
        "--slo",
        action="append",
        default=[],
        metavar="METRIC.STAT=LIMIT",
        help="an objective, e.g. ttft_ms.p95=500 or error_rate=0.01 (repeatable); "
        "a missed one, or one with too few values to tell (a p99 needs 100), makes the "
        "command exit 1; 'none' drops the scenario's own",
    )
    slower = " (ab --sweep: slower, the candidate slower at a step, fault windows as failed)"
    p.add_argument(
        "--fail-on",
        choices=("degraded", "failed", "never", *(("slower",) * fail_on_slower)),
        default="failed",
        help="exit 1 when a fault window's verdict is this bad or worse: degraded (a "
        "fallback slowed the endpoint past its bound), failed (default) or never"
        + slower
        * fail_on_slower,
    )
    p.add_argument(
        "--stop-saturated",
        action="store_true",
        help="end the load early, failing it, when the endpoint cannot keep up: requests in "
        "flight and TTFT from the intended send both climbing steadily over 10 s (a "
        "[[load.stop]] rule of kind saturated; on by default in sweep --search rate=...)",
    )
    p.add_argument("--no-keepalive", action="store_true", help="a new connection per request")
    p.add_argument(
        "--source-address",
        action="append",
        default=[],
        metavar="ADDR[,ADDR...]",
        help="local addresses the connections leave from, in turn (each worker its own), "
        "e.g. 127.0.0.1,127.0.0.2: past ~28,000 connections one address runs out of "
        "ports (default: the scenario's [load] source_addresses, else the kernel's choice)",
    )
    p.add_argument("--no-tui", action="store_true", help="plain progress lines, no TUI")
    p.add_argument(
        "--record-outputs",
        action="store_true",
        help="write a digest and the head of every answer into requests.jsonl "
        "(for the output-equivalence check of compare)",
    )
    p.add_argument(
        "--record-chunks",
        action="store_true",
        help="write every token chunk's time into requests.jsonl",
    )
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


def _timeout_flags(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("timeouts (over the scenario's [timeouts])")
    g.add_argument(
        "--timeout", type=float, metavar="S", help="longest one request may take, send to end"
    )
    g.add_argument(
        "--first-byte-timeout", type=float, metavar="S", help="longest wait for the first byte"
    )
    g.add_argument(
        "--chunk-timeout", type=float, metavar="S", help="longest gap between two chunks"
    )
    w = p.add_argument_group("workloads")
    w.add_argument(
        "--tokenizer",
        metavar="PATH",
        help="a tokenizer.json for synthetic and trace sources (default: the endpoint's /tokenize)",
    )
    w.add_argument(
        "--speedup",
        type=float,
        metavar="F",
        help="replay a trace F times faster (0.5: twice as slow)",
    )


def _access_flags(p: argparse.ArgumentParser) -> None:
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


def run_options(args: argparse.Namespace, **over: Any) -> RunOptions:
    """``RunOptions`` from parsed flags, with ``over`` on top."""
    # Here, not at the top: the options pull in the scenario model, which --help and
    # usage errors must not pay for.
    from loadtest.app.options import RunOptions

    if args.api_key is not None:
        raise UsageError(
            "--api-key is not accepted: a key on the command line shows in process lists and "
            "shell history; put it in $OPENAI_API_KEY, or use --api-key-env NAME or "
            "--api-key-file PATH"
        )
    options = RunOptions(
        scenario=args.scenario,
        endpoint=args.endpoint,
        model=args.model,
        concurrency=getattr(args, "concurrency", None),
        rate=getattr(args, "rate", None),
        duration=args.duration,
        requests=args.requests,
        max_tokens=args.max_tokens,
        warmup=args.warmup,
        out=args.out,
        seed=args.seed,
        tui=not args.no_tui,
        api_key_env=args.api_key_env,
        api_key_file=args.api_key_file,
        ca_bundle=args.ca_bundle,
        insecure=args.insecure,
        slo=tuple(args.slo),
        record_chunks=args.record_chunks,
        stop_saturated=args.stop_saturated,
        record_outputs=args.record_outputs,
        keepalive=not args.no_keepalive,
        source_addresses=tuple(a for text in args.source_address for a in text.split(",")),
        uvloop=args.loop == "uvloop",
        workers=args.workers,
        ray=args.ray,
        timeout=args.timeout,
        first_byte_timeout=args.first_byte_timeout,
        chunk_timeout=args.chunk_timeout,
        tokenizer=args.tokenizer,
        speedup=args.speedup,
    )
    return dataclasses.replace(options, **over)
