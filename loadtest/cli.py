"""Command-line entry point: argument parsing and sub-commands only; no logic here."""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Sequence
from dataclasses import fields

from loadtest.errors import LoadtestError, ScenarioError, UsageError
from loadtest.sim.model import SimConfig

__all__ = ["main"]

EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(f"{self.prog}: {message}")


def _parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="loadtest",
        description="Load and robustness tests for OpenAI-compatible LLM endpoints.",
    )
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)

    run = sub.add_parser("run", help="run a scenario against an endpoint (default: simulator)")
    run.add_argument("scenario", nargs="?", help="scenario TOML (default: scenarios/mixed.toml)")
    run.add_argument(
        "--endpoint",
        help="base URL, e.g. http://127.0.0.1:8000 (default: start the built-in simulator)",
    )
    run.add_argument(
        "--model", help="model name (default: the scenario's, else the first of /v1/models)"
    )
    load = run.add_mutually_exclusive_group()
    load.add_argument("--concurrency", type=int, help="closed loop with N sessions")
    load.add_argument(
        "--rate",
        type=float,
        help="open loop at R requests/s (Poisson unless "
        "the scenario names another arrival process)",
    )
    stop = run.add_mutually_exclusive_group()
    stop.add_argument("--duration", type=float, help="seconds of measured load")
    stop.add_argument("--requests", type=int, help="number of measured requests")
    run.add_argument("--max-tokens", type=int, help="max_tokens of every request")
    run.add_argument("--warmup", type=float, help="seconds of warm-up, not measured")
    run.add_argument("--out", default="out", help="results folder (default: out)")
    run.add_argument("--seed", type=int, help="seed of prompt choice and arrivals")
    run.add_argument("--no-tui", action="store_true", help="plain progress lines, no TUI")
    run.add_argument(
        "--api-key-env",
        metavar="NAME",
        help="environment variable holding the bearer token (default: OPENAI_API_KEY)",
    )
    run.add_argument(
        "--api-key-file", metavar="PATH", help="file holding the bearer token (first line)"
    )
    # A key on the command line shows in process lists and shell history: refuse it.
    run.add_argument("--api-key", help=argparse.SUPPRESS)
    run.add_argument("--ca-bundle", metavar="PEM", help="trust this CA for an https endpoint")
    run.add_argument(
        "--insecure",
        action="store_true",
        help="do not verify the endpoint's TLS certificate (self-signed staging servers)",
    )
    run.add_argument(
        "--check",
        action="store_true",
        help="validate the scenario and flags, print the plan and exit (no load)",
    )
    run.add_argument(
        "--record-chunks",
        action="store_true",
        help="write every token chunk's time into requests.jsonl",
    )
    run.add_argument("--no-keepalive", action="store_true", help="a new connection per request")
    run.add_argument(
        "--loop",
        choices=("asyncio", "uvloop"),
        default="asyncio",
        help="event loop without the TUI (default: asyncio; uvloop showed no consistent gain)",
    )

    sim = sub.add_parser("sim", help="serve the simulated OpenAI-compatible endpoint")
    sim.add_argument("--host", default="127.0.0.1")
    sim.add_argument("--port", type=int, default=8000, help="0 picks a free port")
    sim.add_argument(
        "--spec",
        action="store_true",
        help="serve a speculative deployment: a draft process and a target process",
    )
    cmp = sub.add_parser("compare", help="two finished runs side by side (A = baseline)")
    cmp.add_argument("run_a", help="baseline run folder (out/<run-id>)")
    cmp.add_argument("run_b", help="candidate run folder")
    cmp.add_argument("--json", help="also write the comparison to this JSON file")

    llama = sub.add_parser(
        "serve-llama",
        help="serve llama.cpp (xllamacpp) with Gemma 3 270M on loopback (extra: llama)",
    )
    llama.add_argument("--host", default="127.0.0.1")
    llama.add_argument("--port", type=int, default=8090)
    llama.add_argument(
        "--spec", choices=("none", "ngram"), default="none", help="n-gram speculative decoding"
    )
    llama.add_argument("--parallel", type=int, default=2, help="slots (concurrent requests)")
    llama.add_argument("--threads", type=int, default=2, help="CPU threads")
    llama.add_argument("--ctx-per-slot", type=int, default=4096, help="context per slot")
    llama.add_argument("--draft-max", type=int, default=8, help="n-gram: most drafted tokens")

    defaults = SimConfig()
    for f in fields(SimConfig):
        default = getattr(defaults, f.name)
        sim.add_argument(
            f"--{f.name.replace('_', '-')}",
            type=_flag if isinstance(default, bool) else type(default),
            default=default,
            help=f"(default: {default})",
        )
    return p


def _flag(text: str) -> bool:
    if text.lower() in ("1", "true", "yes", "on"):
        return True
    if text.lower() in ("0", "false", "no", "off"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the process exit code."""
    try:
        args = _parser().parse_args(argv)
        if args.command == "sim":
            return _sim(args)
        if args.command == "serve-llama":
            return _serve_llama(args)
        if args.command == "compare":
            return _compare(args)
        return _run(args)
    except (UsageError, ScenarioError) as exc:
        print(f"loadtest: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except LoadtestError as exc:
        print(f"loadtest: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        # Only before the load starts (prompt loading): the run itself handles SIGINT.
        print("loadtest: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


def _run(args: argparse.Namespace) -> int:
    from loadtest.job import RunOptions, run_job

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
        concurrency=args.concurrency,
        rate=args.rate,
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
        record_chunks=args.record_chunks,
        keepalive=not args.no_keepalive,
        uvloop=args.loop == "uvloop",
    )
    if args.check:
        from loadtest.job import check_job

        print(check_job(options))
        return EXIT_OK
    _, _, interrupted = run_job(options)
    return EXIT_INTERRUPTED if interrupted else EXIT_OK


def _compare(args: argparse.Namespace) -> int:
    from pathlib import Path

    import orjson

    from loadtest.atomic import write_atomic
    from loadtest.report.compare import compare_summaries, load_summary, render_comparison

    c = compare_summaries(load_summary(args.run_a), load_summary(args.run_b))
    print(render_comparison(c))
    if args.json:
        write_atomic(Path(args.json), orjson.dumps(c, option=orjson.OPT_INDENT_2))
    return EXIT_OK


def _serve_llama(args: argparse.Namespace) -> int:
    from loadtest.llama import LlamaOptions, serve

    serve(
        LlamaOptions(
            port=args.port,
            host=args.host,
            spec=args.spec,
            parallel=args.parallel,
            threads=args.threads,
            ctx_per_slot=args.ctx_per_slot,
            draft_max=args.draft_max,
        )
    )
    return EXIT_OK


def _sim(args: argparse.Namespace) -> int:
    from loadtest.sim.process import serve, serve_deployment

    config = SimConfig(**{f.name: getattr(args, f.name) for f in fields(SimConfig)})
    config.check()
    try:
        if args.spec:
            serve_deployment(config, args.host, args.port)
        else:
            asyncio.run(serve(config, args.host, args.port))
    except OSError as exc:
        raise UsageError(f"cannot listen on {args.host}:{args.port}: {exc.strerror}") from exc
    return EXIT_OK


if __name__ == "__main__":
    raise SystemExit(main())
