"""The ``agent-trace`` workload: recorded sessions, a unit each; split by session.

At their recorded starts, or N at once (closed). Worker w of N replays whole sessions
w, w+N, ..., each at its own recorded start, its calls at their recorded gaps.
"""

from __future__ import annotations

from dataclasses import replace

from loadtest.config.scenario import Scenario, SourceSpec
from loadtest.config.workload_tables import AgentTraceKeys
from loadtest.datasets.otel import read_agent_trace
from loadtest.datasets.tokenizer import Tokenizer
from loadtest.engine.schedule import trace_offsets_ns
from loadtest.errors import DatasetError
from loadtest.features.agent_trace import SessionReplay, session_prompts
from loadtest.features.workload import LengthCheck, replay_load
from loadtest.features.workload_kinds import Share, Workload

__all__ = ["AGENT_TRACE"]


class AgentTrace:
    """The ``agent-trace`` source kind's workload."""

    sole = True
    timed = True
    cuts_lengths = True

    def needs_tokenizer(self, spec: SourceSpec) -> bool:
        """Only where a call has no captured messages (its prompt is cut to length)."""
        if spec.own(AgentTraceKeys).tokenizer is not None:
            return False
        assert spec.path is not None
        sessions = read_agent_trace(spec.path, spec.limit)
        return any(c.messages is None for s in sessions for c in s.calls)

    def prepare(
        self,
        scenario: Scenario,
        spec: SourceSpec,
        model: str,
        tokenizer: Tokenizer | None,
        share: Share,
    ) -> Workload:
        assert spec.path is not None
        worker, workers, _ = share
        every = read_agent_trace(spec.path, spec.limit)
        numbers = range(worker, len(every), workers)
        if not numbers:
            raise DatasetError(f"{spec.path}: {len(every)} sessions cannot be split over {workers}")
        sessions = [every[i] for i in numbers]
        # Cut for the whole trace, then taken: a session's prompts are a one-process run's.
        cut = session_prompts(every, tokenizer, str(spec.path))
        prompts = [cut[i] for i in numbers]
        n = len(sessions)
        own = spec.own(AgentTraceKeys)
        if own.starts == "recorded":
            starts = trace_offsets_ns([s.offset_ns / 1e6 for s in every], own.speedup)
            sc = replay_load(scenario, tuple(starts[i] for i in numbers), starts[-1], 0)
        else:
            # Closed: every session once, unless the scenario names its own bound.
            load = replace(
                scenario.load,
                mode="closed",
                requests=n if scenario.bound_defaulted else scenario.load.requests,
                duration_s=None if scenario.bound_defaulted else scenario.load.duration_s,
            )
            sc = replace(scenario, load=load)
        unit = SessionReplay(sc, model, sessions, prompts, numbers)
        flat = [p for ps in prompts for p in ps]
        return Workload(sc, None, unit, (unit, LengthCheck(flat)), {"agent-trace": n})

    def plan_line(self, scenario: Scenario, spec: SourceSpec) -> str:
        assert spec.path is not None
        w = spec.own(AgentTraceKeys)
        sessions = read_agent_trace(spec.path, spec.limit)
        calls = sum(len(x.calls) for x in sessions)
        span = sessions[-1].offset_ns / 1e9 / w.speedup
        starts = (
            f"at their recorded starts over {span:.1f} s (speedup {w.speedup:g})"
            if w.starts == "recorded"
            else f"{scenario.load.concurrency} at a time"
        )
        return f"  agent-trace {spec.path}: {len(sessions)} sessions, {calls} model calls, {starts}"


AGENT_TRACE = AgentTrace()
