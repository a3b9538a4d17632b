"""Start-up self-checks of every private-API hook, and what fell back.

Each hook in ``loadtest._compat`` leans on internals no library promises to keep:
asyncio's socket transport (``kernel_stamps``), aiohttp's connector and response
protocol (``arrivals``), aiohttp's request writer (``eager_send``), hdrh's counts layout
(``hdr_internals``). Each has a ``self_check`` that looks for exactly the parts it uses
(and, where cheap, runs them against the public path); a hook whose check fails is not
installed and loadtest measures the plain way. The fallback is visible: one logged
warning per hook, and ``loadtest._compat.selfcheck.fallbacks()`` for the run's records.
pyproject.toml pins the versions the checks were verified against, and the test suite
asserts every check passes, so an upgrade that breaks an assumption turns CI red
instead of silently degrading.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

__all__ = ["CompatCheck", "warn_once"]

log = logging.getLogger("loadtest.compat")


@dataclass(frozen=True, slots=True)
class CompatCheck:
    """The verdict of one hook's self-check."""

    name: str
    ok: bool
    detail: str
    """What was checked (when ok), or what is missing or different (when not)."""


_warned: set[str] = set()


def warn_once(check: CompatCheck) -> None:
    """Log a failed check once per process: the hook falls back, and says so."""
    if not check.ok and check.name not in _warned:
        _warned.add(check.name)
        log.warning("%s: falling back (%s)", check.name, check.detail)
