"""A workload plugin: ``kind = "ordered"`` sends every line of a file once, in order.

A pool draws prompts at random; this kind runs as a unit of load of its own (the i-th
unit sends the i-th line) and declares how it is split over workers: worker w of N
sends lines w, w+N, ... It registers its prompt source (``loadtest.sources``) and its
workload (``loadtest.workloads``) under the same name. Nothing here is part of
loadtest: it uses only the plugin interface a third party sees (docs/plugins.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from loadtest.plugins import (
    DatasetError,
    Prompt,
    RunContext,
    RunHook,
    Scenario,
    Share,
    SourceSpec,
    Workload,
    prompt_body,
)

from . import LINES


class OrderedSource:
    """The prompts: the lines of the file, as the ``lines`` kind reads them."""

    keys = frozenset({"path", "limit"})
    needs_path = True

    def load(self, spec: SourceSpec, tokenizer: object | None) -> list[Prompt]:
        return [replace(p, source="ordered") for p in LINES.load(spec, tokenizer)]


class _InOrder(RunHook):
    def __init__(
        self, scenario: Scenario, model: str, prompts: list[Prompt], lines: Sequence[int]
    ) -> None:
        self._scenario, self._model, self._prompts, self._lines = scenario, model, prompts, lines

    async def run_unit(self, ctx: RunContext, index: int, intended_ns: int) -> float | None:
        if index >= len(self._prompts):
            return None
        prompt = self._prompts[index]
        rec = await ctx.client.send(
            index=index,
            prompt=prompt,
            body=prompt_body(self._scenario, self._model, prompt),
            intended_ns=intended_ns,
            warmup=False,
        )
        ctx.account(rec, prompt, {"line": self._lines[index]})
        return rec.retry_after_s


class Ordered:
    """The ``ordered`` kind's workload."""

    sole = True
    timed = False
    cuts_lengths = False

    def needs_tokenizer(self, spec: SourceSpec) -> bool:
        return False

    def prepare(
        self, scenario: Scenario, spec: SourceSpec, model: str, tokenizer: object, share: Share
    ) -> Workload:
        worker, workers, _ = share
        every = ORDERED_SOURCE.load(spec, None)
        lines = range(worker, len(every), workers)
        if not lines:
            raise DatasetError(f"{spec.path}: {len(every)} lines cannot be split over {workers}")
        load = replace(scenario.load, mode="closed", requests=len(lines), duration_s=None)
        sc = replace(scenario, load=load)
        unit = _InOrder(sc, model, [every[i] for i in lines], lines)
        return Workload(sc, None, unit, (unit,), {"ordered": len(lines)})

    def plan_line(self, scenario: Scenario, spec: SourceSpec) -> str:
        n = len(ORDERED_SOURCE.load(spec, None))
        return f"  ordered {spec.path}: {n} lines, each sent once, in order"


ORDERED_SOURCE = OrderedSource()
ORDERED = Ordered()
