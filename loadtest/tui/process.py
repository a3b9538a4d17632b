"""The dashboard in a process of its own, fed by the run's process (``DashboardFeed``).

A Textual repaint is Python: tens of milliseconds of it twice a second. In the
run's event loop that delay was every open stream's client lag; in a thread of the
run's process it would still hold the interpreter lock the loop needs. So the
dashboard is ``python -m loadtest.tui`` beside the run, on the terminal both share, and
the two talk over a socket pair (``tui.link``). Its process runs at a lower priority
(``NICE``): on a machine with no core to spare, the run and the endpoint come first
and the dashboard draws what time is left. It ignores SIGINT: in Textual's raw mode
Ctrl-C is a key, and before that it belongs to the run, as without a dashboard.

While the dashboard owns the terminal, the run's log lines are held and printed once
it has closed, rather than written across the screen.
"""

from __future__ import annotations

import logging
import os
import socket
import subprocess
import sys
from pathlib import Path
from types import TracebackType

from loadtest.tui.feed import REFRESH_S, DashboardFeed

__all__ = ["CLOSE_S", "NICE", "DashboardProcess"]

NICE = 19
"""How much lower the dashboard's process runs than the run's (``os.nice``)."""
CLOSE_S = 10.0
"""How long the dashboard may take to close after the run's last state."""

log = logging.getLogger("loadtest")


class DashboardProcess:
    """Starts the dashboard's process on entry, gives the run's side of the link
    (``DashboardFeed``), and on exit waits for the dashboard to close.

    ``headless``: (columns, rows) of a screen drawn but shown nowhere (tests and the
    benchmark); ``last_screen`` then saves its last frame as an SVG there. ``nice``: how
    much lower than the run the dashboard runs; ``close_s``: how long it may take to
    close. A test on a machine whose cores are all busy gives 0 and more: at nice 19
    beside busy processes the dashboard gets a sliver of a core (docs/benchmarks.md), too
    little to start Textual and draw the run's end within ``CLOSE_S``.
    """

    def __init__(
        self,
        *,
        headless: tuple[int, int] | None = None,
        last_screen: Path | None = None,
        refresh_s: float = REFRESH_S,
        nice: int = NICE,
        close_s: float = CLOSE_S,
    ) -> None:
        self.headless = headless
        self.nice = nice
        self.close_s = close_s
        self.last_screen = last_screen
        self.refresh_s = refresh_s
        self.returncode: int | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._sock: socket.socket | None = None
        self._held: _HeldLogs | None = None

    def __enter__(self) -> DashboardFeed:
        ours, theirs = socket.socketpair()
        cmd = [sys.executable, "-m", "loadtest.tui", "--link", str(theirs.fileno())]
        cmd += ["--nice", str(self.nice)]
        if self.headless is not None:
            cmd += ["--headless", "{}x{}".format(*self.headless)]
        if self.last_screen is not None:
            cmd += ["--last-screen", str(self.last_screen)]
        # The same loadtest as this process's, wherever that was imported from.
        root = str(Path(__file__).resolve().parents[2])
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
        try:
            self._proc = subprocess.Popen(cmd, pass_fds=(theirs.fileno(),), env=env)
        finally:
            theirs.close()
        self._sock = ours
        if self.headless is None:
            self._held = _HeldLogs()
        return DashboardFeed(ours, self.refresh_s, self.close_s)

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        assert self._proc is not None
        assert self._sock is not None
        self._sock.close()  # the dashboard closes when its link does
        try:
            self.returncode = self._proc.wait(timeout=self.close_s)
        except subprocess.TimeoutExpired:
            log.warning("the dashboard did not close within %.0f s; stopping it", self.close_s)
            self._proc.terminate()
            self.returncode = self._proc.wait(timeout=CLOSE_S)
        finally:
            if self._held is not None:
                self._held.release()
        if self.returncode:
            log.warning("the dashboard's process ended with exit code %s", self.returncode)


class _HeldLogs(logging.Handler):
    """Takes the ``loadtest`` logger's records in place of its handlers until released."""

    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []
        self._logger = logging.getLogger("loadtest")
        self._handlers = list(self._logger.handlers)
        self._propagate = self._logger.propagate
        self._logger.handlers = [self]
        self._logger.propagate = False

    def emit(self, record: logging.LogRecord) -> None:
        """Keep the record for later."""
        self.records.append(record)

    def release(self) -> None:
        """Put the handlers back and hand them what was held."""
        self._logger.handlers = self._handlers
        self._logger.propagate = self._propagate
        for record in self.records:
            self._logger.handle(record)
