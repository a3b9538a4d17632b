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
from dataclasses import replace
from pathlib import Path

from loadtest.config.scenario import Scenario
from loadtest.datasets.otel import RecordedSession
from loadtest.datasets.tokenizer import Tokenizer
from loadtest.datasets.trace import TraceEntry, trace_prompts
from loadtest.engine.hooks import HookResult, RunContext, RunHook
from loadtest.engine.request_unit import prompt_body, raise_if_cancelling
from loadtest.features.session_tally import (
    SESSIONS_LISTED,
    ReplayPart,
    ReplayTally,
    SessionTimes,
    merge_replays,
)
from loadtest.model.json import JsonObject
from loadtest.model.prompt import Prompt
from loadtest.model.summary import AgentTraceBlock

__all__ = [
    "SESSIONS_LISTED",
    "ReplayPart",
    "ReplayTally",
    "SessionReplay",
    "SessionTimes",
    "merge_replays",
    "session_prompts",
]

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
        ttft = decode = tools = lag = reasoning = 0
        end = intended_ns
        where = {"session": self._numbers[k]}  # its place in the whole trace (workers)
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
            ctx.account(rec, prompt, {**where, **_line(session, n, index)})
            if rec.outcome != "ok":
                self.tally.failed += not warmup
                if rec.outcome == "cancelled":
                    raise_if_cancelling()
                return rec.retry_after_s
            lag = max(lag, rec.sent_ns - at)
            first = rec.first_token_ns if rec.first_token_ns is not None else rec.end_ns
            ttft += first - rec.sent_ns
            decode += rec.end_ns - first
            reasoning += rec.reasoning.reasoning_ns if rec.reasoning is not None else 0
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
                    recorded_model_ns=session.model_ns,
                    gap_lag_ns_max=lag,
                    end_ns=end - ctx.t0_ns,
                    reasoning_ns=reasoning,
                )
            )
        return None

    def summary(self) -> AgentTraceBlock:
        """The ``agent_trace`` section of summary.json."""
        return self.tally.block()

    def result(self, run_dir: Path) -> HookResult:
        """This process's part of the ``agent_trace`` block: its tally, which the block
        adds to every other worker's (``merge_replays``) before the shares are computed."""
        return HookResult(blocks={"agent_trace": self.tally.encode()})


def _line(session: RecordedSession, n: int, unit: int) -> JsonObject:
    """What a request line says of its call: which session and call, the recorded gap
    before it and the tools in that gap, and the recorded settings (what the OTLP
    export and a rebuilt summary read back)."""
    call = session.calls[n]
    line: JsonObject = {
        "trace_id": session.trace_id,
        "call": n + 1,
        "calls": len(session.calls),
        "unit": unit,
        "gap_ms": _ms(call.gap_ns),
        "tool_ms": _ms(call.tool_ns),
        "recorded_ms": _ms(call.end_ns - call.start_ns),
    }
    if call.settings:
        line["settings"] = call.settings
    return line


def _ms(ns: int) -> float:
    return round(ns / 1e6, 3)
