"""Where replayed agent sessions' time went: one tally for the run and for its rebuild.

A replay (``agent_trace.SessionReplay``) adds each session as it ends; a summary
rebuilt from a killed run's ``requests.jsonl`` (``loadtest summarize``) adds the same
sessions from their lines, which carry what the tally needs of the recording (the
call's recorded duration, the gap before it and the tools in that gap). Both build the
``agent_trace`` section here, so the two cannot say different things of one run.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import astuple, dataclass, field
from typing import TypedDict

from loadtest.model.json import JsonObject
from loadtest.model.summary import (
    AgentTraceBlock,
    AgentTraceRecorded,
    AgentTraceSession,
    AgentTraceSplit,
)

__all__ = [
    "SESSIONS_LISTED",
    "LineTally",
    "ReplayPart",
    "ReplayTally",
    "SessionTimes",
    "merge_replays",
    "tally_lines",
]

SESSIONS_LISTED = 100
"""Sessions the summary lists one by one; the totals cover them all."""
_LINE_KEYS = ("trace_id", "call", "calls", "unit", "gap_ms", "tool_ms", "recorded_ms")
"""What an agent-trace request line must carry for a rebuild to count its session."""


@dataclass(frozen=True, slots=True)
class SessionTimes:
    """One replayed session's time, split (ns); the four parts add up to ``session_ns``."""

    trace_id: str
    calls: int
    session_ns: int
    ttft_ns: int
    decode_ns: int
    tools_ns: int
    recorded_ns: int
    recorded_model_ns: int
    gap_lag_ns_max: int
    end_ns: int
    """When its last call ended, ns from the run's start: the order sessions are listed in,
    one process's or merged over workers (each worker's from its own start; they start
    together), as a rebuild lists them from the lines' ``end_ms``."""
    reasoning_ns: int = 0
    """Of ``decode_ns``: each call's first reasoning token to its first answer token."""

    @property
    def other_ns(self) -> int:
        """Session time outside model calls and tools: agent work and lag."""
        return self.session_ns - self.ttft_ns - self.decode_ns - self.tools_ns


class ReplayPart(TypedDict):
    """One process's replay tally, encoded (a worker's, for the parent to add)."""

    sessions_in_trace: int
    completed: int
    failed: int
    calls: int
    sums: list[int]
    """Session, TTFT, decode, tools, recorded and reasoning time (ns), over completed
    sessions."""
    recorded_model: int
    lag_max: int | None
    listed: list[list[int | str]]
    """``SessionTimes`` as lists, field by field."""


@dataclass(slots=True)
class ReplayTally:
    """What the ``agent_trace`` block is made of: counters, sums of ns and a maximum,
    so that workers' tallies add up exactly (``add``) and the shares are computed once,
    on the sum (``block``)."""

    sessions_in_trace: int
    completed: int = 0
    failed: int = 0
    calls: int = 0
    sums: list[int] = field(default_factory=lambda: [0, 0, 0, 0, 0, 0])
    recorded_model: int = 0
    lag_max: int | None = None
    listed: list[SessionTimes] = field(default_factory=list)

    def record(self, t: SessionTimes) -> None:
        """One completed measured session."""
        self.completed += 1
        self.calls += t.calls
        parts = (t.session_ns, t.ttft_ns, t.decode_ns, t.tools_ns, t.recorded_ns, t.reasoning_ns)
        for i, v in enumerate(parts):
            self.sums[i] += v
        self.recorded_model += t.recorded_model_ns
        self.lag_max = max(self.lag_max or 0, t.gap_lag_ns_max)
        if len(self.listed) < SESSIONS_LISTED:
            self.listed.append(t)

    def add(self, other: ReplayTally) -> None:
        """Another process's tally (its share of the sessions): everything summed, the
        lag's maximum kept, the listed sessions the first ``SESSIONS_LISTED`` of both to
        end (worker by worker, the listing was worker 0's first, unlike a one-process
        run's or a rebuild's, and past the limit had none of worker 1's)."""
        self.sessions_in_trace += other.sessions_in_trace
        self.completed += other.completed
        self.failed += other.failed
        self.calls += other.calls
        self.sums = [a + b for a, b in zip(self.sums, other.sums, strict=True)]
        self.recorded_model += other.recorded_model
        if other.lag_max is not None:
            self.lag_max = max(self.lag_max or 0, other.lag_max)
        both = sorted([*self.listed, *other.listed], key=lambda t: t.end_ns)
        self.listed = both[:SESSIONS_LISTED]

    def encode(self) -> ReplayPart:
        """As JSON (a worker's result file or a Ray task's answer)."""
        return {
            "sessions_in_trace": self.sessions_in_trace,
            "completed": self.completed,
            "failed": self.failed,
            "calls": self.calls,
            "sums": list(self.sums),
            "recorded_model": self.recorded_model,
            "lag_max": self.lag_max,
            "listed": [list(astuple(t)) for t in self.listed],
        }

    @classmethod
    def decode(cls, part: ReplayPart) -> ReplayTally:
        """``encode``'s inverse."""
        return cls(
            sessions_in_trace=part["sessions_in_trace"],
            completed=part["completed"],
            failed=part["failed"],
            calls=part["calls"],
            sums=list(part["sums"]),
            recorded_model=part["recorded_model"],
            lag_max=part["lag_max"],
            listed=[_decoded(row) for row in part["listed"]],
        )

    def block(self) -> AgentTraceBlock:
        """The ``agent_trace`` section of summary.json."""
        session, ttft, decode, tools, recorded, reasoning = self.sums
        done = self.completed > 0 and session > 0
        total: AgentTraceSplit | None = (
            _split(session, ttft, decode, tools, session - ttft - decode - tools, reasoning)
            if done
            else None
        )
        rec_tools = tools  # the replay waits the recorded tool time, as it was
        rec_block: AgentTraceRecorded | None = (
            {
                "session_ms": _ms(recorded),
                "model_ms": _ms(self.recorded_model),
                "tools_ms": _ms(rec_tools),
                "other_ms": _ms(recorded - self.recorded_model - rec_tools),
            }
            if done
            else None
        )
        block: AgentTraceBlock = {
            "sessions_in_trace": self.sessions_in_trace,
            "replayed": self.completed + self.failed,
            "completed": self.completed,
            "failed": self.failed,
            "calls": self.calls,
            "total": total,
            "recorded": rec_block,
            "decode_share": round(decode / session, 4) if done else None,
            "generation_share": round((ttft + decode) / session, 4) if done else None,
            "gap_lag_ms_max": _ms(self.lag_max) if self.lag_max is not None else None,
            "sessions": [_row(t) for t in self.listed],
            "sessions_listed": len(self.listed),
        }
        if done and reasoning:
            block["reasoning_share"] = round(reasoning / session, 4)
        return block


def merge_replays(parts: Sequence[ReplayPart]) -> AgentTraceBlock:
    """The ``agent_trace`` block of a run with workers, from each worker's tally."""
    merged = ReplayTally(sessions_in_trace=0)
    for part in parts:
        merged.add(ReplayTally.decode(part))
    return merged.block()


def _decoded(row: list[int | str]) -> SessionTimes:
    trace_id, *ns = row
    return SessionTimes(str(trace_id), *(int(v) for v in ns))


@dataclass(frozen=True, slots=True)
class LineTally:
    """Sessions counted back from request lines (a rebuild)."""

    tally: ReplayTally
    traces: int
    """Trace ids the lines name: the trace itself is not read back."""
    in_flight: int
    """Sessions cut short by the kill (some calls done, none failed): not counted."""
    unreadable: int
    """Sessions whose lines lack what a rebuild needs (a run of an older loadtest)."""


def _ns(ms: object) -> int:
    return round(float(ms) * 1e6) if isinstance(ms, int | float) else 0


def tally_lines(rows: Iterable[JsonObject]) -> LineTally:
    """The sessions of an agent-trace run's request lines, counted as the replay did.

    Warm-up sessions are left out; a session with a failed call is failed; one with all
    its calls answered is completed, in the order the sessions ended.
    """
    groups: dict[tuple[str, int, int], list[JsonObject]] = {}
    for r in rows:
        if isinstance(r.get("trace_id"), str) and not r.get("warmup"):
            # A worker numbers its units from 0: the merged lines' ``worker`` tells apart
            # two workers' unit 0.
            key = (r["trace_id"], int(r.get("worker") or 0), int(r.get("unit") or 0))
            groups.setdefault(key, []).append(r)
    tally = ReplayTally(sessions_in_trace=0)
    done: list[SessionTimes] = []
    in_flight = unreadable = 0
    for lines in groups.values():
        if not all(all(k in r for k in _LINE_KEYS) for r in lines):
            unreadable += 1
            continue
        lines.sort(key=lambda r: int(r["call"]))
        if any(r.get("outcome") != "ok" for r in lines):
            tally.failed += 1
        elif [int(r["call"]) for r in lines] == list(range(1, int(lines[0]["calls"]) + 1)):
            done.append(_times(lines))
        else:
            in_flight += 1
    for t in sorted(done, key=lambda t: t.end_ns):
        tally.record(t)
    traces = len({k[0] for k in groups})
    tally.sessions_in_trace = traces  # what the lines name: the trace is not read back
    return LineTally(tally, traces, in_flight, unreadable)


def _times(lines: list[JsonObject]) -> SessionTimes:
    ttft = decode = lag = reasoning = 0
    for r in lines:
        reasoning += _ns(r.get("reasoning_ms"))
        sent, end = _ns(r.get("sent_ms")), _ns(r.get("end_ms"))
        first = _ns(r["first_token_ms"]) if r.get("first_token_ms") is not None else end
        ttft += first - sent
        decode += end - first
        lag = max(lag, sent - _ns(r["intended_ms"]))
    recorded_model = sum(_ns(r["recorded_ms"]) for r in lines)
    return SessionTimes(
        trace_id=str(lines[0]["trace_id"]),
        calls=len(lines),
        session_ns=_ns(lines[-1]["end_ms"]) - _ns(lines[0]["intended_ms"]),
        ttft_ns=ttft,
        decode_ns=decode,
        tools_ns=sum(_ns(r["tool_ms"]) for r in lines[1:]),
        recorded_ns=recorded_model + sum(_ns(r["gap_ms"]) for r in lines),
        recorded_model_ns=recorded_model,
        gap_lag_ns_max=lag,
        end_ns=_ns(lines[-1]["end_ms"]),
        reasoning_ns=reasoning,
    )


def _ms(ns: int) -> float:
    return round(ns / 1e6, 3)


def _split(
    session: int, ttft: int, decode: int, tools: int, other: int, reasoning: int
) -> AgentTraceSplit:
    split: AgentTraceSplit = {
        "session_ms": _ms(session),
        "ttft_ms": _ms(ttft),
        "decode_ms": _ms(decode),
        "tools_ms": _ms(tools),
        "other_ms": _ms(other),
    }
    if reasoning:
        split["reasoning_ms"] = _ms(reasoning)
    return split


def _row(t: SessionTimes) -> AgentTraceSession:
    return {
        **_split(t.session_ns, t.ttft_ns, t.decode_ns, t.tools_ns, t.other_ns, t.reasoning_ns),
        "trace_id": t.trace_id,
        "calls": t.calls,
        "recorded_session_ms": _ms(t.recorded_ns),
        "gap_lag_ms_max": _ms(t.gap_lag_ns_max),
    }
