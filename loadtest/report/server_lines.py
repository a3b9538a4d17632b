"""The summary's ``server`` block as printed lines: what the engine itself counted.

Printed under the latency table, beside loadtest's own figures: the engine, the window
its counters were read over, speculation (the engine's acceptance and accepted tokens per
verify step beside loadtest's tokens per step - 1), the prefix cache, the server's own
TTFT and inter-token percentiles with client TTFT minus server TTFT (the network and
client share), and the gauges' peaks. Nothing is printed where nothing was scraped.
"""

from __future__ import annotations

from loadtest.model.summary import (
    Percentiles,
    ServerBlock,
    ServerBucket,
    ServerResolution,
    Summary,
)

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
    ours = _pooled(summary)
    if per_step is not None or ours is not None:
        engine = "-" if per_step is None else f"{per_step:.2f}"
        line = f"  accepted per decode step: engine {engine} (all requests)"
        if ours is not None:
            line += f", loadtest {ours}"
        if per_draft is not None:
            line += f"; per drafted step {per_draft:.2f}"
        lines.append(line)
    if "accepted_per_step_note" in server:
        lines.append(f"  engine's accepted per decode step: {server['accepted_per_step_note']}")
    return lines


def _pooled(summary: Summary) -> str | None:
    """loadtest's accepted per decode step with what it is over, or None.

    Pooled (tokens over steps of every text stream), as the engine's counters pool: the
    mean of each request's own figure read 1.35 beside the engine's 0.76 on one run,
    its short answers weighing as much as the long ones. A summary written before the
    pooled counts were kept has only that mean, and says so."""
    pooled = summary.get("decode_steps")
    if pooled is not None:
        tps = pooled["tokens_per_step"]
        if tps is None:
            return None
        return f"{tps - 1:.2f} ({pooled['streams']} text streams: tokens per step - 1)"
    mean = summary.get("tokens_per_step")
    if not mean or not mean["count"]:
        return None
    return f"{mean.get('mean', 0.0) - 1:.2f} (mean of each request's tokens per step - 1)"


def _wide(value: float, bucket: ServerBucket) -> bool:
    """A bucket wider than a fifth of the figure inside it: the figure is the
    interpolation's guess, not something the server measured (vLLM's queue buckets start
    at 0-300 ms). Half was the bound once: ``decode p50 1421.9`` was printed from a
    1000-1500 ms bucket beside a client end-to-end p50 of 1267.7, which it cannot exceed
    for the same requests; within a fifth, any value of the bucket is within 20% of it.
    vLLM's buckets are 1.25x apart or more, so its figures print as buckets nearly always:
    that is all its histograms know."""
    upper = bucket["upper_ms"]
    return upper is None or upper - bucket["lower_ms"] > value / 5


def _span(bucket: ServerBucket) -> str:
    upper = bucket["upper_ms"]
    if upper is None:
        return f"> {bucket['lower_ms']:g}"
    if bucket["lower_ms"] == 0:
        return f"< {upper:g}"
    return f"{bucket['lower_ms']:g}-{upper:g}"


def _figures(
    label: str, p: Percentiles, res: ServerResolution | None, p50_as_bucket: bool = False
) -> tuple[str, bool]:
    """``label p50 X p95 Y``, each figure replaced by its bucket where that is wide; one
    bucket holding both is said as such (``queue < 300 ms: all 1,257 in the first
    bucket``); and whether a figure went out as a number, a guess inside its bucket.
    ``p50_as_bucket``: the line goes on to call the p50 known only to its bucket, so a
    number printed for it would be refuted by its own line."""
    if res is None:  # a summary written before buckets were kept
        return f"{label} {_pct(p)}", True
    p50, p95 = p.get("p50", 0.0), p.get("p95", 0.0)
    b50, b95 = res["p50"], res["p95"]
    same = (b50["lower_ms"], b50["upper_ms"]) == (b95["lower_ms"], b95["upper_ms"])
    wide50 = p50_as_bucket or _wide(p50, b50)
    if same and wide50:
        holds, seen = b50["holds"], res["observed"]
        share = f"all {seen:,}" if holds == seen else f"{holds:,} of {seen:,}"
        where = (
            "the first bucket"
            if b50["lower_ms"] == 0
            else ("the top bucket" if b50["upper_ms"] is None else "one bucket")
        )
        return f"{label} {_span(b50)} ms: {share} in {where}", False
    wide95 = _wide(p95, b95)
    shown50 = _span(b50) if wide50 else f"{p50:.1f}"
    shown95 = _span(b95) if wide95 else f"{p95:.1f}"
    return f"{label} p50 {shown50}  p95 {shown95}", not (wide50 and wide95)


def _tellable(client_p50: float, server_p50: float, res: ServerResolution | None) -> bool:
    """Whether client TTFT p50 minus the server's means something: only where the
    server's bucket is narrower than the difference; otherwise the difference is the
    interpolation's, not the network's (a negative "network time" was printed from a
    0-500 ms bucket)."""
    if res is None:
        return True
    upper = res["p50"]["upper_ms"]
    return upper is not None and abs(client_p50 - server_p50) > upper - res["p50"]["lower_ms"]


def _network_share(client_p50: float, server_p50: float, res: ServerResolution | None) -> str:
    if res is None:
        return f"; client p50 minus server p50 {client_p50 - server_p50:.1f} (network and client)"
    if _tellable(client_p50, server_p50, res):
        # From the bucket, not the interpolation: the line prints the bucket, and a
        # difference from a figure it does not show could not be checked against it.
        lower = res["p50"]["lower_ms"]
        upper = res["p50"]["upper_ms"] or lower  # tellable: never the open top bucket
        return (
            f"; client p50 minus server p50 {client_p50 - upper:.1f} to "
            f"{client_p50 - lower:.1f} (network and client)"
        )
    return (
        f"; network and client share: cannot tell (client p50 {client_p50:.1f}, "
        f"the server's p50 only known to be {_span(res['p50'])} ms)"
    )


def _latency(server: ServerBlock, summary: Summary) -> list[str]:
    out = []
    resolution = server.get("resolution") or {}
    ttft = server.get("ttft_ms")
    guessed = False  # a figure printed as a number, a guess inside its bucket
    if ttft:
        client = summary["metrics"].get("ttft_ms")
        share, untold = "", False
        if client and client["count"] and "p50" in ttft:
            cp50, res = client.get("p50", 0.0), resolution.get("ttft")
            share = _network_share(cp50, ttft["p50"], res)
            untold = not _tellable(cp50, ttft["p50"], res)
        figures, guessed = _figures("", ttft, resolution.get("ttft"), p50_as_bucket=untold)
        out.append(f"  server TTFT ms {figures.lstrip()}{share}")
    itl = server.get("itl_ms")
    if itl:
        figures, guess = _figures("", itl, resolution.get("itl"))
        guessed |= guess
        # The client's TPOT leaves tool-call streams out; the engine's gaps do not. Said
        # only where there were any: a code run read "tool-call streams too".
        calls = summary["tool_calls"]["responses_with_calls"] if "tool_calls" in summary else 0
        whose = "the engine's, tool-call streams too" if calls else "the engine's"
        out.append(f"  server inter-token ms {figures.lstrip()} ({whose})")
    parts = []
    for label, p in (
        ("queue", server.get("queue_ms")),
        ("prefill", server.get("prefill_ms")),
        ("decode", server.get("decode_ms")),
    ):
        if p:
            figures, guess = _figures(label, p, resolution.get(label))
            guessed |= guess
            parts.append(figures)
    if parts:
        out.append("  server per request ms: " + "; ".join(parts))
    if guessed:
        # A figure inside a bucket is a linear guess in it; where the bucket is wide the
        # bucket is printed instead (vLLM's TTFT buckets: 0.5, 0.75, 1, 2.5 s...).
        out.append("    (server figures are interpolated inside their histogram buckets)")
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
    warm = summary["requests"]["warmup"] if "requests" in summary else 0
    if server.get("window") == "measured" and warm:
        # A warm-up request that ended inside the window is in its queue and decode
        # counts: "all 28" beside 20 measured requests read as a miscount.
        head += ", each request counted where the server observed it (warm-up ones too)"
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
