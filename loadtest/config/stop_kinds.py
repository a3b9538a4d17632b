"""loadtest's own stop rules, registered as a third party's are (``loadtest.stops``).

``errors``: the load ends once a share of its measured requests has failed, after at
least ``after`` of them ended (a first error is no trend). A stress run against an
endpoint that has fallen over learns nothing more in its remaining minutes, and a CI
gate fails sooner; the run's figures up to then are kept and judged as any run's. Under
``--workers`` each process judges and ends its own load (the others go on to their own
evidence or the run's bound).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from loadtest.config.stop_rules import RunSoFar
from loadtest.config.toml_tables import Table

__all__ = ["ERRORS"]


@dataclass(frozen=True, slots=True)
class ErrorBudget:
    """``errors``'s settings."""

    share: float
    """Stop once failed / ended reaches this (0 < share <= 1)."""
    after: int
    """... and at least this many measured requests have ended."""


class Errors:
    """The ``errors`` rule: a share of failed requests ends the run, failing it."""

    keys = frozenset({"share", "after"})
    fails = True

    def parse(self, table: Table) -> ErrorBudget:
        share = table.number("share", None, strict=True)
        if share is None or not 0 < share <= 1:
            raise table.fail("share", f"expected a share of requests in (0, 1], got {share!r}")
        after = table.integer("after", 20, minimum=1)
        assert after is not None
        return ErrorBudget(share, after)

    def share(self, settings: ErrorBudget, worker: int, workers: int) -> ErrorBudget:
        # The share is scale-free; each worker waits for its part of the evidence.
        return ErrorBudget(settings.share, max(1, math.ceil(settings.after / workers)))

    def reached(self, settings: ErrorBudget, seen: RunSoFar) -> str | None:
        if seen.ended < settings.after or seen.failed < settings.share * seen.ended:
            return None
        return (
            f"errors: {seen.failed} of {seen.ended} measured requests failed "
            f"({seen.failed / seen.ended:.0%} >= {settings.share:.0%})"
        )


ERRORS = Errors()
