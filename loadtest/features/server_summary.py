"""The ``server`` block of a summary, from the ``/metrics`` samples of a run (its
registered block, ``SERVER``, and whether the simulator served the run).

Rates are the change of a server's counters between the scrapes at the measured window's
edges (acceptance, acceptance by position, prefix-cache hits), as the latency tables
exclude the warm-up; only a run without edge rows (cut short) falls back to the first
and last scrape, and says so (``window``). Latency percentiles come from the histograms
of the same two scrapes; peaks are of each gauge over the run.
"""

from __future__ import annotations

from typing import Any, Literal

from loadtest.engine.blocks import BlockBase
from loadtest.features.histograms import Buckets, bucket_bounds, bucket_quantile, buckets_between
from loadtest.features.scrape import SIM_ENGINE
from loadtest.model.summary import (
    Percentiles,
    ServerBlock,
    ServerBucket,
    ServerResolution,
    Summary,
)

Row = dict[str, Any]
"""One scrape as ``Scraper`` records it (a row of metrics.jsonl)."""

__all__ = [
    "SERVER",
    "acceptance",
    "accepted_per_step",
    "position_rates",
    "served_by_simulator",
    "streamed_per_step",
    "summarize_samples",
    "window_latency",
]


def acceptance(first: Row, last: Row) -> float | None:
    """Accepted / drafted tokens between two samples, None without drafts between them."""
    return _rate(first, last, "accepted_tokens", "draft_tokens")


def _rate(first: Row, last: Row, part: str, whole: str) -> float | None:
    """How much ``part`` grew over how much ``whole`` grew, None where ``whole`` did not."""
    try:
        grew = float(last[whole]) - float(first[whole])
        of_it = float(last[part]) - float(first[part])
    except (KeyError, TypeError):
        return None
    return of_it / grew if grew > 0 else None


def position_rates(first: Row, last: Row) -> list[float] | None:
    """P(the draft's token at position ``i`` is accepted), by position, between two
    samples: accepted drafts at each position over drafts; None without drafts."""
    drafts = float(last.get("drafts", 0.0)) - float(first.get("drafts", 0.0))
    if drafts <= 0:
        return None
    before = list(first.get("accepted_per_position") or [])
    after = list(last.get("accepted_per_position") or [])
    before += [0.0] * (len(after) - len(before))
    return [round((a - b) / drafts, 6) for a, b in zip(after, before, strict=False)]


def window_latency(rows: list[Row], out: ServerBlock) -> None:
    """Add the server's own TTFT, ITL, queue, prefill and decode p50/p95 over the measured
    window to ``out``: the histograms of the scrapes at its two edges, subtracted (what
    the server saw between them), or a ``latency_note`` saying why not."""
    if not any("histograms" in r for r in rows):
        return  # the server keeps no such histograms: nothing to say
    start = next((r for r in rows if r.get("edge") == "start" and "histograms" in r), None)
    end = next((r for r in reversed(rows) if r.get("edge") == "end" and "histograms" in r), None)
    if start is None or end is None:
        out["latency_note"] = (
            "the server's latency histograms were not scraped at both edges of the "
            "measured window (a run cut short, or one that ended in its warm-up)"
        )
        return
    for key in ("ttft", "itl", "queue", "prefill", "decode"):
        if key not in start["histograms"] or key not in end["histograms"]:
            continue
        seen = buckets_between(start["histograms"][key], end["histograms"][key])
        if seen is None:
            out["latency_note"] = f"the server's {key} histogram went back between the edges"
            continue
        p50, p95 = bucket_quantile(0.5, seen), bucket_quantile(0.95, seen)
        if p50 is None or p95 is None:
            if key in ("ttft", "itl"):  # the others are extras: absent says enough
                out["latency_note"] = f"the server observed no {key} in the measured window"
            continue
        found: Percentiles = {"p50": round(p50 * 1000, 3), "p95": round(p95 * 1000, 3)}
        out.setdefault("resolution", {})[key] = _resolution(seen)
        if key == "ttft":
            out["ttft_ms"] = found
            out["histogram_requests"] = round(seen["counts"][-1])
        elif key == "itl":
            out["itl_ms"] = found
        elif key == "queue":
            out["queue_ms"] = found
        elif key == "prefill":
            out["prefill_ms"] = found
        else:
            out["decode_ms"] = found


def _bucket(q: float, seen: Buckets) -> ServerBucket:
    bounds = bucket_bounds(q, seen)
    assert bounds is not None  # only called where the window observed something
    lower, upper, holds = bounds
    return {
        "lower_ms": round(lower * 1000, 3),
        "upper_ms": None if upper == float("inf") else round(upper * 1000, 3),
        "holds": round(holds),
    }


def _resolution(seen: Buckets) -> ServerResolution:
    return {
        "observed": round(seen["counts"][-1]),
        "p50": _bucket(0.5, seen),
        "p95": _bucket(0.95, seen),
    }


def accepted_per_step(first: Row, last: Row) -> float | None:
    """The engine's accepted drafts per decode step between two samples.

    Every step emits one token of the target's own beside the drafts it accepted, and
    each request's first token comes from its prefill: decode steps = output tokens -
    accepted - finished requests. A request cut by ``max_tokens`` may have accepted
    drafts past its end (counted, not sent), which lowers the steps by as many: on
    outputs of a few tokens read it as an upper bound. None without those counters.
    """
    grown = [_grew(first, last, k) for k in ("accepted_tokens", "generation_tokens")]
    done = _grew(first, last, "finished_requests")
    accepted, output = grown
    if accepted is None or output is None or done is None:
        return None
    steps = output - accepted - done
    return round(accepted / steps, 4) if steps > 0 else None


def streamed_per_step(first: Row, last: Row) -> float | None:
    """Accepted per decode step from what the engine sent, not from what it accepted.

    vLLM observes one inter-token gap per request per engine step after its first
    token, and one TTFT per first token: decode steps = the gap histogram's count, and
    their tokens = output - first tokens. Drafts accepted past a request's
    ``max_tokens`` are counted as accepted and never sent, so accepted / steps read
    1.30 where the requests' own streams held 1.18 (short tool calls of a 48-token
    limit): this one is that of the streams. None without both histograms at both
    samples (llama.cpp keeps none; a run cut short has no end edge).
    """
    output = _grew(first, last, "generation_tokens")
    before, after = first.get("histograms") or {}, last.get("histograms") or {}
    counts = []
    for key in ("ttft", "itl"):
        if key not in before or key not in after:
            return None
        seen = buckets_between(before[key], after[key])
        if seen is None:
            return None
        counts.append(seen["counts"][-1])
    firsts, steps = counts
    if output is None or steps <= 0:
        return None
    return round((output - firsts) / steps - 1, 4)


def _edges(ok: list[Row]) -> tuple[Row, Row, str]:
    """The scrapes at the measured window's start and end, or the first and last."""
    start = next((r for r in ok if r.get("edge") == "start"), None)
    end = next((r for r in reversed(ok) if r.get("edge") == "end"), None)
    if start is None or end is None:
        return ok[0], ok[-1], "run"
    return start, end, "measured"


def _grew(first: Row, last: Row, key: str) -> int | None:
    """How much a counter grew between two samples (None where the last lacks it)."""
    if key not in last:
        return None
    return round(float(last[key]) - float(first.get(key, 0.0)))


PeakKey = Literal[
    "running_peak",
    "waiting_peak",
    "kv_cache_usage_peak",
    "gpu_memory_mib_peak",
    "gpu_power_w_peak",
    "target_rss_mib_peak",
]


def summarize_samples(samples: list[Row]) -> ServerBlock:
    """Acceptance over the run and the peak of each gauge."""
    ok = [s for s in samples if s.get("ok")]
    out: ServerBlock = {"samples": len(samples), "scraped": len(ok)}
    if not ok:
        return out
    out["engine"] = ok[-1].get("engine")
    first, last, out["window"] = _edges(ok)
    out["acceptance_rate"] = acceptance(first, last)
    if last.get("accepted_per_position"):
        out["accepted_per_position"] = position_rates(first, last)
    if "drafts" in last or "draft_tokens" in last:
        grown = {k: _grew(first, last, k) for k in ("drafts", "draft_tokens", "accepted_tokens")}
        for counter in ("drafts", "draft_tokens", "accepted_tokens"):
            count = grown[counter]
            if count is not None:
                out[counter] = count
        drafts, accepted = grown["drafts"], grown["accepted_tokens"]
        if drafts is not None and accepted is not None:
            out["accepted_per_draft"] = round(accepted / drafts, 4) if drafts else None
        per_step = streamed_per_step(first, last)
        if per_step is None:
            per_step = accepted_per_step(first, last)
        k = len(last.get("accepted_per_position") or ())
        if per_step is not None and k and per_step > k:
            # More accepted per step than drafted per step: the counters' window cut
            # through requests (an engine counting output only at a request's end).
            out["accepted_per_step_note"] = (
                f"{per_step:.2f} accepted per decode step with {k} drafted: the counters "
                "disagree over this window"
            )
        elif per_step is not None:
            out["accepted_per_step"] = per_step
    if "prefix_cache_queries" in last:
        hit_rate = _rate(first, last, "prefix_cache_hits", "prefix_cache_queries")
        out["prefix_cache_hit_rate"] = hit_rate
        hits = _grew(first, last, "prefix_cache_hits")
        queries = _grew(first, last, "prefix_cache_queries")
        if hits is not None and queries is not None:
            out["prefix_cache_hits"], out["prefix_cache_queries"] = hits, queries
    preemptions = _grew(first, last, "preemptions")
    if preemptions is not None:
        out["preemptions"] = preemptions
    window_latency(ok, out)

    def peak(field: str, rows: list[Row]) -> float | None:
        return max((r[field] for r in rows if field in r), default=None)

    peaks: tuple[tuple[PeakKey, float | None], ...] = (
        ("running_peak", peak("running", ok)),
        ("waiting_peak", peak("waiting", ok)),
        ("kv_cache_usage_peak", peak("kv_cache_usage", ok)),
        ("gpu_memory_mib_peak", peak("gpu_memory_mib", ok)),
        ("gpu_power_w_peak", peak("gpu_power_w", ok)),
        ("target_rss_mib_peak", peak("target_rss_mib", samples)),
    )
    for key, value in peaks:
        if value is not None:
            out[key] = value
    if "fallbacks" in ok[-1]:
        # A count: the counter is parsed as a float, the summary prints it as one.
        out["fallbacks"] = round(ok[-1]["fallbacks"] - ok[0].get("fallbacks", 0))
    return out


class _Server(BlockBase):
    """The scraped server, from the one process that scrapes it (the rig); null when the
    run scraped none. Printed inside the table (``report.server_lines``)."""

    model = ServerBlock | None
    empty: object = None


SERVER = _Server()


def served_by_simulator(summary: Summary) -> bool:
    """Whether loadtest's simulator answered: the built-in one (``run.simulated``), or
    one whose ``/metrics`` said so (``loadtest sim`` behind ``--endpoint``, and a
    summary rebuilt after a kill, whose run.json predates the flag). Its tool calls are
    random: "0/11 match the expected answer" was printed for a rebuilt run of it."""
    if summary["run"].get("simulated"):
        return True
    server = summary.get("server")
    return server is not None and server.get("engine") == SIM_ENGINE
