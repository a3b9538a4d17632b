"""The most common error message of each failure class of a run, from its lines.

The summary counts failures by class only (``errors: protocol 2043``); what the
server did is in each line's ``error`` (``expected text/event-stream, got content
type 'text/html'``), and a reader of the printed table had to open requests.jsonl to
learn it. Read once, after the run, and only when a request failed.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from pathlib import Path

from loadtest.model.io import JsonLines
from loadtest.report.run_record import record_parts

__all__ = ["ErrorExamples", "common_errors", "error_lines"]

ErrorExamples = Mapping[str, tuple[str, int]]
"""Per failure class: its most common message and how many requests had it."""

_DISTINCT = 1000
"""Messages counted per class at most: one naming each request's id would grow
without bound; the common one is among the first seen."""
_SHOWN = 200
"""Characters of a message printed (an error page quoted whole is long)."""


def common_errors(folder: Path) -> ErrorExamples:
    """The most common message of each class among the run's lines (its workers' too)."""
    seen: dict[str, Counter[str]] = {}
    for part in record_parts(folder):
        for row in JsonLines(part / "requests.jsonl"):
            kind, message = row.get("error_class"), row.get("error")
            if not isinstance(kind, str) or not isinstance(message, str):
                continue
            counts = seen.setdefault(kind, Counter())
            if message in counts or len(counts) < _DISTINCT:
                counts[message] += 1
    return {kind: counts.most_common(1)[0] for kind, counts in seen.items()}


def error_lines(errors: Mapping[str, int], examples: ErrorExamples) -> list[str]:
    """A line for each class counted in ``errors`` (the summary's) that has a message."""
    lines = []
    for kind, total in errors.items():
        if kind in examples:
            message, n = examples[kind]
            cut = message[:_SHOWN] + ("..." if len(message) > _SHOWN else "")
            lines.append(f"  most common {kind} error ({n} of {total}): {cut}")
    return lines
