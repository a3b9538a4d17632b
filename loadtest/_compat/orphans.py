"""Children that die with loadtest: a managed server must not outlive a killed run.

A run killed hard (SIGKILL, a CI timeout) cannot stop the llama.cpp or target servers it
started, and one left running holds its port and a core: the next run then measures a
machine it shares with a stray server. On Linux a child can ask the kernel for a signal
when its parent dies (``prctl(PR_SET_PDEATHSIG)``); elsewhere nothing is done.
"""

from __future__ import annotations

import ctypes
import signal
import sys

__all__ = ["die_with_parent"]

_PR_SET_PDEATHSIG = 1
# Loaded here, in the parent: between fork and exec the child should do as little as it can.
_LIBC = ctypes.CDLL(None, use_errno=True) if sys.platform == "linux" else None


def die_with_parent() -> None:
    """``preexec_fn``: SIGTERM this child when the process that started it dies."""
    if _LIBC is not None:
        _LIBC.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
