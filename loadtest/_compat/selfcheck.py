"""Every private-API hook's self-check in one call (see ``loadtest._compat.checks``)."""

from __future__ import annotations

import functools

from loadtest._compat import arrivals, eager_send, hdr_internals, kernel_stamps
from loadtest._compat.checks import CompatCheck, warn_once

__all__ = ["fallbacks", "report"]


@functools.cache
def report() -> tuple[CompatCheck, ...]:
    """Every hook's self-check, run once per process (failed ones logged)."""
    checks = (
        kernel_stamps.self_check(),
        arrivals.self_check(),
        eager_send.self_check(),
        hdr_internals.self_check(),
    )
    for check in checks:
        warn_once(check)
    return checks


def fallbacks() -> tuple[str, ...]:
    """Names of the hooks that fell back in this process (empty: all installed)."""
    return tuple(c.name for c in report() if not c.ok)
