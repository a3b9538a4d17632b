"""Command-line entry point: the sub-commands' parsers and their dispatch; no logic here."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import fields

from loadtest.cli.ab import add_ab, run_ab_command
from loadtest.cli.catalogue import (
    CATALOGUE_COMMANDS,
    add_catalogue_commands,
    run_catalogue_command,
)
from loadtest.cli.codes import (
    EXIT_ERROR,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_SLO_MISSED,
    EXIT_USAGE,
)
from loadtest.cli.declared import read_declared
from loadtest.cli.flags import (
    add_load_flags,
    add_output_flags,
    add_run_flags,
    open_live,
    run_options,
)
from loadtest.cli.llama_flags import add_llama_flags, add_vllm_flags
from loadtest.cli.logs import configure_logging
from loadtest.cli.parser import Parser
from loadtest.cli.plugins import (
    add_grafana_command,
    add_plugins_command,
    run_grafana_command,
    run_plugins_command,
)
from loadtest.cli.sim_flags import add_sim_flags
from loadtest.cli.summarize import add_summarize, summarize
from loadtest.errors import LoadtestError, ResultFileError, ScenarioError, UsageError

__all__ = ["main"]


def _parser(sim_flags: bool = False) -> tuple[Parser, dict[str, Parser]]:
    """The parser and its sub-commands'; ``sim_flags``: with the simulator's settings.

    Those settings are read off ``SimConfig``, whose module the other commands (and
    ``--help``) need not import; ``sim`` without them still parses its own flags.
    """
    p = Parser(
        prog="loadtest",
        description="Load and robustness tests for OpenAI-compatible LLM endpoints.",
    )
    sub = p.add_subparsers(dest="command", required=True, parser_class=Parser)
    out, runs = Parser(add_help=False), Parser(add_help=False)
    add_output_flags(out)
    add_output_flags(runs)
    add_run_flags(runs)

    run = sub.add_parser(
        "run",
        parents=[runs],
        help="run a scenario against an endpoint (default: simulator)",
    )
    add_load_flags(run)
    run.add_argument(
        "--check",
        action="store_true",
        help="validate the scenario and flags, print the plan and exit (no load)",
    )

    sweep = sub.add_parser(
        "sweep", parents=[runs], help="one run per load step: capacity table, knee, SLOs"
    )
    steps = sweep.add_mutually_exclusive_group(required=True)
    steps.add_argument(
        "--concurrency",
        dest="concurrency_steps",
        metavar="N,N,...",
        help="closed-loop steps, e.g. 1,2,4,8",
    )
    steps.add_argument("--rates", metavar="R,R,...", help="open-loop steps in requests/s")
    steps.add_argument(
        "--sweep",
        metavar="NAME=V,V,...",
        help="steps of any sweep dimension, e.g. concurrency=1,2,4 or a plugin's "
        "(loadtest plugins lists them)",
    )
    steps.add_argument(
        "--search",
        metavar="KIND=LO..HI",
        help="search for the largest load meeting every SLO instead of a grid: "
        "concurrency=1..256, rate=0.5..64 or a sweep dimension's NAME=LO..HI "
        "(docs/capacity-and-ab.md)",
    )
    sweep.add_argument(
        "--tolerance",
        type=float,
        default=0.10,
        help="--search: stop when the bracket is within this fraction (default 0.10; "
        "a concurrency stops at one step)",
    )
    sweep.add_argument(
        "--budget",
        type=int,
        default=16,
        metavar="RUNS",
        help="--search: the most runs it may make (default 16)",
    )
    sweep.add_argument(
        "--resume", metavar="FOLDER", help="--search: go on with a search stopped in FOLDER"
    )
    sweep.add_argument(
        "--sampling-sweep",
        metavar="FIELD=V,V,...",
        help="the grid once per value of a request field, e.g. "
        "reasoning_effort=low,medium,high (as [sampling] sends it)",
    )
    sweep.add_argument(
        "--knee-tolerance",
        type=float,
        default=0.5,
        help="the knee is the last step whose median e2e is within this fraction of the "
        "lowest (default: 0.5)",
    )

    sim = sub.add_parser(
        "sim", parents=[out], help="serve the simulated OpenAI-compatible endpoint"
    )
    sim.add_argument("--host", default="127.0.0.1")
    sim.add_argument("--port", type=int, default=8000, help="0 picks a free port")
    sim.add_argument(
        "--spec",
        action="store_true",
        help="serve a speculative deployment: a draft process and a target process",
    )
    sim.add_argument(
        "--fit", nargs="+", metavar="RUN", help="fit a profile to runs against a real engine"
    )
    sim.add_argument("--write", default="sim-profile.toml", help="--fit: the profile to write")
    cmp = sub.add_parser(
        "compare",
        parents=[out],
        help="baseline against candidate runs: statistics, figures, equivalence",
    )
    cmp.add_argument("run_a", help="baseline: a run folder, or a folder of run folders")
    cmp.add_argument("run_b", help="candidate: a run folder, or a folder of run folders")
    cmp.add_argument("--json", help="also write the comparison to this JSON file")
    cmp.add_argument(
        "--min-effect",
        type=float,
        default=2.0,
        metavar="PCT",
        help="smallest difference called faster/slower, in %% of the baseline (default: 2)",
    )

    add_ab(sub)

    view = sub.add_parser("view", parents=[out], help="open a finished run in the dashboard")
    view.add_argument("folder", help="out/<run-id>")

    rep = sub.add_parser(
        "report", parents=[out], help="one self-contained HTML file for a run, sweep or ab folder"
    )
    rep.add_argument("folder", help="out/<run-id>, a sweep folder or an ab folder")
    rep.add_argument("--out", help="the HTML file (default: FOLDER/report.html)")

    add_summarize(sub, out)

    exp = sub.add_parser(
        "export-trace", parents=[out], help="a finished run's requests as a replayable trace"
    )
    exp.add_argument("folder", help="out/<run-id>")
    exp.add_argument(
        "--format",
        # app.run.export_trace.FORMATS, named here so that --help imports no report code.
        choices=("jsonl", "otlp"),
        default="jsonl",
        help="jsonl: a trace source's lines (FOLDER/trace.jsonl); otlp: OpenTelemetry GenAI "
        "spans in OTLP JSON, a trace per session (FOLDER/trace.otlp.jsonl)",
    )
    exp.add_argument("-o", "--out", help="the trace file (default: by the format, in FOLDER)")

    add_llama_flags(sub, out)
    add_vllm_flags(sub, out)
    add_catalogue_commands(sub, out)
    add_plugins_command(sub, out)
    add_grafana_command(sub, out)

    if sim_flags:
        add_sim_flags(sim)
    return p, dict(sub.choices)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the process exit code."""
    try:
        words = list(sys.argv[1:] if argv is None else argv)
        parser, subs = _parser(sim_flags="sim" in words)
        if words and words[0] in subs:
            # A mistyped flag first: it is often why a required one seems missing.
            subs[words[0]].refuse_unknown(words[1:])
        args, extras = parser.parse_known_args(words)
        if extras:
            subs.get(args.command, parser).unknown(extras)
        configure_logging(args.verbose - args.quiet)
        if args.command == "sim":
            return _sim(args)
        if args.command == "serve-llama":
            return _serve_llama(args)
        if args.command == "serve-vllm":
            return _serve_vllm(args)
        if args.command == "plugins":
            return run_plugins_command(args)
        if args.command == "grafana":
            return run_grafana_command(args)
        if args.command in CATALOGUE_COMMANDS:
            return run_catalogue_command(args)
        if args.command == "compare":
            return _compare(args)
        if args.command == "sweep":
            from loadtest.cli.sweep import run_sweep_command

            return run_sweep_command(args)
        if args.command == "ab":
            return run_ab_command(args)
        if args.command == "view":
            folder = _existing(args.folder)
            if not (sys.stdin.isatty() and sys.stdout.isatty()):
                raise UsageError(
                    f"view opens the dashboard and needs a terminal; for files, use "
                    f"loadtest report {folder}"
                )
            from loadtest.tui import view_run

            view_run(folder)
            return EXIT_OK
        if args.command == "summarize":
            return summarize(args.folder)
        if args.command == "export-trace":
            from loadtest.app.run.export_trace import export_trace

            print(f"trace: {export_trace(args.folder, args.out, args.format)}")
            return EXIT_OK
        if args.command == "report":
            from loadtest.report.html import write_report

            print(f"report: {write_report(_existing(args.folder), args.out)}")
            return EXIT_OK
        return _run(args)
    except (UsageError, ScenarioError, ResultFileError) as exc:
        # A broken result file was named on the command line (compare A B, report RUN):
        # the input is wrong, as with a bad flag.
        print(f"loadtest: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except LoadtestError as exc:
        print(f"loadtest: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        # Only before the load starts (prompt loading): the run itself handles SIGINT.
        print("loadtest: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


def _existing(folder: str) -> str:
    from pathlib import Path

    if not Path(folder).exists():
        raise UsageError(f"{folder}: the path does not exist")
    return folder


def _run(args: argparse.Namespace) -> int:
    from loadtest.app.run.job import check_job, run_job

    options = run_options(args)
    if args.check:
        print(check_job(options))
        return EXIT_OK
    live = open_live(args)
    try:
        summary, _, interrupted = run_job(options, live)
    finally:
        if live is not None:
            live.close()
    if interrupted:
        return EXIT_INTERRUPTED
    from loadtest.cli.exits import closing
    from loadtest.report.exit_reasons import run_reasons

    # Nothing measured (a CI gate must not pass on it), an SLO missed, a window failed.
    return closing(run_reasons(summary, args.fail_on), EXIT_SLO_MISSED)


def _compare(args: argparse.Namespace) -> int:
    from pathlib import Path

    import orjson

    from loadtest.model.atomic import write_atomic
    from loadtest.report.compare import (
        compare_runs,
        comparison_failed,
        load_runs,
        render_comparison,
    )

    c = compare_runs(load_runs(args.run_a), load_runs(args.run_b), min_effect=args.min_effect / 100)
    print(render_comparison(c))
    if args.json:
        write_atomic(Path(args.json), orjson.dumps(c, option=orjson.OPT_INDENT_2))
    return EXIT_ERROR if comparison_failed(c) else EXIT_OK


def _serve_llama(args: argparse.Namespace) -> int:
    from loadtest.app.engines.llama import LlamaOptions, serve

    serve(read_declared(args, LlamaOptions))
    return EXIT_OK


def _serve_vllm(args: argparse.Namespace) -> int:
    from loadtest.app.engines.vllm import VllmOptions, serve

    serve(read_declared(args, VllmOptions))
    return EXIT_OK


def _sim(args: argparse.Namespace) -> int:
    from pathlib import Path

    from loadtest.sim.launch import serve_config
    from loadtest.sim.model import SimConfig

    if args.fit:
        from loadtest.app.engines.twin import fit_profile

        out, settings, notes = fit_profile(args.fit, Path(args.write))
        print("\n".join([*notes, *(f"{k} = {v}" for k, v in settings.items())]))
        print(f"profile: {out} (serve it: loadtest sim --profile {out})")
        return EXIT_OK
    config = SimConfig(**{f.name: getattr(args, f.name) for f in fields(SimConfig)})
    serve_config(config, args.host, args.port, spec=args.spec)
    return EXIT_OK


if __name__ == "__main__":
    raise SystemExit(main())
