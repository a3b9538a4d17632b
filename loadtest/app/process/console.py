"""What a run tells its user while it goes: notes, progress lines, the stop notice.

Everything goes through the ``loadtest`` logger (the CLI decides where it ends up and how
much of it: ``-v``/``-q``); each message is worded here once, for one process or many.
Whether the dashboard is shown is decided here too.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["Progress", "log", "say", "stop_notice", "use_tui"]

log = logging.getLogger("loadtest")

STOP_NOTICE = "\nstopping: waiting for in-flight requests (again to cancel them)"


@dataclass(frozen=True, slots=True)
class Progress:
    """The counters of one progress line (one runner, or workers added up)."""

    sent: int
    ok: int
    failed: int
    in_flight: int
    requests_per_s: float
    """Measured requests completed per second over the last interval (0: none)."""
    output_tokens_per_s: float
    elapsed_s: float | None = None
    """Seconds since the start; None where workers' own clocks are not compared."""
    workers: int = 1
    ttft_ms: tuple[float, float] | None = None
    """TTFT p50 and p99 so far; None where none was measured yet (or not known here)."""
    ttft_known: bool = False
    """Whether this line reports TTFT at all (one process: workers send only counts)."""
    warmup: bool = False
    """Still warming up: nothing is measured yet, so there are no rates to show."""
    label: str = ""
    """Which run the line belongs to, where several run in turn (``ab``: ``A 1/2``)."""

    def line(self) -> str:
        """The line as printed every 5 s on stderr.

        Where there is no figure, the line says ``no data``, as the summary does: a rate
        of 0.0 req/s or a TTFT of 0.0 ms would read as measured.
        """
        head = (
            f"[{self.elapsed_s:6.1f}s]"
            if self.elapsed_s is not None
            else f"[{self.workers} workers]"
        )
        if self.label:
            head = f"{self.label} {head}"
        text = (
            f"{head} sent {self.sent} ok {self.ok} failed {self.failed} "
            f"in flight {self.in_flight}  "
        )
        if self.warmup:
            text += "warming up, not measured yet"
        elif self.requests_per_s > 0:
            # Of the last interval, not the run: a burst read as the run's rate.
            text += (
                f"{self.requests_per_s:.1f} req/s {self.output_tokens_per_s:.0f} tok/s (last 1 s)"
            )
        else:
            # Rates count completed requests, so they are not a zero: they are not known.
            text += "req/s no data (none completed in the last second)"
        if self.ttft_known and not self.warmup:
            if self.ttft_ms is None:
                text += "  TTFT no data"
            else:
                p50, p99 = self.ttft_ms
                text += f"  TTFT p50 {p50:.1f} ms p99 {p99:.1f} ms"
        return text


def say(notes: Sequence[str], *, warn: bool = False, label: str = "") -> None:
    """Notes before the load starts (which endpoint, which defaults were taken).

    ``warn`` for what weakens the run (no TLS check): said even with ``-q``, and by
    Python's last-resort handler when no one set logging up (a library caller).
    ``label`` goes first, as on the run's progress lines.
    """
    for n in notes:
        log.log(logging.WARNING if warn else logging.INFO, "%s", f"{label} {n}" if label else n)


def stop_notice() -> None:
    """The first Ctrl-C (or SIGTERM): say what happens now and what a second one does."""
    log.warning("%s", STOP_NOTICE)


def use_tui(wanted: bool) -> bool:
    """The dashboard only when asked for and both ends are a terminal."""
    return wanted and sys.stdout.isatty() and sys.stdin.isatty()
