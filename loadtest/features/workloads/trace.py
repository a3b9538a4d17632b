"""The ``trace`` workload: each line sent at its recorded time; split by line.

Worker w of N replays lines w, w+N, ... at their recorded times, so the merged run
replays every line once, each with its ``trace_index``.
"""

from __future__ import annotations

from collections.abc import Sequence

from loadtest.config.scenario import Scenario, SourceSpec
from loadtest.config.workload_tables import TraceKeys
from loadtest.datasets import load_source
from loadtest.datasets.tokenizer import Tokenizer
from loadtest.datasets.trace import read_trace
from loadtest.engine.hooks import RunContext, RunHook
from loadtest.engine.request_unit import prompt_body, raise_if_cancelling
from loadtest.engine.schedule import trace_offsets_ns
from loadtest.errors import DatasetError
from loadtest.features.workload import LengthCheck, replay_load
from loadtest.features.workload_kinds import Share, Workload
from loadtest.model.prompt import Prompt

__all__ = ["TRACE", "TraceReplay"]


class TraceReplay(RunHook):
    """A trace's requests, the i-th unit sending the i-th line (the arrival plan keeps
    their times), each with its own length and shared prefix."""

    def __init__(
        self, scenario: Scenario, model: str, prompts: list[Prompt], lines: Sequence[int]
    ) -> None:
        """``lines``: the trace line each prompt is (a worker replays every N-th)."""
        self._scenario = scenario
        self._model = model
        self._prompts = prompts
        self._lines = lines

    async def run_unit(self, ctx: RunContext, index: int, intended_ns: int) -> float | None:
        """Send line ``index`` of the trace."""
        if index >= len(self._prompts):
            return None  # a burst beside the plan: the trace has no more lines
        prompt = self._prompts[index]
        body = prompt_body(self._scenario, self._model, prompt)
        rec = await ctx.client.send(
            index=index,
            prompt=prompt,
            body=body,
            intended_ns=intended_ns,
            warmup=ctx.warming_up_at(intended_ns),
        )
        ctx.account(rec, prompt, {"trace_index": self._lines[index]})
        if rec.outcome == "cancelled":
            raise_if_cancelling()
        return rec.retry_after_s


class Trace:
    """The ``trace`` source kind's workload."""

    sole = True
    timed = True
    cuts_lengths = True

    def needs_tokenizer(self, spec: SourceSpec) -> bool:
        return spec.own(TraceKeys).tokenizer is None

    def prepare(
        self,
        scenario: Scenario,
        spec: SourceSpec,
        model: str,
        tokenizer: Tokenizer | None,
        share: Share,
    ) -> Workload:
        worker, workers, _ = share
        assert spec.path is not None
        entries = read_trace(spec.path, spec.limit)
        every = trace_offsets_ns([e.timestamp_ms for e in entries], spec.own(TraceKeys).speedup)
        lines = range(worker, len(every), workers)
        every_prompt = load_source(spec, tokenizer)
        prompts = [every_prompt[i] for i in lines]
        offsets = tuple(every[i] for i in lines)
        if not offsets:
            raise DatasetError(f"{spec.path}: {len(every)} lines cannot be split over {workers}")
        # A trace keeps its own times: an in-flight cap only where an open mode set one.
        cap = 0 if scenario.load.mode == "closed" else scenario.load.concurrency
        sc = replay_load(scenario, offsets, every[-1], cap)
        unit = TraceReplay(sc, model, prompts, lines)
        return Workload(sc, None, unit, (unit, LengthCheck(prompts)), {"trace": len(prompts)})

    def plan_line(self, scenario: Scenario, spec: SourceSpec) -> str:
        assert spec.path is not None
        entries = read_trace(spec.path, spec.limit)
        offsets = trace_offsets_ns([e.timestamp_ms for e in entries], spec.own(TraceKeys).speedup)
        span = offsets[-1] / 1e9
        rate = f"{len(entries) / span:.2f} req/s" if span > 0 else "all at once"
        return (
            f"  trace {spec.path}: {len(entries)} requests over {span:.1f} s "
            f"(speedup {spec.own(TraceKeys).speedup:g}), {rate}"
        )


TRACE = Trace()
