"""What the simulated target's ``/metrics`` shows: vLLM's families, then the simulator's own.

The ``vllm:`` families are vLLM 0.11.0's names, types, labels (``model_name`` and
``engine`` on each) and bucket boundaries, from ``vllm/v1/metrics/loggers.py`` and
``vllm/v1/spec_decode/metrics.py`` (listed, with what is left out and why, in
``fixtures/vllm-metrics-0.11.0.json`` and docs/simulator.md). ``loadtest_sim_*`` are
the simulator's own counters, unlabelled.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from loadtest.sim.kv import KvPool
from loadtest.sim.model import SimConfig
from loadtest.sim.prefix import PrefixCache
from loadtest.sim.prometheus import (
    Metric,
    Sample,
    counter,
    counter_by,
    gauge,
    histogram,
    plain_families,
)

if TYPE_CHECKING:
    from loadtest.sim.engine import StepEngine
    from loadtest.sim.vllm_stats import VllmStats

__all__ = ["ServedState", "server_samples"]


class ServedState(Protocol):
    """What a scrape reads of the server (``SimServer`` is one): the page is built from
    its state, so this module needs no import of the server, which serves the page."""

    config: SimConfig
    prefix: PrefixCache
    stats: VllmStats
    kv: KvPool
    engine: StepEngine | None
    running: int
    waiting: int
    served: int
    cancelled: int
    cold_starts: int


_HELP = {
    "vllm:time_to_first_token_seconds": "Histogram of time to first token in seconds.",
    "vllm:inter_token_latency_seconds": (
        "Histogram of inter-token latency in seconds. The simulator observes each "
        "request's mean gap once per gap (vLLM: each gap)."
    ),
    "vllm:time_per_output_token_seconds": (
        "Histogram of time per output token in seconds."
        "DEPRECATED: Use vllm:inter_token_latency_seconds instead."
    ),
    "vllm:request_time_per_output_token_seconds": (
        "Histogram of time_per_output_token_seconds per request."
    ),
    "vllm:e2e_request_latency_seconds": "Histogram of e2e request latency in seconds.",
    "vllm:request_queue_time_seconds": "Histogram of time spent in WAITING phase for request.",
    "vllm:request_inference_time_seconds": (
        "Histogram of time spent in RUNNING phase for request."
    ),
    "vllm:request_prefill_time_seconds": "Histogram of time spent in PREFILL phase for request.",
    "vllm:request_decode_time_seconds": "Histogram of time spent in DECODE phase for request.",
    "vllm:request_prompt_tokens": "Number of prefill tokens processed.",
    "vllm:request_generation_tokens": "Number of generation tokens processed.",
    "vllm:request_max_num_generation_tokens": (
        "Histogram of maximum number of requested generation tokens."
    ),
    "vllm:request_params_n": "Histogram of the n request parameter.",
    "vllm:request_params_max_tokens": "Histogram of the max_tokens request parameter.",
}


def server_samples(server: ServedState) -> list[Metric]:
    """The server's gauges, counters and histograms, read at scrape time."""
    labels = {"model_name": server.config.model, "engine": "0"}
    stats, prefix = server.stats, server.prefix
    if server.kv.capacity > 0:
        usage = server.kv.usage
    elif server.config.max_running > 0:
        usage = server.running / server.config.max_running
    else:
        usage = 0.0  # nothing bounds it: no KV limit and no slot limit
    out = [
        gauge(
            "vllm:num_requests_running",
            "Number of requests in model execution batches.",
            labels,
            server.running - server.kv.parked,
        ),
        gauge(
            "vllm:num_requests_waiting",
            "Number of requests waiting to be processed.",
            labels,
            server.waiting + server.kv.parked,  # a preempted request waits again
        ),
        gauge(
            "vllm:kv_cache_usage_perc",
            "KV-cache usage. 1 means 100 percent usage. The simulator: KV tokens held "
            "over --kv-tokens, else running over --max-running, else 0.",
            labels,
            usage,
        ),
        counter(
            "vllm:prefix_cache_queries",
            "Prefix cache queries, in terms of number of queried tokens.",
            labels,
            prefix.query_tokens,
        ),
        counter(
            "vllm:prefix_cache_hits",
            "Prefix cache hits, in terms of number of cached tokens.",
            labels,
            prefix.hit_tokens,
        ),
        counter(
            "vllm:num_preemptions",
            "Cumulative number of preemption from the engine.",
            labels,
            server.kv.preemptions,
        ),
        counter(
            "vllm:prompt_tokens", "Number of prefill tokens processed.", labels, stats.prompt_tokens
        ),
        counter(
            "vllm:generation_tokens",
            "Number of generation tokens processed.",
            labels,
            stats.generation_tokens,
        ),
        counter_by(
            "vllm:request_success",
            "Count of successfully processed requests.",
            labels,
            "finished_reason",
            dict(stats.finished),
        ),
    ]
    for name, h in stats.histograms.items():
        out.append(histogram(name, _HELP[name], labels, h.bounds, h.cumulative(), h.total))
    if server.engine is not None and server.engine.drafting:
        out += _speculative(server.engine, labels)
    out += plain_families(_own(server))
    return out


def _speculative(eng: StepEngine, labels: dict[str, str]) -> list[Metric]:
    per_position = eng.accepted_per_position()
    return [
        counter(
            "vllm:spec_decode_num_drafts", "Number of spec decoding drafts.", labels, eng.drafts
        ),
        counter(
            "vllm:spec_decode_num_draft_tokens", "Number of draft tokens.", labels, eng.draft_tokens
        ),
        counter(
            "vllm:spec_decode_num_accepted_tokens",
            "Number of accepted tokens.",
            labels,
            eng.accepted_tokens,
        ),
        counter_by(
            "vllm:spec_decode_num_accepted_tokens_per_pos",
            "Accepted tokens per draft position.",
            labels,
            "position",
            {str(i): n for i, n in enumerate(per_position)},
        ),
    ]


def _own(server: ServedState) -> list[Sample]:
    out: list[Sample] = [
        ("loadtest_sim_requests_served", "counter", server.served, "Requests ended."),
        (
            "loadtest_sim_cancellations",
            "counter",
            server.cancelled,
            "Requests whose client went away before the end.",
        ),
        ("loadtest_sim_cold_starts", "counter", server.cold_starts, "Warm-ups paid."),
        ("loadtest_sim_prefix_cache_hits", "counter", server.prefix.hits, "Prefix hits."),
    ]
    eng = server.engine
    if eng is not None and eng.drafting:
        out += [
            (
                "loadtest_sim_draft_calls",
                "counter",
                eng.draft_calls,
                "Proposal calls to the draft, one per verify step for the whole batch.",
            ),
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
