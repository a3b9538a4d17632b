"""How a command that judged something ends: its exit code, and a line saying why.

The reasons come from ``report.exit_reasons``; a command with any exits ``code`` and
says so last, on stderr (where errors go; the results stay alone on stdout), so a CI
log shows why a gate failed without reading the whole table.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from loadtest.report.exit_reasons import exit_line

__all__ = ["closing"]


def closing(reasons: Sequence[str], code: int) -> int:
    """``code`` with the ``exit N: ...`` line when there are ``reasons``, else 0."""
    if not reasons:
        return 0
    sys.stdout.flush()  # the line comes after the table, also where both go to one file
    print(exit_line(code, reasons), file=sys.stderr)
    return code
