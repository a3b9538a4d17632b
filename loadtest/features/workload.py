"""Workload sources wired into a run: the kind of each found, exact lengths checked.

``prepare_workload`` hands a scenario whose source is a workload kind (a plugin of
``features.workload_kinds``: loadtest's ``synthetic``, ``trace``, ``conversations`` and
``agent-trace`` in ``features/workloads/``) to that kind, which makes what the runner
takes (a pool or a unit of load, hooks, the scenario with its arrival plan) and takes
its own part of the work in a worker; ``plan_lines`` is what ``--check`` prints. The
``workload`` block's tally of exact lengths (``LengthCheck``) is shared by the kinds.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, cast

from loadtest.config.scenario import Scenario, SourceSpec
from loadtest.config.workload_tables import own_key_names
from loadtest.datasets.tokenizer import Tokenizer, open_tokenizer
from loadtest.engine.blocks import BlockBase
from loadtest.engine.hooks import HookResult, RunHook
from loadtest.errors import DatasetError
from loadtest.features.workload_kinds import Share, Workload, WorkloadKind, workload_kind
from loadtest.measure.hdr import percentile
from loadtest.measure.recorders import Metrics
from loadtest.model.json import JsonObject
from loadtest.model.prompt import Prompt
from loadtest.model.record import RequestRecord

__all__ = [
    "WORKLOAD",
    "LengthCheck",
    "LengthReport",
    "Workload",
    "apply_workload_flags",
    "is_workload",
    "merge_lengths",
    "needs_tokenizer",
    "plan_lines",
    "prepare_workload",
    "replay_load",
    "workload_for",
]


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


def replay_load(
    scenario: Scenario, offsets: tuple[int, ...], span_ns: int, concurrency: int
) -> Scenario:
    """The scenario sending ``offsets`` (a recording's times, this worker's part of a
    recording ``span_ns`` long) as its arrival plan: every one once, unless the scenario
    names its own bound."""
    n = len(offsets)
    load = replace(
        scenario.load,
        mode="trace",
        rate=n / max(span_ns / 1e9, 1e-3),
        trace_offsets_ns=offsets,
        requests=n
        if scenario.bound_defaulted or scenario.load.requests is None
        else min(n, scenario.load.requests),
        concurrency=concurrency,
        duration_s=None if scenario.bound_defaulted else scenario.load.duration_s,
    )
    return replace(scenario, load=load)


def apply_workload_flags(
    scenario: Scenario, tokenizer: str | None = None, speedup: float | None = None
) -> Scenario:
    """``--tokenizer PATH`` and ``--speedup F`` over every workload source of a scenario
    (each where the source's kind cuts lengths, or is timed, and its keys hold it)."""
    sources = []
    for s in scenario.sources:
        kind = workload_kind(s.kind)
        if tokenizer is not None and kind is not None and kind.cuts_lengths:
            s = _with_own_key(s, "tokenizer", Path(tokenizer), "--tokenizer")
        if speedup is not None and kind is not None and kind.timed:
            if not speedup > 0:
                raise DatasetError(f"--speedup must be a positive number, got {speedup!r}")
            s = _with_own_key(s, "speedup", speedup, "--speedup")
        sources.append(s)
    return replace(scenario, sources=tuple(sources))


def _with_own_key(spec: SourceSpec, key: str, value: object, flag: str) -> SourceSpec:
    """``spec`` with its typed keys' ``key`` set to ``value``: a kind that declares the
    flag applies (``timed``, ``cuts_lengths``) must hold the key in its typed keys."""
    own = spec.own_keys
    if own is None or key not in own_key_names(type(own)):
        raise DatasetError(
            f"{flag}: the {spec.kind} source kind declares that it applies, but its typed "
            f"keys (parse_keys) have no {key!r} field to take it (docs/plugins.md)"
        )
    return replace(spec, own_keys=replace(cast(Any, own), **{key: value}))


def is_workload(scenario: Scenario) -> bool:
    """Whether a source of the scenario is a workload (its prompts need the endpoint)."""
    return bool(_workload_sources(scenario))


def workload_for(
    scenario: Scenario,
    endpoint: str,
    model: str,
    api_key: str | None = None,
    share: Share | None = None,
) -> Workload | None:
    """``prepare_workload`` with the endpoint's tokenizer where a source needs one.

    Blocking (tokenizer calls are plain HTTP): call it before the run, off the loop
    (``asyncio.to_thread``) when the endpoint is served from the same loop.
    """
    if not is_workload(scenario):
        return None
    tok = open_tokenizer(None, endpoint, model, api_key) if needs_tokenizer(scenario) else None
    return prepare_workload(scenario, model, tok, share)


def _workload_sources(scenario: Scenario) -> list[tuple[SourceSpec, WorkloadKind]]:
    return [(s, k) for s in scenario.sources if (k := workload_kind(s.kind)) is not None]


def needs_tokenizer(scenario: Scenario) -> bool:
    """True when a source makes exact lengths and names no ``tokenizer`` file of its own."""
    return any(kind.needs_tokenizer(s) for s, kind in _workload_sources(scenario))


def prepare_workload(
    scenario: Scenario,
    model: str,
    tokenizer: Tokenizer | None,
    share: Share | None = None,
) -> Workload | None:
    """The pool or unit of a workload scenario; None when it has no workload source.

    ``share`` = (worker, workers, the run's seed): each workload kind takes its own part
    (``features.workload_kinds``: a trace by line, conversations and sessions by number).
    A kind that runs in an order of its own must be the scenario's only source.
    """
    found = _workload_sources(scenario)
    if not found:
        return None
    sole = [(s, k) for s, k in found if k.sole]
    if sole and len(scenario.sources) != 1:
        name = sole[0][0].kind
        raise DatasetError(f"{scenario.path}: a {name} source must be the scenario's only source")
    if len({s.kind for s, _ in found}) > 1:
        kinds = ", ".join(sorted({s.kind for s, _ in found}))
        raise DatasetError(f"{scenario.path}: one workload kind a scenario, not {kinds}")
    spec, kind = found[0]
    return kind.prepare(scenario, spec, model, tokenizer, share or (0, 1, scenario.seed))


def plan_lines(scenario: Scenario) -> list[str]:
    """What ``--check`` prints of a workload: lengths, the trace's span and rate, turns."""
    return [kind.plan_line(scenario, s) for s, kind in _workload_sources(scenario)]


class _WorkloadBlock(BlockBase):
    """``workload.json``: how close the lengths that came out were to those asked for."""

    model = JsonObject
    in_summary = False

    def merge(self, parts: Sequence[JsonObject], metrics: Metrics) -> JsonObject:
        return merge_lengths(parts)


WORKLOAD = _WorkloadBlock()
