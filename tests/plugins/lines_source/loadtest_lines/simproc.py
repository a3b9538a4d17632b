"""An ``ab`` side type plugin: ``simproc:fast`` or ``simproc:slow``, a server process
that ab starts, measures and stops for every run of the side.

The server is loadtest's simulator run as a command (``python -m loadtest sim``), as any
engine's server would be: a third party names its own command, the model it serves and
how long it may take to stop; loadtest finds a free port, times the cold start, samples
its memory through the run, stops it and writes ``deployment.json``. ``fast`` writes a
token a millisecond, ``slow`` one every 8.
"""

from __future__ import annotations

import sys

from loadtest.plugins import Launch, UsageError

_ITL_MS = {"fast": 1.0, "slow": 8.0}


class SimProc:
    """``simproc:fast|slow``."""

    start_cost = "a simulator process's start"

    def parse(self, mode: str, given: str) -> float:
        if mode not in _ITL_MS:
            raise UsageError(f"{given!r}: a simproc side is simproc:fast or simproc:slow")
        return _ITL_MS[mode]

    def launch(self, settings: float, host: str, port: int) -> Launch:
        command = (sys.executable, "-m", "loadtest", "sim", "--host", host, "--port", str(port))
        return Launch((*command, "--itl-ms", str(settings), "--ttft-ms", "2"), "sim-llm", 5.0)


SIMPROC = SimProc()
