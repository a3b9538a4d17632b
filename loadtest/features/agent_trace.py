"""Recorded agent sessions replayed as they happened, and where their time went.

A unit of load is one session of an ``agent-trace`` source. Each model call goes out
when its predecessor's answer has arrived plus the recorded non-model time between them
(tool runs and the agent's own work), so a faster model shortens the session as it would
in production, while the tools take what they took. A call sends the recorded messages
where the trace captured them, else a prompt cut to the recorded input length, and asks
for the recorded output length exactly (``ignore_eos``).

Session time splits into TTFT, decode, tools (the recorded tool gaps) and other (the
recorded agent work, plus the driver's lag): the four add up to the session time by
construction, and decode's share of it is the most a decode speedup can save.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import astuple, dataclass, field, replace
from pathlib import Path
from typing import TypedDict

from loadtest.config.scenario import Scenario
from loadtest.datasets.otel import RecordedSession
from loadtest.datasets.tokenizer import Tokenizer
from loadtest.datasets.trace import TraceEntry, trace_prompts
from loadtest.engine.hooks import HookResult, RunContext, RunHook
from loadtest.engine.request_unit import prompt_body, raise_if_cancelling
from loadtest.model.prompt import Prompt
from loadtest.model.summary import (
    AgentTraceBlock,
    AgentTraceRecorded,
    AgentTraceSession,
    AgentTraceSplit,
)

__all__ = [
    "SESSIONS_LISTED",
    "ReplayPart",
    "ReplayTally",
    "SessionReplay",
    "SessionTimes",
    "merge_replays",
    "session_prompts",
]

SESSIONS_LISTED = 100
"""Sessions the summary lists one by one; the totals cover them all."""
_perf = time.perf_counter_ns


def session_prompts(
    sessions: list[RecordedSession], tok: Tokenizer | None, origin: str
) -> list[tuple[Prompt, ...]]:
    """Each session's calls as prompts, in order: recorded messages, or exact lengths."""
    entries = [
        TraceEntry(
            line=k,
            timestamp_ms=0.0,
            input_length=c.input_tokens,
            output_length=c.output_tokens,
            messages=c.messages,
        )
        for s in sessions
        for k, c in enumerate(s.calls)
    ]
    flat = iter(trace_prompts(entries, tok, 0, origin))
    out = []
    for s in sessions:
        prompts = []
        for k, c in enumerate(s.calls):
            p = next(flat)
            sampling = {**c.settings, **(p.sampling or {})}
            prompts.append(
                replace(
                    p,
                    id=f"{s.trace_id}#{k + 1}",
                    source="agent-trace",
                    category="agent-trace",
                    sampling=sampling,
                )
            )
        out.append(tuple(prompts))
    return out


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
    gap_lag_ns_max: int

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
    """Session, TTFT, decode, tools and recorded time (ns), over completed sessions."""
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
    sums: list[int] = field(default_factory=lambda: [0, 0, 0, 0, 0])
    recorded_model: int = 0
    lag_max: int | None = None
    listed: list[SessionTimes] = field(default_factory=list)

    def record(self, t: SessionTimes, session: RecordedSession) -> None:
        """One completed measured session."""
        self.completed += 1
        self.calls += t.calls
        for i, v in enumerate((t.session_ns, t.ttft_ns, t.decode_ns, t.tools_ns, t.recorded_ns)):
            self.sums[i] += v
        self.recorded_model += session.model_ns
        self.lag_max = max(self.lag_max or 0, t.gap_lag_ns_max)
        if len(self.listed) < SESSIONS_LISTED:
            self.listed.append(t)

    def add(self, other: ReplayTally) -> None:
        """Another process's tally (its share of the sessions): everything summed, the
        lag's maximum kept, the listed sessions appended up to ``SESSIONS_LISTED``."""
        self.sessions_in_trace += other.sessions_in_trace
        self.completed += other.completed
        self.failed += other.failed
        self.calls += other.calls
        self.sums = [a + b for a, b in zip(self.sums, other.sums, strict=True)]
        self.recorded_model += other.recorded_model
        if other.lag_max is not None:
            self.lag_max = max(self.lag_max or 0, other.lag_max)
        self.listed.extend(other.listed[: SESSIONS_LISTED - len(self.listed)])

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
            listed=[_times(row) for row in part["listed"]],
        )

    def block(self) -> AgentTraceBlock:
        """The ``agent_trace`` section of summary.json."""
        session, ttft, decode, tools, recorded = self.sums
        done = self.completed > 0 and session > 0
        total: AgentTraceSplit | None = (
            _split(session, ttft, decode, tools, session - ttft - decode - tools) if done else None
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
        return {
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


def merge_replays(parts: Sequence[ReplayPart]) -> AgentTraceBlock:
    """The ``agent_trace`` block of a run with workers, from each worker's tally."""
    merged = ReplayTally(sessions_in_trace=0)
    for part in parts:
        merged.add(ReplayTally.decode(part))
    return merged.block()


class SessionReplay(RunHook):
    """Replays sessions: unit ``i`` is session ``i`` (mod their number)."""

    def __init__(
        self,
        scenario: Scenario,
        model: str,
        sessions: list[RecordedSession],
        prompts: list[tuple[Prompt, ...]],
        numbers: Sequence[int] | None = None,
    ) -> None:
        """``numbers``: each session's place in the whole trace (a worker replays every
        N-th; by default their own places)."""
        self._scenario = scenario
        self._model = model
        self._sessions = sessions
        self._prompts = prompts
        self._numbers = numbers if numbers is not None else range(len(sessions))
        self._requests = 0
        self.tally = ReplayTally(sessions_in_trace=len(sessions))

    async def run_unit(self, ctx: RunContext, index: int, intended_ns: int) -> float | None:
        """Replay session ``index``; returns a Retry-After if a call was told one."""
        k = index % len(self._sessions)
        session, prompts = self._sessions[k], self._prompts[k]
        warmup = ctx.warming_up_at(intended_ns)
        at = intended_ns
        ttft = decode = tools = lag = 0
        end = intended_ns
        where = {"trace_id": session.trace_id, "session": self._numbers[k], "unit": index}
        for n, (call, prompt) in enumerate(zip(session.calls, prompts, strict=True)):
            if n:
                at = end + call.gap_ns
                tools += call.tool_ns
                wait = at - _perf()
                if wait > 0:
                    await asyncio.sleep(wait / 1e9)
            self._requests += 1
            rec = await ctx.client.send(
                index=self._requests - 1,
                prompt=prompt,
                body=prompt_body(self._scenario, self._model, prompt),
                intended_ns=at,
                warmup=warmup,
            )
            ctx.account(rec, prompt, {**where, "call": n + 1})
            if rec.outcome != "ok":
                self.tally.failed += not warmup
                if rec.outcome == "cancelled":
                    raise_if_cancelling()
                return rec.retry_after_s
            lag = max(lag, rec.sent_ns - at)
            first = rec.first_token_ns if rec.first_token_ns is not None else rec.end_ns
            ttft += first - rec.sent_ns
            decode += rec.end_ns - first
            end = rec.end_ns
        if not warmup:
            self.tally.record(
                SessionTimes(
                    trace_id=session.trace_id,
                    calls=len(session.calls),
                    session_ns=end - intended_ns,
                    ttft_ns=ttft,
                    decode_ns=decode,
                    tools_ns=tools,
                    recorded_ns=session.session_ns,
                    gap_lag_ns_max=lag,
                ),
                session,
            )
        return None

    def summary(self) -> AgentTraceBlock:
        """The ``agent_trace`` section of summary.json."""
        return self.tally.block()

    def result(self, run_dir: Path) -> HookResult:
        """This process's part of the ``agent_trace`` block: its tally, which the block
        adds to every other worker's (``merge_replays``) before the shares are computed."""
        return HookResult(blocks={"agent_trace": self.tally.encode()})


def _times(row: list[int | str]) -> SessionTimes:
    trace_id, *ns = row
    calls, session, ttft, decode, tools, recorded, lag = (int(v) for v in ns)
    return SessionTimes(str(trace_id), calls, session, ttft, decode, tools, recorded, lag)


def _ms(ns: int) -> float:
    return round(ns / 1e6, 3)


def _split(session: int, ttft: int, decode: int, tools: int, other: int) -> AgentTraceSplit:
    return {
        "session_ms": _ms(session),
        "ttft_ms": _ms(ttft),
        "decode_ms": _ms(decode),
        "tools_ms": _ms(tools),
        "other_ms": _ms(other),
    }


def _row(t: SessionTimes) -> AgentTraceSession:
    return {
        **_split(t.session_ns, t.ttft_ns, t.decode_ns, t.tools_ns, t.other_ns),
        "trace_id": t.trace_id,
        "calls": t.calls,
        "recorded_session_ms": _ms(t.recorded_ns),
        "gap_lag_ms_max": _ms(t.gap_lag_ns_max),
    }
