"""The ``[[load.stop]]`` feature: its hook judges the rules, its block says which fired.

The hook is attached by its block (``StoppedBlock.hook``) in every process that sends
load, each judging its own measured requests against its share of the settings
(``StopRule.share``, split with the load). A rule that fires ends that process's load as
the run's end would: nothing more is offered, requests in flight get the grace period,
every one is accounted. The block lists each process's firing; a rule that ``fails``
makes the run exit 1 (``report.exit_reasons``).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from pathlib import Path

from loadtest.config.scenario import Scenario
from loadtest.config.stop_rules import RunSoFar, StopRule, TrendSample
from loadtest.engine.blocks import BlockBase
from loadtest.engine.hooks import HookResult, RunContext, RunHook
from loadtest.model.record import RequestRecord
from loadtest.model.summary import StoppedBy, Summary

__all__ = ["STOPPED", "StopRulesHook"]

BLOCK = "stopped"
RECENT_S = 60.0
"""How far back ``RunSoFar.recent`` reaches: the longest trend window a rule may fit."""


class StopRulesHook(RunHook):
    """Counts this process's measured requests and asks each rule after every one."""

    def __init__(self, scenario: Scenario) -> None:
        self._rules: list[tuple[str, StopRule, object]] = [
            (spec.kind, spec.rule(), spec.settings) for spec in scenario.load.stop_rules
        ]
        self._ctx: RunContext | None = None
        self._warmup_end_ns = 0
        self._ended = self._ok = self._failed = self._tokens = 0
        self._fired: StoppedBy | None = None
        self._recent: deque[TrendSample] = deque()

    async def on_start(self, ctx: RunContext) -> None:
        self._ctx = ctx
        self._warmup_end_ns = ctx.t0_ns + int(ctx.scenario.load.warmup_s * 1e9)

    def on_record(self, rec: RequestRecord) -> None:
        if rec.warmup or self._fired is not None or self._ctx is None:
            return
        self._ended += 1
        if rec.outcome == "ok":
            self._ok += 1
            self._tokens += rec.output_tokens
        elif rec.outcome == "failed":
            self._failed += 1
        elapsed_s = max(0, rec.end_ns - self._warmup_end_ns) / 1e9
        first = rec.first_token_ns
        ttft_ms = None if first is None else (first - rec.intended_ns) / 1e6
        self._recent.append(TrendSample(elapsed_s, self._ctx.in_flight, ttft_ms))
        while self._recent[0].end_s < elapsed_s - RECENT_S:
            self._recent.popleft()
        seen = RunSoFar(
            elapsed_s=elapsed_s,
            ended=self._ended,
            ok=self._ok,
            failed=self._failed,
            output_tokens=self._tokens,
            recent=self._recent,
        )
        for kind, rule, settings in self._rules:
            reason = rule.reached(settings, seen)
            if reason is not None:
                self._fired = {"rule": kind, "reason": reason, "fails": bool(rule.fails)}
                self._ctx.end_load(reason)
                return

    def result(self, run_dir: Path) -> HookResult:
        return HookResult(blocks={BLOCK: self._fired} if self._fired else {})


class StoppedBlock(BlockBase):
    """``stopped``: each process's rule that ended its load; no key when none did."""

    model = list[StoppedBy]

    def hook(self, scenario: Scenario) -> RunHook | None:
        return StopRulesHook(scenario) if scenario.load.stop_rules else None

    def merge(self, parts: Sequence[StoppedBy], metrics: object) -> list[StoppedBy]:
        return list(parts)

    def render(self, block: list[StoppedBy], summary: Summary) -> str | None:
        reasons = sorted({b["reason"] for b in block})
        n = len(block)
        where = f" (in {n} processes)" if n > 1 else ""
        return "\n".join(
            [f"\nSTOPPED EARLY by a [[load.stop]] rule{where}:", *(f"  {r}" for r in reasons)]
        )


STOPPED = StoppedBlock()
