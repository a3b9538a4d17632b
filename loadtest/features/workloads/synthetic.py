"""The ``synthetic`` workload: prompts cut to exact lengths, drawn from the scenario's pool.

It may sit beside other sources (they share the pool); each worker draws from its own
seed, as any pool is split, and tallies the lengths that came out (``workload.json``).
"""

from __future__ import annotations

from loadtest.config.scenario import Scenario, SourceSpec
from loadtest.config.workload_tables import SyntheticKeys
from loadtest.datasets import build_pool
from loadtest.datasets.tokenizer import Tokenizer
from loadtest.features.workload import LengthCheck
from loadtest.features.workload_kinds import Share, Workload

__all__ = ["SYNTHETIC"]


class Synthetic:
    """The ``synthetic`` source kind's workload."""

    sole = False
    timed = False
    cuts_lengths = True

    def needs_tokenizer(self, spec: SourceSpec) -> bool:
        return spec.own(SyntheticKeys).tokenizer is None

    def prepare(
        self,
        scenario: Scenario,
        spec: SourceSpec,
        model: str,
        tokenizer: Tokenizer | None,
        share: Share,
    ) -> Workload:
        pool, counts = build_pool(scenario, tokenizer)
        # Every prompt of the pool: the check counts those with an exact length.
        prompts = list(pool.prompts())
        return Workload(scenario, pool, None, (LengthCheck(prompts),), counts)

    def plan_line(self, scenario: Scenario, spec: SourceSpec) -> str:
        w = spec.own(SyntheticKeys)
        out = w.output_tokens.describe() if w.output_tokens else "max_tokens"
        tok = str(w.tokenizer) if w.tokenizer else "the endpoint's /tokenize"
        return (
            f"  synthetic {spec.category}: input {w.input_tokens.describe()} tokens "
            f"(shared prefix {w.prefix_tokens}), output {out} tokens, tokenizer {tok}"
        )


SYNTHETIC = Synthetic()
