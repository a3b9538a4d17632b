"""What the simulated target's ``/metrics`` shows, under vLLM's names where vLLM has one."""

from __future__ import annotations

from typing import TYPE_CHECKING

from loadtest.sim.prometheus import Sample

if TYPE_CHECKING:
    from loadtest.sim.server import SimServer

__all__ = ["server_samples"]


def server_samples(server: SimServer) -> list[Sample]:
    """The server's gauges and counters, read at scrape time."""
    out: list[Sample] = [
        ("vllm:num_requests_running", "gauge", server.running, "Requests being served."),
        ("vllm:num_requests_waiting", "gauge", server.waiting, "Requests queued."),
        ("loadtest_sim_requests_served", "counter", server.served, "Requests ended."),
        (
            "loadtest_sim_cancellations",
            "counter",
            server.cancelled,
            "Requests whose client went away before the end.",
        ),
        ("loadtest_sim_cold_starts", "counter", server.cold_starts, "Warm-ups paid."),
        ("loadtest_sim_prefix_cache_hits", "counter", server.prefix_hits, "Prefix hits."),
    ]
    if server.kv.capacity > 0:
        usage = server.kv.usage
        out.append(("vllm:kv_cache_usage_perc", "gauge", usage, "Share of KV tokens held."))
    elif server.config.max_running > 0:
        usage = server.running / server.config.max_running
        out.append(("vllm:kv_cache_usage_perc", "gauge", usage, "Share of slots in use."))
    eng = server.engine
    if eng is not None:
        out += [
            (
                "vllm:spec_decode_num_draft_tokens",
                "counter",
                eng.draft_tokens,
                "Draft tokens proposed to the verifier.",
            ),
            (
                "vllm:spec_decode_num_accepted_tokens",
                "counter",
                eng.accepted_tokens,
                "Draft tokens the verifier accepted.",
            ),
            ("vllm:spec_decode_num_drafts", "counter", eng.drafts, "Draft steps."),
            (
                "loadtest_sim_draft_fallbacks",
                "counter",
                eng.health.fallbacks,
                "Switches from speculation to plain decoding.",
            ),
            ("loadtest_sim_plain_steps", "counter", eng.plain_steps, "Steps without draft."),
            ("loadtest_sim_speculating", "gauge", int(eng.speculating), "1 = drafts in use."),
        ]
    return out
