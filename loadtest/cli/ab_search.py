"""``ab --search``: its flags, their checks, its plan for ``--check``, and its output."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from loadtest.cli.parser import Parser
from loadtest.errors import UsageError

if TYPE_CHECKING:
    from pathlib import Path

    from loadtest.app.capacity.search_plan import SearchSpec
    from loadtest.model.comparison import Comparison
    from loadtest.model.decision import Decision

__all__ = ["add_search_flags", "search_check", "search_spec", "shown"]

SWEEP_ONLY = ("sweep", "draft_max", "budget", "memory_budget", "operating_point")


def add_search_flags(ab: Parser) -> None:
    """``--search KIND=LO..HI``, ``--tolerance``, ``--max-steps``."""
    ab.add_argument(
        "--search",
        metavar="KIND=LO..HI",
        help="search for the load where the candidate stops paying, per category, e.g. "
        "concurrency=1..64 or rate=1..40, instead of a grid (decision.json)",
    )
    ab.add_argument(
        "--tolerance",
        type=float,
        default=0.10,
        help="--search: stop when a rate bracket is within this fraction (default 0.10; "
        "a concurrency stops at one step)",
    )
    ab.add_argument(
        "--max-steps",
        type=int,
        default=6,
        metavar="N",
        help="--search: the most load steps (each an ab); the search's alpha is spent "
        "over them, 5%% / N a step (default 6)",
    )


def search_spec(args: argparse.Namespace) -> SearchSpec | None:
    """The search asked for, or None; ``UsageError`` naming a flag it cannot go with."""
    from loadtest.app.capacity.search_plan import SearchSpec, parse_search
    from loadtest.config.dimensions import known_dimensions

    if args.search is None:
        return None
    given = [f"--{a.replace('_', '-')}" for a in SWEEP_ONLY if getattr(args, a) is not None]
    if given:
        raise UsageError(f"--search chooses its own loads: it does not go with {', '.join(given)}")
    known = known_dimensions()
    kind, lo, hi = parse_search(args.search, known)
    if not 0 < args.tolerance < 1:
        raise UsageError(f"--tolerance {args.tolerance:g}: give a fraction, e.g. 0.1")
    if args.max_steps < 2:
        raise UsageError(f"--max-steps {args.max_steps}: a search needs at least 2 steps")
    return SearchSpec(kind, lo, hi, args.tolerance, args.max_steps, whole_steps=known[kind])


def search_check(spec: SearchSpec, repeat: int, sides: int) -> list[str]:
    """``--check``: the most runs the search may make, and its error control."""
    from loadtest.app.ab.search_plan import alpha_per_step

    runs = spec.budget * sides * repeat
    return [
        f"ab search: {spec.kind} {spec.lo:g}..{spec.hi:g}, at most {spec.budget} steps x "
        f"{sides} sides x {repeat} repeat{'s' * (repeat > 1)} = {runs} runs",
        f"  each step judged at alpha {alpha_per_step(spec):.4g} (5% spent evenly over "
        f"{spec.budget} steps), Holm within a step",
    ]


def shown(
    fail_on: str,
    point: float | None,
    done: tuple[Decision, list[tuple[float, Comparison]], Path, bool],
    reasons: list[str],
) -> tuple[Decision, bool]:
    """A sweep's or a search's decision: gated (``--fail-on slower``), written and
    printed; its reasons, and every step's comparison's, added to ``reasons``."""
    from loadtest.app.ab.sweep import gate, write_decision
    from loadtest.report.decision_render import render_decision
    from loadtest.report.exit_reasons import comparison_reasons

    decision, compared, folder, stopped = done
    if fail_on == "slower":
        decision["gate"] = gate(decision, "slower", point)
        reasons += decision["gate"]["reasons"]
    write_decision(folder, decision)
    for load, c in compared:
        reasons += [f"{decision['kind']} {load:g}: {r}" for r in comparison_reasons(c)]
    print(render_decision(decision))
    print(f"\ndecision: {folder / 'decision.json'}")
    sys.stdout.flush()
    return decision, stopped
