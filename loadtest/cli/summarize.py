"""``loadtest summarize FOLDER``: write the summary a killed run did not write.

The rebuild is ``loadtest.report.rebuild``; this writes its result with the run's own
writer (``write_results``: every registered output, loadtest's .hgrm files and
summary.csv and any plugin's, then summary.json, each atomically), so that afterwards
every command reads the folder as a finished run's.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from loadtest.cli.parser import Parser

__all__ = ["add_summarize", "summarize"]


def add_summarize(sub: argparse._SubParsersAction[Parser], out: Parser) -> None:
    """The ``summarize`` sub-command (``out``: the output flags every command takes)."""
    cmd = sub.add_parser(
        "summarize",
        parents=[out],
        help="rebuild and write summary.json of a run killed before it wrote one",
    )
    cmd.add_argument("folder", help="out/<run-id> of the killed run")


def summarize(folder: str) -> int:
    """Rebuild, write and print the summary of the run in ``folder``; the exit code."""
    from loadtest.errors import ResultFileError, UsageError
    from loadtest.model.io import load_summary
    from loadtest.report import render_table, write_results
    from loadtest.report.error_examples import common_errors
    from loadtest.report.rebuild import rebuild_summary

    path = Path(folder)
    if not path.is_dir():
        raise UsageError(f"{folder}: not a folder; give out/<run-id>")
    if (path / "summary.json").exists():
        # A broken one is not "there": it is said, never rebuilt over (it is the run's).
        try:
            load_summary(path)
        except ResultFileError as exc:
            raise ResultFileError(
                f"{exc}; it is not rebuilt over: remove it to rebuild it from requests.jsonl"
            ) from exc
        print(f"{path / 'summary.json'}: already there; nothing to rebuild", file=sys.stderr)
        return 0
    rebuilt = rebuild_summary(path)
    write_results(path, rebuilt.summary, rebuilt.metrics)
    errors = common_errors(path) if rebuilt.summary["requests"]["errors"] else None
    print(render_table(rebuilt.summary, errors))
    if "agent_trace" in rebuilt.summary:
        from loadtest.features.agent_trace_block import render_agent_trace

        print(render_agent_trace(rebuilt.summary["agent_trace"]))
    print(f"\nsummary: {path / 'summary.json'}")
    return 0
