"""``loadtest scenarios`` and ``loadtest init``: the shipped scenarios, and a copy to edit."""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

from loadtest.cli.parser import Parser

__all__ = ["CATALOGUE_COMMANDS", "add_catalogue_commands", "run_catalogue_command"]

CATALOGUE_COMMANDS = frozenset({"scenarios", "init"})


def add_catalogue_commands(sub: argparse._SubParsersAction[Parser], out: Parser) -> None:
    """The two sub-commands' parsers."""
    sub.add_parser("scenarios", parents=[out], help="list the shipped scenarios, one line each")
    init = sub.add_parser("init", parents=[out], help="write a copy of a shipped scenario to edit")
    init.add_argument("name", help="a shipped scenario (loadtest scenarios lists them)")
    init.add_argument("path", nargs="?", help="the file or folder to write (default: ./NAME.toml)")
    init.add_argument("--force", action="store_true", help="overwrite files that exist")


def run_catalogue_command(args: argparse.Namespace) -> int:
    """Print the list, or write the copy; returns the exit code."""
    from loadtest.config.shipped import copy_shipped, shipped_scenarios

    if args.command == "scenarios":
        found = shipped_scenarios()
        width = max(len(s.name) for s in found)
        room = max(20, shutil.get_terminal_size((100, 24)).columns - width - 2)
        for s in found:
            text = s.description if len(s.description) <= room else s.description[: room - 3]
            print(f"{s.name:<{width}}  {text}{'...' if text != s.description else ''}")
        print(
            f"\nrun one: loadtest run NAME; edit one: loadtest init NAME ({found[0].path.parent})"
        )
        return 0
    written = copy_shipped(args.name, Path(args.path) if args.path else None, args.force)
    print(f"wrote {written[0]}" + "".join(f"\n  and {p} (it reads this file)" for p in written[1:]))
    print(f"run it: loadtest run {written[0]}")
    return 0
