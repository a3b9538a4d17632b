"""Speculative acceptance per prompt category: the engine's counters beside loadtest's own.

llama.cpp reports per response how many tokens the draft proposed (``draft_n``) and how
many the target accepted (``draft_n_accepted``). loadtest sees, on the stream, how many
tokens came per decode step (bursts of chunks, ``token_steps``). The two meet through
one exact relation: a verify step emits the target's own token plus the drafts it
accepted, and the first token of each response comes from the prefill, in a step that
verifies nothing, so verify steps = output tokens - accepted - responses, and

    accepted per step (engine)  = accepted / (output - accepted - responses)
    accepted per step (derived) = (output - responses) / (token_steps - responses) - 1

(counting the prefill step made 3.0 accepted per step read 2.56 on vLLM).

The folk formula acceptance = (tokens per step - 1) / draft_max is *not* exact (a draft
may stop short of draft_max, at ``p_min`` or ``n_min``), so it is not used. The derived
figure drifts from the engine's when the client splits one step's burst (a pause over
``STEP_GAP_NS`` on a busy machine) or merges two (a read that caught up): ``agree``
says whether loadtest's tokens per step is within ``TOLERANCE`` of the engine's.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from loadtest.model.comparison import AcceptanceLine

__all__ = ["TOLERANCE", "AcceptanceCounts", "acceptance_lines", "pooled"]

TOLERANCE = 0.25
"""Relative difference of tokens per step (loadtest's against the engine's) still called
agreement: on a shared machine some steps' chunks arrive split into two bursts
(docs/benchmarks.md)."""


@dataclass(frozen=True, slots=True)
class AcceptanceCounts:
    """Sums over the ok responses of one category that carried engine timings."""

    responses: int = 0
    output_tokens: int = 0
    drafted: int = 0
    accepted: int = 0
    streamed_tokens: int = 0
    """Output tokens of the responses whose steps loadtest counted (streamed ones)."""
    token_steps: int = 0
    streamed: int = 0
    """Responses whose steps loadtest counted."""

    def __add__(self, o: AcceptanceCounts) -> AcceptanceCounts:
        return AcceptanceCounts(
            self.responses + o.responses,
            self.output_tokens + o.output_tokens,
            self.drafted + o.drafted,
            self.accepted + o.accepted,
            self.streamed_tokens + o.streamed_tokens,
            self.token_steps + o.token_steps,
            self.streamed + o.streamed,
        )


def count_row(
    output_tokens: object, token_steps: object, timings: Mapping[str, object]
) -> AcceptanceCounts | None:
    """One response's counts, or None when the engine reported no draft counters."""
    drafted, accepted = timings.get("draft_n"), timings.get("draft_n_accepted")
    if not isinstance(drafted, int) or not isinstance(accepted, int):
        return None
    out = output_tokens if isinstance(output_tokens, int) else 0
    steps = token_steps if isinstance(token_steps, int) else 0
    if steps < 2 or out < 2:  # a step past the prefill's is needed to see any
        return AcceptanceCounts(1, out, drafted, accepted)
    return AcceptanceCounts(1, out, drafted, accepted, out, steps, 1)


def pooled(per_run: Iterable[Mapping[str, AcceptanceCounts]]) -> dict[str, AcceptanceCounts]:
    """Per category, the sums over several runs."""
    out: dict[str, AcceptanceCounts] = {}
    for run in per_run:
        for cat, c in run.items():
            out[cat] = out.get(cat, AcceptanceCounts()) + c
    return out


def _line(category: str, c: AcceptanceCounts) -> AcceptanceLine:
    engine_steps = c.output_tokens - c.accepted - c.responses
    engine = c.accepted / engine_steps if c.drafted and engine_steps > 0 else None
    decode_steps = c.token_steps - c.streamed
    derived = (c.streamed_tokens - c.streamed) / decode_steps - 1 if decode_steps > 0 else None
    agree = None
    if engine is not None and derived is not None:
        agree = abs((derived + 1) - (engine + 1)) <= TOLERANCE * (engine + 1)
    return {
        "category": category,
        "responses": c.responses,
        "output_tokens": c.output_tokens,
        "drafted": c.drafted,
        "accepted": c.accepted,
        "engine_rate": round(c.accepted / c.drafted, 4) if c.drafted else None,
        "engine_accepted_per_step": None if engine is None else round(engine, 4),
        "derived_accepted_per_step": None if derived is None else round(derived, 4),
        "tolerance": TOLERANCE,
        "agree": agree,
    }


def acceptance_lines(counts: Mapping[str, AcceptanceCounts]) -> list[AcceptanceLine]:
    """One line per category, then ``all`` (the categories pooled), when any drafted."""
    if not any(c.drafted for c in counts.values()):
        return []
    total = sum(counts.values(), AcceptanceCounts())
    lines = [_line(cat, counts[cat]) for cat in sorted(counts)]
    return [*lines, _line("all", total)] if len(lines) > 1 else lines
