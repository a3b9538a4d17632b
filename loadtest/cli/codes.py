"""The exit codes of the command line (a module of constants: ``--help`` imports it)."""

from __future__ import annotations

__all__ = [
    "EXIT_ERROR",
    "EXIT_GATE",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_SLO_MISSED",
    "EXIT_USAGE",
]

EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130
EXIT_SLO_MISSED = 1
"""A completed run that missed an SLO: 1, as CI gates expect of a failed check."""
EXIT_GATE = 1
"""``ab``: a gate failed (a fault window, a stop rule, ``--fail-on slower``)."""
