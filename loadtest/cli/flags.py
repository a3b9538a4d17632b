"""The flags sub-commands share (as argparse parents), and turning them into ``RunOptions``.

``add_output_flags`` (``-v``/``-q``) go to every sub-command; ``add_run_flags`` to every
sub-command that makes runs (``run``, ``sweep``, ``ab``), so a flag accepted by one of
them is accepted by all. The options' flags are declared on ``RunOptions``' fields
(``loadtest.flag``) and made into arguments here; their bounds are checked where the
options are applied (``app.options``), so a Python caller's values are checked too.
"""

from __future__ import annotations

import argparse
import dataclasses
from typing import TYPE_CHECKING, Any

# Light (dataclasses and the flag declarations): --help and usage errors pay no more.
from loadtest.app.run_options import RunOptions
from loadtest.cli.declared import add_declared, read_declared
from loadtest.errors import UsageError

if TYPE_CHECKING:
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
    add_declared(p, RunOptions, "load")


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
    """The flags of any command that makes runs: scenario, endpoint, bounds, access...

    Each option's flag is declared on its ``RunOptions`` field; here are only the flags
    that are not options of a run: the live outputs, the refused ``--api-key`` and the
    exit-code policy ``--fail-on``."""
    add_declared(p, RunOptions, "runs")
    add_live_flags(p)
    # A key on the command line shows in process lists and shell history: refuse it.
    p.add_argument("--api-key", help=argparse.SUPPRESS)
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


def run_options(args: argparse.Namespace, **over: Any) -> RunOptions:
    """``RunOptions`` from parsed flags, with ``over`` on top."""
    if args.api_key is not None:
        raise UsageError(
            "--api-key is not accepted: a key on the command line shows in process lists and "
            "shell history; put it in $OPENAI_API_KEY, or use --api-key-env NAME or "
            "--api-key-file PATH"
        )
    return dataclasses.replace(read_declared(args, RunOptions), **over)
