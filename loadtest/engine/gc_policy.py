"""Process-wide GC policy as an opt-in hook: the CLI attaches it, a library user may not.

The engine never tunes the collector by itself: the host process owns that policy.
``QuietGc`` applies ``loadtest._compat.quiet_gc`` for the length of one run (before its
clock starts) and freezes each second's survivors from the run's tick.
"""

from __future__ import annotations

from contextlib import ExitStack

from loadtest._compat.quiet_gc import quiet_gc, settle
from loadtest.engine.hooks import RunHook

__all__ = ["QuietGc"]


class QuietGc(RunHook):
    """Quiet the cyclic collector while the run goes (see ``quiet_gc``)."""

    def __init__(self) -> None:
        self._stack = ExitStack()

    def before_start(self) -> None:
        """Freeze what exists and raise the thresholds, before ``t0``."""
        self._stack.enter_context(quiet_gc())

    def on_tick(self, now_ns: int) -> None:
        """Freeze what survived the second."""
        settle()

    async def on_finish(self) -> None:
        """Give the collector back its settings."""
        self._stack.close()
