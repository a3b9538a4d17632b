"""A sweep dimension plugin: ``answer_tokens``, the answer length a step asks for.

``loadtest sweep --sweep answer_tokens=16,64,256`` runs the scenario once per value with
every request's ``max_tokens`` set to it: how TPOT and goodput move with answer length
at the scenario's own load. The dimension declares that its steps are whole numbers,
that a step is not an open loop, and how a step changes the scenario; loadtest applies
it before the run is split, so every worker and Ray task runs the step's scenario.
"""

from __future__ import annotations

import dataclasses

from loadtest.plugins import Scenario, UsageError


class AnswerTokens:
    """``answer_tokens``: every request asks for this many tokens at most."""

    whole = True
    open_loop = False

    def apply(self, scenario: Scenario, value: float) -> Scenario:
        tokens = int(value)
        if tokens > 32_768:
            raise UsageError(f"answer_tokens {tokens}: at most 32768")
        sources = tuple(dataclasses.replace(s, max_tokens=tokens) for s in scenario.sources)
        # max_tokens_override: the pool sets it on every prompt, over a prompt's own.
        return dataclasses.replace(
            scenario, max_tokens=tokens, sources=sources, max_tokens_override=True
        )


ANSWER_TOKENS = AnswerTokens()
