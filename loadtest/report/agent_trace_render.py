"""Replayed agent sessions as text: where their time went, replayed beside recorded."""

from __future__ import annotations

from loadtest.model.agent_blocks import AgentTraceBlock
from loadtest.report.table import fit

__all__ = ["render_agent_trace"]


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
