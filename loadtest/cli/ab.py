"""``loadtest ab``: its flags and its dispatch, with or without ``--sweep``.

Without ``--sweep`` one ``ab`` at the scenario's own load (``app.ab.runs``); with it an
``ab`` at every step and the decision over them (``app.ab.sweep``). ``--check`` prints
the plan of either and sends nothing. Only parsing and printing here.
"""

from __future__ import annotations

import argparse
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from loadtest.cli.ab_search import add_search_flags, search_check, search_spec, shown
from loadtest.cli.ab_server import add_server_flags, server_spec, server_sweep
from loadtest.cli.codes import EXIT_GATE, EXIT_INTERRUPTED
from loadtest.cli.flags import (
    add_load_flags,
    add_output_flags,
    add_run_flags,
    open_live,
    run_options,
)
from loadtest.cli.parser import Parser
from loadtest.errors import UsageError

if TYPE_CHECKING:
    from loadtest.app.ab.sides import RunFn, Side
    from loadtest.app.ab.sweep import AbSweepPlan
    from loadtest.app.capacity.search_plan import SearchSpec
    from loadtest.app.options import RunOptions
    from loadtest.model.decision import Decision

__all__ = ["EXIT_GATE", "add_ab", "run_ab_command"]


def add_ab(sub: argparse._SubParsersAction[Parser]) -> None:
    """The ``ab`` sub-command: the run flags (``--fail-on`` also takes ``slower``)."""
    runs = Parser(add_help=False)
    add_output_flags(runs)
    add_run_flags(runs, fail_on_slower=True)
    ab = sub.add_parser(
        "ab",
        parents=[runs],
        help="run baseline and candidate endpoints interleaved, then compare them",
    )
    add_load_flags(ab)
    side = "base URL, llama:none|ngram|self|draft[:LAYERS] or vllm:none|ngram[:K] (ab starts "
    side += "llama.cpp or vLLM and measures its cold start, memory, energy), or sim:none|spec "
    side += "(the scenario's [sim], without or with speculation); default: the built-in "
    side += "simulator"
    ab.add_argument("--baseline", help=f"baseline {side}")
    ab.add_argument("--candidate", help=f"candidate {side}")
    ab.add_argument("--repeat", type=int, default=2, help="runs per side (default: 2)")
    ab.add_argument(
        "--min-effect",
        type=float,
        default=2.0,
        metavar="PCT",
        help="smallest difference called faster/slower, in %% of the baseline (default: 2)",
    )
    ab.add_argument(
        "--keep-sampling",
        action="store_true",
        help="keep the scenario's sampling instead of temperature 0 (no equivalence check)",
    )
    ab.add_argument(
        "--sweep",
        metavar="KIND=LOADS",
        help="an ab at every load step, e.g. concurrency=1,2,4,8 or rate=5,10,20, then the "
        "decision per category (decision.json)",
    )
    add_search_flags(ab)
    add_server_flags(ab)
    ab.add_argument(
        "--draft-max",
        metavar="K,K,...",
        help="with --sweep: one candidate per draft length, e.g. 1,2,4 (a managed speculative "
        "candidate: llama:ngram|draft|self or sim:spec), each judged against the baseline, "
        "and the K with the shortest time to a correct action named per load",
    )
    ab.add_argument(
        "--memory-budget",
        metavar="SIZE",
        help="with --sweep: say whether each deployment fits SIZE (e.g. 2GiB) and with what "
        "headroom, from the measured memory of the sides ab starts",
    )
    ab.add_argument(
        "--budget",
        metavar="TIME",
        help="with --sweep: trim repeats (never steps) so the runs fit TIME (e.g. 15m)",
    )
    ab.add_argument(
        "--operating-point",
        metavar="KIND=LOAD",
        help="with --fail-on slower: gate only this step of the sweep, e.g. concurrency=8",
    )
    ab.add_argument(
        "--check",
        action="store_true",
        help="validate the scenario and flags, print the plan (steps x sides x repeats, "
        "expected time) and exit",
    )


def run_ab_command(args: argparse.Namespace) -> int:
    """``loadtest ab``: the runs, the comparison (or the decision), the exit code."""
    from loadtest.app.ab.runs import run_ab
    from loadtest.app.ab.sides import draft_sides, parse_draft_values, parse_side
    from loadtest.app.ab.sweep import parse_operating_point, parse_sweep
    from loadtest.app.run.job import run_job
    from loadtest.cli.exits import closing
    from loadtest.model.summary import Summary
    from loadtest.report.compare import render_comparison
    from loadtest.report.exit_reasons import comparison_reasons, fault_reasons, stop_reasons

    if args.endpoint:
        raise UsageError("ab takes --baseline URL and --candidate URL, not --endpoint")
    if args.repeat < 1:
        raise UsageError("--repeat must be at least 1")
    plan: AbSweepPlan | None = parse_sweep(args.sweep) if args.sweep else None
    spec = search_spec(args)
    point = None
    if args.operating_point is not None:
        if plan is None or args.fail_on != "slower":
            raise UsageError("--operating-point needs --sweep and --fail-on slower")
        point = parse_operating_point(args.operating_point, plan)
    if args.fail_on == "slower" and plan is None and spec is None:
        raise UsageError("--fail-on slower judges a sweep's decision: give --sweep or --search")
    # Fault windows are gated as by default when --fail-on is taken by the sweep's gate.
    windows = "failed" if args.fail_on == "slower" else args.fail_on
    temperature = None if args.keep_sampling else 0.0
    base = run_options(args, tui=False, temperature=temperature, print_results=False)
    name = Path(base.scenario).stem if base.scenario else "mixed"
    sides = {
        "baseline": parse_side(args.baseline, "--baseline"),
        "candidate": parse_side(args.candidate, "--candidate"),
    }
    if args.draft_max is not None:
        if plan is None:
            raise UsageError("--draft-max sweeps draft lengths across load: give --sweep too")
        values = parse_draft_values(args.draft_max)
        sides = {"baseline": sides["baseline"], **draft_sides(sides["candidate"], values)}
    if (args.memory_budget or args.budget) and plan is None:
        raise UsageError("--memory-budget and --budget judge a sweep: give --sweep too")
    memory = None
    if args.memory_budget:
        from loadtest.app.ab.costs import parse_memory

        memory = (args.memory_budget, parse_memory(args.memory_budget))
    repeat, budget_note = _budgeted(args, base, plan, len(sides))
    servers = server_spec(args, sides)
    if args.check and servers is not None:
        listed = ", ".join(servers.label(v).split("=", 1)[1] for v in servers.values)
        kind = "request field" if servers.request else "server setting"
        print(f"{kind} sweep: {servers.name} = {listed}, a fresh server per run; once per value:")
    if args.check and spec is not None:
        from loadtest.app.run.job import check_job

        print(check_job(_as_a_side_runs(base, sides), endpoint="the sides below"))
        print("\n".join(search_check(spec, repeat, len(sides))))
        return 0
    if args.check:
        return _check(base, plan, repeat, sides, budget_note, args.min_effect / 100)
    reasons: list[str] = []  # the windows of either side that fail --fail-on, by run

    live = open_live(args)

    def run(options: RunOptions) -> tuple[Summary, Path, bool]:
        summary, folder, stopped = run_job(options, live)
        judged = [*fault_reasons(summary, windows), *stop_reasons(summary)]
        reasons.extend(f"{options.label}: {r}" for r in judged)
        return summary, folder, stopped

    try:
        if spec is not None or plan is not None:
            if budget_note:
                print(budget_note)
            args.repeat = repeat
            decision = Decided(args, spec, plan, point, name, run, reasons, memory, budget_note)
            if servers is not None:
                stopped = server_sweep(servers, sides, base, name, decision.at)
            else:
                stopped = decision.at(sides, base)[1]
            return EXIT_INTERRUPTED if stopped else closing(reasons, EXIT_GATE)
        result, folder, stopped = run_ab(
            base, sides, args.repeat, name, run, min_effect=args.min_effect / 100
        )
    finally:
        if live is not None:
            live.close()
    if "metrics" in result:
        print(render_comparison(result))
        print(f"prompt cache: {result['prompt_cache']}")
        reasons += comparison_reasons(result)
    print(f"\ncomparison: {folder / 'comparison.json'}")
    return EXIT_INTERRUPTED if stopped else closing(reasons, EXIT_GATE)


@dataclass(frozen=True, slots=True)
class Decided:
    """A sweep or a search, run on given sides and shown: once, or once per server
    setting (``--server-sweep``)."""

    args: argparse.Namespace
    spec: SearchSpec | None
    plan: AbSweepPlan | None
    point: float | None
    name: str
    run: RunFn
    reasons: list[str]
    memory: tuple[str, float] | None
    budget_note: str | None

    def at(self, sides: dict[str, Side], base: RunOptions) -> tuple[Decision, bool]:
        """The decision on ``sides`` with ``base``'s options, shown; and if stopped."""
        from loadtest.app.ab.search import run_ab_search
        from loadtest.app.ab.sweep import run_ab_sweep

        effect = self.args.min_effect / 100
        repeat = self.args.repeat
        if self.spec is not None:
            done = run_ab_search(
                base, sides, self.spec, repeat, self.name, self.run, min_effect=effect
            )
        else:
            assert self.plan is not None
            done = run_ab_sweep(
                base,
                sides,
                self.plan,
                repeat,
                self.name,
                self.run,
                min_effect=effect,
                memory=self.memory,
            )
            if self.budget_note:
                done[0]["budget"] = self.budget_note
        return shown(self.args.fail_on, self.point, done, self.reasons)


def _per_run(base: RunOptions) -> tuple[float | None, str]:
    """How long one run takes (None for a request-bound scenario), and its bound in words."""
    from loadtest.app.options import resolve_scenario

    # The load alone: whether a side can carry the faults is each side's own check.
    load = resolve_scenario(base).load
    per_run = None if load.duration_s is None else load.warmup_s + load.duration_s
    bound = (
        f"{load.warmup_s:g} s warm-up + {load.duration_s:g} s"
        if load.duration_s is not None
        else f"{load.requests} requests after a {load.warmup_s:g} s warm-up"
    )
    return per_run, bound


def _budgeted(
    args: argparse.Namespace, base: RunOptions, plan: AbSweepPlan | None, sides: int
) -> tuple[int, str | None]:
    if not args.budget or plan is None:
        return args.repeat, None
    from loadtest.app.ab.costs import parse_duration, trim_repeats

    seconds = parse_duration(args.budget)
    per_run, _ = _per_run(base)
    return trim_repeats(seconds, len(plan.steps), sides, args.repeat, per_run)


def _start_cost(side: Side) -> str:
    """What a managed side pays before each of its runs."""
    from loadtest.app.ab.side_types import SIDE_TYPES

    return SIDE_TYPES.load(side.kind).start_cost if side.kind else "the simulator's start"


def _as_a_side_runs(base: RunOptions, sides: dict[str, Side]) -> RunOptions:
    """The options a side's runs get, for the check: a side the simulator does not serve
    (a URL, a deployment ab starts) is an endpoint, so the check says what its runs will
    skip (a draft fault has no proxy there), as each run would say only once it ran."""
    from dataclasses import replace

    served = [s for s in sides.values() if s.given is not None and not s.served_in_run(base)]
    if not served:
        return base
    return replace(base, endpoint=served[0].url or "http://127.0.0.1")


def _check(
    base: RunOptions,
    plan: AbSweepPlan | None,
    repeat: int,
    sides: dict[str, Side],
    budget_note: str | None,
    min_effect: float,
) -> int:
    from loadtest.app.ab.costs import requests_per_cell
    from loadtest.app.ab.sweep import AbSweepPlan, plan_lines
    from loadtest.app.run.job import check_job
    from loadtest.app.run.plan import plan_run
    from loadtest.measure.stats import practical_effect

    scenario = plan_run(_as_a_side_runs(base, sides)).scenario
    load = scenario.load
    swept = plan is not None
    if plan is None:
        kind = "concurrency" if load.mode == "closed" else "rate"
        plan = AbSweepPlan(kind, (float(load.concurrency if kind == "concurrency" else load.rate),))
    per_run, bound = _per_run(base)
    given = [s.given or "the built-in simulator" for s in sides.values()]
    starts = sorted({_start_cost(s) for s in sides.values() if s.managed})
    print(check_job(_as_a_side_runs(base, sides), endpoint="the sides below"))
    print("\n".join(plan_lines(plan, repeat, per_run, bound, given, swept=swept, starts=starts)))
    if budget_note:
        print(f"  {budget_note}")
    # Per step: e2e and TPOT per category, goodput, per candidate (the smallest family:
    # one category), and the pair tests between draft lengths.
    candidates = len(sides) - 1
    family = len(plan.steps) * (3 * candidates + max(candidates - 1, 0))
    bar = practical_effect(repeat, repeat, min_effect)
    n, why = requests_per_cell(repeat, family, min_effect=bar)
    said = (
        f"{n} requests a run" if n is not None else f"not with {repeat} repeat{'s' * (repeat > 1)}"
    )
    print(f"  to see a 10% difference (19 times in 20, Holm over {family}+ tests): {said}")
    print(
        "\n".join(textwrap.wrap(f"({why})", 80, initial_indent="    ", subsequent_indent="     "))
    )
    return 0
