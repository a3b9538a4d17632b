"""p-values as kept in files and printed for people, on the side of ``ALPHA`` they fell.

A figure rounded to the nearest can cross the line it is judged by: a Holm p of 0.049996
called a line "faster" under the rule "p under 0.05", then was kept as 0.05 and printed
as ``0.0500``. Kept rounded down and printed with ``< 0.05`` where four decimals would
reach it, a p-value never reads as the opposite of the verdict it gave.
"""

from __future__ import annotations

import math
from decimal import ROUND_FLOOR, Decimal

__all__ = ["ALPHA", "format_p", "round_p"]

ALPHA = 0.05
"""The family-wise error rate of one comparison, and 1 - the intervals' confidence."""


def round_p(p: float | None) -> float | None:
    """A p-value kept to 4 significant digits, rounded down.

    Six decimals would print a tiny p-value as 0, so its magnitude is kept. Down, not to
    the nearest: a Holm p of 0.049996 was kept as 0.05 beside a line it made "faster"
    under the rule "p under 0.05"; rounded down it stays on its side of 0.05 (and of
    every 4-digit figure)."""
    if p is None or not math.isfinite(p) or p == 0:
        return None if p is None else float(p)
    d = Decimal(repr(float(p)))  # repr: the shortest decimal that is this float
    return float(d.quantize(Decimal(1).scaleb(d.adjusted() - 3), rounding=ROUND_FLOOR))


def format_p(p: float | None) -> str:
    """A p-value for people: ``< 0.0001`` rather than a rounded ``0``, and ``< 0.05``
    where four decimals would round one under ``ALPHA`` up to it (``0.0500`` was
    printed beside a line called faster because its p was under 0.05)."""
    if p is None:
        return "-"
    if p < 1e-4:
        return "< 0.0001"
    shown = f"{p:.4f}"
    return f"< {ALPHA:g}" if p < ALPHA <= float(shown) else shown
