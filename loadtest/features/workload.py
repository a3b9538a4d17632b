"""Workload sources wired into a run: exact lengths checked, traces replayed in order.

``prepare_workload`` turns a scenario whose sources are ``synthetic``, ``trace``,
``conversations`` or ``agent-trace`` into what the runner takes (a pool or a unit of
load, hooks, the scenario with its trace arrival plan); ``plan_lines`` is what
``--check`` prints.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import cast

from loadtest.config.scenario import Scenario, SourceSpec
from loadtest.datasets import PromptPool, build_pool, load_source
from loadtest.datasets.conversations import load_conversations
from loadtest.datasets.otel import read_agent_trace
from loadtest.datasets.tokenizer import Tokenizer, open_tokenizer
from loadtest.datasets.trace import read_trace
from loadtest.engine.hooks import HookResult, RunContext, RunHook, UnitOfLoad
from loadtest.engine.request_unit import prompt_body, raise_if_cancelling
from loadtest.engine.schedule import trace_offsets_ns
from loadtest.errors import DatasetError
from loadtest.features.agent_trace import SessionReplay, session_prompts
from loadtest.features.multiturn import MultiTurn
from loadtest.measure.hdr import percentile
from loadtest.model.json import JsonObject
from loadtest.model.prompt import Prompt
from loadtest.model.record import RequestRecord

__all__ = [
    "LengthCheck",
    "LengthReport",
    "TraceReplay",
    "Workload",
    "apply_workload_flags",
    "merge_lengths",
    "needs_tokenizer",
    "plan_lines",
    "prepare_workload",
    "workload_for",
]

WORKLOAD_KINDS = ("synthetic", "trace", "conversations", "agent-trace")
_TIMED = ("trace", "agent-trace")
"""Sources with recorded times, which ``--speedup`` compresses."""


@dataclass(frozen=True, slots=True)
class LengthReport:
    """How close the lengths that came out were to those asked for (``workload.json``)."""

    requests: int
    """Finished ``ok`` requests whose prompt had an exact length."""
    exact_output: int
    """Answers of exactly ``max_tokens`` tokens (server-counted)."""
    stopped_early: int
    """Answers shorter than asked for (the engine stopped at EOS despite ``ignore_eos``)."""
    exact_input: int
    """Requests whose server-reported ``prompt_tokens`` equals the intended length."""
    prompt_tokens_reported: int
    """Requests whose answer reported ``prompt_tokens`` at all."""
    prompt_overhead_median: float | None
    """Median of reported minus intended prompt tokens (a chat template adds some)."""
    prompt_overhead_max: int | None


_REPORT_FIELDS = tuple(LengthReport.__dataclass_fields__)
_COUNTS = ("requests", "exact_output", "stopped_early", "exact_input", "prompt_tokens_reported")


def merge_lengths(parts: Sequence[JsonObject]) -> JsonObject:
    """``workload.json`` from every process's tally: one is the tally itself; several are
    summed, the largest overhead kept, and, a median of medians being no median, each
    worker's median listed."""
    if len(parts) == 1:
        return parts[0]
    merged: JsonObject = {k: sum(cast(int, p.get(k) or 0) for p in parts) for k in _COUNTS}
    highs = [cast(int, h) for p in parts if (h := p.get("prompt_overhead_max")) is not None]
    merged["prompt_overhead_max"] = max(highs) if highs else None
    merged["prompt_overhead_median_per_worker"] = [p.get("prompt_overhead_median") for p in parts]
    return merged


class LengthCheck(RunHook):
    """Tallies intended against server-reported lengths (the ``workload`` block)."""

    def __init__(self, prompts: list[Prompt]) -> None:
        self._intended = {
            p.id: (p.input_tokens, p.max_tokens)
            for p in prompts
            if p.input_tokens is not None or p.sampling
        }
        self._n = self._exact_out = self._early = self._exact_in = 0
        self._diffs: list[int] = []

    def on_record(self, rec: RequestRecord) -> None:
        """Count one finished request."""
        want = self._intended.get(rec.prompt_id)
        if want is None or rec.outcome != "ok" or rec.warmup:
            return
        n_in, n_out = want
        self._n += 1
        if n_out is not None and not rec.tokens_estimated:
            self._exact_out += rec.output_tokens == n_out
            self._early += rec.output_tokens < n_out
        if n_in is not None and rec.prompt_tokens is not None:
            self._diffs.append(rec.prompt_tokens - n_in)
            self._exact_in += rec.prompt_tokens == n_in

    def report(self) -> LengthReport:
        """The tally so far."""
        d = self._diffs
        return LengthReport(
            requests=self._n,
            exact_output=self._exact_out,
            stopped_early=self._early,
            exact_input=self._exact_in,
            prompt_tokens_reported=len(d),
            prompt_overhead_median=percentile(d, 50),
            prompt_overhead_max=max(d) if d else None,
        )

    def result(self, run_dir: Path) -> HookResult:
        """This process's part of the ``workload`` block (``workload.json``): its tally."""
        r = self.report()
        return HookResult(blocks={"workload": {k: getattr(r, k) for k in _REPORT_FIELDS}})


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


@dataclass(frozen=True, slots=True)
class Workload:
    """What the runner takes for a workload scenario."""

    scenario: Scenario
    """The scenario, with a trace's arrival plan in ``load`` where it has one."""
    pool: PromptPool | None
    unit: UnitOfLoad | None
    hooks: tuple[RunHook, ...]
    counts: dict[str, int]


def apply_workload_flags(
    scenario: Scenario, tokenizer: str | None = None, speedup: float | None = None
) -> Scenario:
    """``--tokenizer PATH`` and ``--speedup F`` over every workload source of a scenario."""
    sources = []
    for s in scenario.sources:
        w = s.workload
        if tokenizer is not None and s.kind in ("synthetic", *_TIMED):
            w = replace(w, tokenizer=Path(tokenizer))
        if speedup is not None and s.kind in _TIMED:
            if not speedup > 0:
                raise DatasetError(f"--speedup must be a positive number, got {speedup!r}")
            w = replace(w, speedup=speedup)
        sources.append(replace(s, workload=w))
    return replace(scenario, sources=tuple(sources))


def is_workload(scenario: Scenario) -> bool:
    """Whether a source of the scenario is a workload (its prompts need the endpoint)."""
    return any(s.kind in WORKLOAD_KINDS for s in scenario.sources)


def workload_for(
    scenario: Scenario,
    endpoint: str,
    model: str,
    api_key: str | None = None,
    share: tuple[int, int, int] | None = None,
) -> Workload | None:
    """``prepare_workload`` with the endpoint's tokenizer where a source needs one.

    Blocking (tokenizer calls are plain HTTP): call it before the run, off the loop
    (``asyncio.to_thread``) when the endpoint is served from the same loop.
    """
    if not is_workload(scenario):
        return None
    tok = open_tokenizer(None, endpoint, model, api_key) if needs_tokenizer(scenario) else None
    return prepare_workload(scenario, model, tok, share)


def _kinds(scenario: Scenario) -> set[str]:
    return {s.kind for s in scenario.sources}


def needs_tokenizer(scenario: Scenario) -> bool:
    """True when a source makes exact lengths and names no ``tokenizer`` file of its own."""
    return any(
        s.workload.tokenizer is None
        and (s.kind in ("synthetic", "trace") or (s.kind == "agent-trace" and _lengths_only(s)))
        for s in scenario.sources
    )


def _lengths_only(spec: SourceSpec) -> bool:
    """Whether a call of an agent trace has no captured messages (its prompt is cut)."""
    assert spec.path is not None
    sessions = read_agent_trace(spec.path, spec.limit)
    return any(c.messages is None for s in sessions for c in s.calls)


def _only(scenario: Scenario, kind: str) -> SourceSpec:
    if len(scenario.sources) != 1:
        raise DatasetError(f"{scenario.path}: a {kind} source must be the scenario's only source")
    return scenario.sources[0]


def prepare_workload(
    scenario: Scenario,
    model: str,
    tokenizer: Tokenizer | None,
    share: tuple[int, int, int] | None = None,
) -> Workload | None:
    """The pool or unit of a workload scenario; None when it has no workload source.

    ``share`` = (worker, workers, the run's seed): a trace is split by line, worker w
    replaying lines w, w+N, ... at their recorded times (the merged run replays every
    line once);
    conversations likewise, worker w running conversations w, w+N, ... of the order the
    run's seed gives (the same in every worker; each worker's own seed differs).
    """
    kinds = _kinds(scenario)
    if "agent-trace" in kinds:
        spec = _only(scenario, "agent-trace")
        return _agent_trace(scenario, spec, model, tokenizer, share or (0, 1, scenario.seed))
    if "trace" in kinds:
        spec = _only(scenario, "trace")
        worker, workers, _ = share or (0, 1, scenario.seed)
        assert spec.path is not None
        entries = read_trace(spec.path, spec.limit)
        every = trace_offsets_ns([e.timestamp_ms for e in entries], spec.workload.speedup)
        lines = range(worker, len(every), workers)
        every_prompt = load_source(spec, tokenizer)
        prompts = [every_prompt[i] for i in lines]
        offsets = tuple(every[i] for i in lines)
        if not offsets:
            raise DatasetError(f"{spec.path}: {len(every)} lines cannot be split over {workers}")
        span_s = max(every[-1] / 1e9, 1e-3)
        load = replace(
            scenario.load,
            mode="trace",
            rate=len(offsets) / span_s,
            trace_offsets_ns=offsets,
            requests=len(offsets)
            if scenario.bound_defaulted or scenario.load.requests is None
            else min(len(offsets), scenario.load.requests),
            # A trace keeps its own times: an in-flight cap only where an open mode set one.
            concurrency=0 if scenario.load.mode == "closed" else scenario.load.concurrency,
            # The trace is the bound, unless the scenario cuts it short.
            duration_s=None if scenario.bound_defaulted else scenario.load.duration_s,
        )
        sc = replace(scenario, load=load)
        unit = TraceReplay(sc, model, prompts, lines)
        return Workload(sc, None, unit, (unit, LengthCheck(prompts)), {"trace": len(prompts)})
    if "conversations" in kinds:
        spec = _only(scenario, "conversations")
        worker, workers, order = share or (0, 1, scenario.seed)
        convs = load_conversations(spec.path, spec.limit, order)[worker::workers]
        if not convs:
            raise DatasetError(f"{spec.path}: too few conversations for {workers} workers")
        mt = MultiTurn(scenario, model, convs, spec)
        return Workload(scenario, None, mt, (mt,), {"conversations": len(convs)})
    if "synthetic" in kinds:
        pool, counts = build_pool(scenario, tokenizer)
        prompts = [p for spec in scenario.sources for p in _drawn(pool, spec)]
        return Workload(scenario, pool, None, (LengthCheck(prompts),), counts)
    return None


def _agent_trace(
    scenario: Scenario,
    spec: SourceSpec,
    model: str,
    tokenizer: Tokenizer | None,
    share: tuple[int, int, int],
) -> Workload:
    """Recorded sessions, a unit each: at their recorded starts, or N at once (closed).

    Split by session, as a trace is by line: worker w replays whole sessions w, w+N, ...,
    each at its own recorded start, its calls at their recorded gaps."""
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
    if spec.workload.starts == "recorded":
        starts = trace_offsets_ns([s.offset_ns / 1e6 for s in every], spec.workload.speedup)
        offsets = tuple(starts[i] for i in numbers)
        load = replace(
            scenario.load,
            mode="trace",
            rate=n / max(starts[-1] / 1e9, 1e-3),
            trace_offsets_ns=offsets,
            requests=n
            if scenario.bound_defaulted or scenario.load.requests is None
            else min(n, scenario.load.requests),
            concurrency=0,
            duration_s=None if scenario.bound_defaulted else scenario.load.duration_s,
        )
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


def _drawn(pool: PromptPool, spec: SourceSpec) -> list[Prompt]:
    return [p for p in pool.prompts() if p.source == spec.kind]


def plan_lines(scenario: Scenario) -> list[str]:
    """What ``--check`` prints of a workload: lengths, the trace's span and rate, turns."""
    lines = []
    for s in scenario.sources:
        w = s.workload
        if s.kind == "synthetic":
            assert w.input_tokens is not None
            out = w.output_tokens.describe() if w.output_tokens else "max_tokens"
            tok = str(w.tokenizer) if w.tokenizer else "the endpoint's /tokenize"
            lines.append(
                f"  synthetic {s.category}: input {w.input_tokens.describe()} tokens "
                f"(shared prefix {w.prefix_tokens}), output {out} tokens, tokenizer {tok}"
            )
        elif s.kind == "trace" and s.path is not None:
            entries = read_trace(s.path, s.limit)
            offsets = trace_offsets_ns([e.timestamp_ms for e in entries], w.speedup)
            span = offsets[-1] / 1e9
            rate = f"{len(entries) / span:.2f} req/s" if span > 0 else "all at once"
            lines.append(
                f"  trace {s.path}: {len(entries)} requests over {span:.1f} s "
                f"(speedup {w.speedup:g}), {rate}"
            )
        elif s.kind == "agent-trace" and s.path is not None:
            sessions = read_agent_trace(s.path, s.limit)
            calls = sum(len(x.calls) for x in sessions)
            span = sessions[-1].offset_ns / 1e9 / w.speedup
            starts = (
                f"at their recorded starts over {span:.1f} s (speedup {w.speedup:g})"
                if w.starts == "recorded"
                else f"{scenario.load.concurrency} at a time"
            )
            lines.append(
                f"  agent-trace {s.path}: {len(sessions)} sessions, {calls} model calls, {starts}"
            )
        elif s.kind == "conversations":
            convs = load_conversations(s.path, s.limit, scenario.seed)
            turns = [min(c.turns, w.max_turns or c.turns) for c in convs]
            lines.append(
                f"  conversations: {len(convs)} from {s.path or 'ShareGPT'}, turns "
                f"{min(turns)}..{max(turns)} (median {percentile(turns, 50):g}), "
                f"think {w.think_time_ms:g} ms, history with {w.answers} answers"
            )
    return lines
