"""The ``agent_trace`` summary block: replayed agent sessions, each process's tally of
its sessions added (exact) and the shares computed once on the sums; and as text, where
their time went, replayed beside recorded."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from loadtest.engine.block_text import fit
from loadtest.engine.blocks import BlockBase
from loadtest.model.agent_blocks import AgentTraceBlock
from loadtest.model.summary import Summary

if TYPE_CHECKING:
    from loadtest.features.agent_trace import ReplayPart
    from loadtest.measure.recorders import Metrics

__all__ = ["AGENT_TRACE", "render_agent_trace"]


def render_agent_trace(block: AgentTraceBlock) -> str:
    """Replayed agent sessions: where their time went, replayed beside recorded."""
    head = (
        f"agent sessions from a trace: {block['replayed']} replayed, "
        f"{block['completed']} completed, {block['failed']} failed, "
        f"{block['calls']} model calls"
    )
    total, rec = block["total"], block["recorded"]
    if total is None or rec is None:
        return fit([head, "where session time went: no data (no session completed)"])
    whole = total["session_ms"]
    reasoning = total.get("reasoning_ms")
    rows = [
        ("session", whole, rec["session_ms"]),
        ("  model: TTFT", total["ttft_ms"], None),
        ("  model: decode", total["decode_ms"], None),
        *((("    of which reasoning", reasoning, None),) if reasoning is not None else ()),
        ("  model: both", total["ttft_ms"] + total["decode_ms"], rec["model_ms"]),
        ("  tools", total["tools_ms"], rec["tools_ms"]),
        ("  other (agent work, lag)", total["other_ms"], rec["other_ms"]),
    ]
    lines = [
        head,
        f"{'where session time went':<28}{'replayed ms':>12}{'share':>8}{'recorded ms':>14}",
    ]
    for name, ms, was in rows:
        was_s = "" if was is None else f"{was:.1f}"
        lines.append(f"{name:<28}{ms:>12.1f}{ms / whole:>8.1%}{was_s:>14}".rstrip())
    share, lag = block["decode_share"], block["gap_lag_ms_max"]
    if share is not None:
        lines.append(f"decode holds {share:.1%} of session time: the most speculation can save")
    thought = block.get("reasoning_share")
    if thought is not None:
        lines.append(
            f"reasoning holds {thought:.1%} of session time (first reasoning token to answer)"
        )
    if lag is not None:
        lines.append(f"latest call past its recorded gap: {lag:.1f} ms")
    return fit(lines)


class _AgentTrace(BlockBase):
    """Replayed agent sessions (``features.agent_trace`` feeds it)."""

    model = AgentTraceBlock

    def merge(self, parts: Sequence[ReplayPart], metrics: Metrics) -> AgentTraceBlock:
        # Here, not at the top: reading a summary loads the block for its model only.
        from loadtest.features.agent_trace import merge_replays

        return merge_replays(parts)

    def render(self, block: AgentTraceBlock, summary: Summary) -> str | None:
        return render_agent_trace(block)


AGENT_TRACE = _AgentTrace()
