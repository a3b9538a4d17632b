"""Plain text as every block's render and the run's table lay it out: ``WIDTH``
columns, so that an 80x24 terminal shows each line once, a line of ``name value``
groups never split inside a group, and prose wrapped at its spaces."""

from __future__ import annotations

import textwrap
from collections.abc import Iterable, Sequence

__all__ = ["WIDTH", "fit", "packed"]

WIDTH = 80
"""Columns of the narrowest terminal the table is laid out for."""


def packed(parts: Sequence[str], sep: str = "  ", width: int = WIDTH) -> list[str]:
    """``parts`` joined by ``sep``, as many to a line as fit; the next lines indented two
    more than the first.

    For a line of ``name value`` groups: a group is never split across two lines.
    """
    if not parts:
        return []
    lines = [parts[0]]
    indent = " " * (len(parts[0]) - len(parts[0].lstrip(" ")) + 2)
    for part in parts[1:]:
        if len(lines[-1]) + len(sep) + len(part) <= width:
            lines[-1] += sep + part
        else:
            lines[-1] += sep.rstrip()
            lines.append(indent + part)
    return lines


def fit(lines: Iterable[str], width: int = WIDTH) -> str:
    """``lines`` joined, each one longer than ``width`` wrapped at its spaces.

    A wrapped line goes on indented two more than its own indent, so it reads as one.
    """
    out: list[str] = []
    for line in lines:
        if len(line) <= width:
            out.append(line)
            continue
        indent = " " * (len(line) - len(line.lstrip(" ")))
        out += textwrap.wrap(
            line.lstrip(" "),
            width,
            initial_indent=indent,
            subsequent_indent=indent + "  ",
            break_long_words=False,
            break_on_hyphens=False,
        )
    return "\n".join(out)
