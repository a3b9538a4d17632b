"""The ``conversations`` workload: each conversation's turns in order; split by number.

Worker w of N runs conversations w, w+N, ... of the order the run's seed gives (the same
in every worker; each worker's own seed differs).
"""

from __future__ import annotations

from loadtest.config.scenario import Scenario, SourceSpec
from loadtest.config.workload_tables import ConversationKeys
from loadtest.datasets.conversations import load_conversations
from loadtest.datasets.tokenizer import Tokenizer
from loadtest.errors import DatasetError
from loadtest.features.multiturn import MultiTurn
from loadtest.features.workload_kinds import Share, Workload
from loadtest.measure.hdr import percentile

__all__ = ["CONVERSATIONS"]


class Conversations:
    """The ``conversations`` source kind's workload."""

    sole = True
    timed = False
    cuts_lengths = False

    def needs_tokenizer(self, spec: SourceSpec) -> bool:
        return False

    def prepare(
        self,
        scenario: Scenario,
        spec: SourceSpec,
        model: str,
        tokenizer: Tokenizer | None,
        share: Share,
    ) -> Workload:
        worker, workers, order = share
        convs = load_conversations(spec.path, spec.limit, order)[worker::workers]
        if not convs:
            raise DatasetError(f"{spec.path}: too few conversations for {workers} workers")
        mt = MultiTurn(scenario, model, convs, spec)
        return Workload(scenario, None, mt, (mt,), {"conversations": len(convs)})

    def plan_line(self, scenario: Scenario, spec: SourceSpec) -> str:
        w = spec.own(ConversationKeys)
        convs = load_conversations(spec.path, spec.limit, scenario.seed)
        turns = [min(c.turns, w.max_turns or c.turns) for c in convs]
        return (
            f"  conversations: {len(convs)} from {spec.path or 'ShareGPT'}, turns "
            f"{min(turns)}..{max(turns)} (median {percentile(turns, 50):g}), "
            f"think {w.think_time_ms:g} ms, history with {w.answers} answers"
        )


CONVERSATIONS = Conversations()
