"""The process's one fork server (multiprocessing's), shared by everything it forks.

Local workers and the built-in simulators it starts after the first are forked from it
rather than started as fresh interpreters: what they import is imported once, in the
server, before its first fork. multiprocessing keeps one fork server per process and
reads its preload list when it starts it, so every caller adds its modules here, and
the list grows until then (a caller whose modules came too late imports them itself).
"""

from __future__ import annotations

import multiprocessing
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    # Typing only: ForkServerContext exists only where the platform has a fork server.
    from multiprocessing.context import ForkServerContext

__all__ = ["SIM_PRELOAD", "fork_server"]

SIM_PRELOAD = ("loadtest.sim.launch", "loadtest.sim.process")
"""What a forked built-in simulator runs (named here, imported by the server only)."""

_PRELOAD: list[str] = []


def fork_server(*modules: str) -> ForkServerContext | None:
    """The fork server's context, ``modules`` added to what it preloads if it has not
    started yet; None where the platform has no fork server."""
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return None
    _PRELOAD.extend(m for m in modules if m not in _PRELOAD)
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(list(_PRELOAD))
    return ctx
