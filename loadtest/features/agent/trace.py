"""Chrome trace event JSON (``trace.json``): one track per task, one slice per span.

Opens in Perfetto (ui.perfetto.dev) and chrome://tracing. It is the JSON Array Format
of the Trace Event Format, written as tasks end; the closing ``]`` is written last, and
the format allows it to be missing, so a killed run still leaves a readable trace.
"""

from __future__ import annotations

from pathlib import Path
from typing import NotRequired, TypedDict

import orjson

from loadtest.features.agent.session import TaskRecord
from loadtest.model.atomic import LineLog

__all__ = ["TraceEvent", "TraceWriter", "trace_events"]


class TraceEvent(TypedDict):
    """One event of the Trace Event Format: a metadata (``M``) or complete (``X``) event."""

    ph: str
    name: str
    pid: int
    tid: int
    args: dict[str, str | int | None]
    cat: NotRequired[str]
    ts: NotRequired[float]
    """Start, µs from the run's start."""
    dur: NotRequired[float]
    """Duration, µs."""


def trace_events(rec: TaskRecord, t0_ns: int) -> list[TraceEvent]:
    """The events of one task: a track name, the task slice and its spans (µs)."""

    def us(ns: int) -> float:
        return round((ns - t0_ns) / 1e3, 3)

    tid = rec.index
    events: list[TraceEvent] = [
        {
            "ph": "M",
            "name": "thread_name",
            "pid": 1,
            "tid": tid,
            "args": {"name": f"task {rec.index} {rec.task_id}"},
        },
        {
            "ph": "X",
            "name": f"task {rec.task_id}",
            "cat": "task",
            "pid": 1,
            "tid": tid,
            "ts": us(rec.start_ns),
            "dur": round(rec.task_ns / 1e3, 3),
            "args": {
                "outcome": rec.outcome,
                "error_class": rec.error_class,
                "steps": rec.steps,
                "retries": rec.retries,
                "category": rec.category,
            },
        },
    ]
    for s in rec.spans:
        events.append(
            {
                "ph": "X",
                "name": s.name,
                "cat": s.part,
                "pid": 1,
                "tid": tid,
                "ts": us(s.start_ns),
                "dur": round((s.end_ns - s.start_ns) / 1e3, 3),
                "args": {"step": s.step, "attempt": s.attempt},
            }
        )
    return events


class TraceWriter:
    """Appends each finished task's events to ``trace.json``."""

    def __init__(self, path: Path, t0_ns: int, max_tasks: int = 10_000) -> None:
        self.path = path
        self.t0_ns = t0_ns
        self.max_tasks = max_tasks
        """Tasks traced at most (the summary's shares cover every task)."""
        self.tasks = 0
        self._log = LineLog(path)
        self._log.write(b"[\n")
        self._first = True

    def add(self, rec: TaskRecord) -> None:
        """Write one task's events (beyond ``max_tasks``, nothing)."""
        if self.tasks >= self.max_tasks:
            return
        self.tasks += 1
        for event in trace_events(rec, self.t0_ns):
            self._log.write((b"" if self._first else b",") + orjson.dumps(event) + b"\n")
            self._first = False

    def flush(self) -> None:
        """Hand queued events to the file."""
        self._log.flush()

    def close(self) -> None:
        """Close the array and the file."""
        self._log.write(b"]\n")
        self._log.close()
