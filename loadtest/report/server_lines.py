"""The summary's ``server`` block as printed lines: what the engine itself counted.

Printed under the latency table, beside loadtest's own figures: the engine, the window
its counters were read over, speculation (the engine's acceptance and accepted tokens per
verify step beside loadtest's tokens per step - 1), the prefix cache, the server's own
TTFT and inter-token percentiles with client TTFT minus server TTFT (the network and
client share), and the gauges' peaks. Nothing is printed where nothing was scraped.
"""

from __future__ import annotations

from loadtest.model.summary import Percentiles, ServerBlock, Summary

__all__ = ["server_lines"]


def _pct(p: Percentiles) -> str:
    return f"p50 {p.get('p50', 0.0):.1f}  p95 {p.get('p95', 0.0):.1f}"


def _speculation(server: ServerBlock, summary: Summary) -> list[str]:
    rate = server.get("acceptance_rate")
    drafted, accepted = server.get("draft_tokens"), server.get("accepted_tokens")
    if rate is None and not drafted:
        return []
    head = f"  speculation: acceptance {rate:.1%}" if rate is not None else "  speculation:"
    if drafted is not None and accepted is not None:
        head += f" ({accepted}/{drafted} drafted tokens)"
    positions = server.get("accepted_per_position")
    if positions:
        head += "; by position " + " ".join(f"{p:.2f}" for p in positions)
    lines = [head]
    per_step, per_draft = server.get("accepted_per_step"), server.get("accepted_per_draft")
    if per_step is not None:
        line = f"  accepted per decode step: engine {per_step:.2f}"
        tps = summary["tokens_per_step"]
        if tps["count"]:
            line += f", loadtest {tps.get('mean', 0.0) - 1:.2f} (tokens per step - 1)"
        if per_draft is not None:
            line += f"; per drafted step {per_draft:.2f}"
        lines.append(line)
    return lines


def _latency(server: ServerBlock, summary: Summary) -> list[str]:
    out = []
    ttft = server.get("ttft_ms")
    if ttft:
        line = f"  server TTFT ms {_pct(ttft)}"
        client = summary["metrics"].get("ttft_ms")
        if client and client["count"] and "p50" in ttft:
            share = client.get("p50", 0.0) - ttft["p50"]
            line += f"; client p50 minus server p50 {share:.1f} (network and client)"
        out.append(line)
        if client and client["count"]:
            # vLLM's TTFT buckets are 0.5, 0.75, 1, 2.5 s... apart at these latencies.
            out.append("    (the server's percentiles are interpolated in its histogram buckets)")
    itl = server.get("itl_ms")
    if itl:
        out.append(f"  server inter-token ms {_pct(itl)} (the engine's, tool-call streams too)")
    parts = [
        f"{label} {_pct(p)}"
        for label, p in (
            ("queue", server.get("queue_ms")),
            ("prefill", server.get("prefill_ms")),
            ("decode", server.get("decode_ms")),
        )
        if p
    ]
    if parts:
        out.append("  server per request ms: " + "; ".join(parts))
    note = server.get("latency_note")
    if note:
        out.append(f"  server latency: {note}")
    return out


def server_lines(summary: Summary) -> list[str]:
    """The lines of the server block (none when the endpoint gave no metrics)."""
    server = summary.get("server")
    if not server or not server.get("scraped"):
        return []
    window = {"measured": "the measured window", "run": "the whole run (no window edges)"}
    where = window.get(server.get("window", ""), "the run")
    head = f"server ({server.get('engine') or 'unknown'}): counters over {where}"
    lines = ["", head]
    lines += _speculation(server, summary)
    hits, queries = server.get("prefix_cache_hits"), server.get("prefix_cache_queries")
    if hits is not None and queries:
        share = f"{hits / queries:.0%}"
        lines.append(f"  prefix cache: {hits}/{queries} prompt tokens served ({share})")
    lines += _latency(server, summary)
    peaks = [
        f"{label} {server[key]:g}"  # type: ignore[literal-required]
        for label, key in (
            ("running peak", "running_peak"),
            ("waiting peak", "waiting_peak"),
            ("RSS peak MiB", "target_rss_mib_peak"),
        )
        if key in server
    ]
    kv = server.get("kv_cache_usage_peak")
    if kv is not None:
        peaks.append(f"KV cache peak {kv:.1%}")
    preempted = server.get("preemptions")
    if preempted is not None:
        peaks.append(f"preemptions {preempted}")
    if peaks:
        lines.append("  " + "  ".join(peaks))
    return lines
