"""Every finished request becomes metrics and one line of ``requests.jsonl``.

Lines are queued and handed to the file whole (``LineLog`` from ``loadtest/model/atomic``,
the one crash-safe writer every layer shares), once a second by the roll or when the
queue fills.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable
from pathlib import Path

import orjson

from loadtest.measure.recorders import Metrics, MetricSet
from loadtest.model.atomic import LineLog
from loadtest.model.json import JsonObject
from loadtest.model.prompt import Prompt
from loadtest.model.record import RequestRecord

__all__ = ["Accounting"]


class Accounting:
    """Counts records into ``metrics`` and writes their lines; rolls the intervals."""

    def __init__(self, metrics: Metrics, *, record_chunks: bool, record_prompts: bool) -> None:
        self.metrics = metrics
        self.t0_ns = metrics.t0_ns
        self.record_chunks = record_chunks
        self.record_prompts = record_prompts
        self.cancel_reason: str | None = None
        """Why the engine cancelled in-flight requests (``grace_expired``, ``aborted``,
        ``warmup_unneeded``, ``run_cancelled``); the error class of the records it cut short."""
        self.feeds: tuple[Callable[[RequestRecord], None], ...] = ()
        """Called with each accounted record (the hooks' ``on_record``)."""
        self._jsonl: LineLog | None = None
        self._last_roll_ns = metrics.t0_ns

    def open(self, run_dir: Path, t0_ns: int) -> None:
        """Start the clock of the intervals and open ``requests.jsonl``."""
        self.t0_ns = t0_ns
        self._last_roll_ns = t0_ns
        self._jsonl = LineLog(run_dir / "requests.jsonl")

    def close(self) -> None:
        """Write what is queued and close the file."""
        if self._jsonl is not None:
            self._jsonl.close()

    def account(self, rec: RequestRecord, prompt: Prompt, extra: JsonObject | None = None) -> None:
        """Count one finished request and write its line (``extra`` fields added)."""
        if rec.outcome == "cancelled" and rec.cancel_ns is None and self.cancel_reason:
            rec = self._why_cancelled(rec)
        self.metrics.add(rec)
        assert self._jsonl is not None, "the run has not started"
        line: JsonObject = rec.to_json(self.t0_ns)
        if extra:
            line.update(extra)
        if self.record_chunks:
            line["token_chunk_ms"] = [round((t - rec.sent_ns) / 1e6, 4) for t in rec.token_chunk_ns]
        if self.record_prompts:
            line["messages"] = list(prompt.messages)
        self._jsonl.write(orjson.dumps(line) + b"\n")
        for feed in self.feeds:
            feed(rec)

    def _why_cancelled(self, rec: RequestRecord) -> RequestRecord:
        # Only requests the engine itself cut short while their task is being cancelled:
        # a fault's cancellation (``cancel_ns`` set) keeps its own account.
        task = asyncio.current_task()
        if task is None or not task.cancelling():
            return rec
        why = {
            "grace_expired": "still in flight when the grace period after the run ended",
            "aborted": "cancelled at once by the user",
            "warmup_unneeded": "a warm-up request still open when the measured ones had ended",
        }.get(self.cancel_reason or "", "the run was cancelled from outside")
        reason = self.cancel_reason or "run_cancelled"
        return dataclasses.replace(rec, error_class=reason, error=why)

    def roll(self, now_ns: int) -> tuple[MetricSet, float, float]:
        """Close the interval ending at ``now_ns``: its set, start and length in seconds."""
        start = self._last_roll_ns
        self._last_roll_ns = now_ns
        interval = self.metrics.roll((now_ns - start) / 1e9)
        if self._jsonl is not None:
            self._jsonl.flush()
        return interval, (start - self.t0_ns) / 1e9, (now_ns - start) / 1e9
