"""The simulator's request statistics as vLLM keeps them: token counters and histograms.

Names, label sets and bucket boundaries are vLLM 0.11.0's (``vllm/v1/metrics/loggers.py``,
``PrometheusStatLogger.__init__``; commit f71952c1c), listed in
``fixtures/vllm-metrics-0.11.0.json``, against which ``tests/test_sim_metrics.py`` holds
the page. Every figure comes from the request's own truth (received, admitted, first
token written, end), taken once when the request ends: a few histogram observations per
request, nothing per token.

One difference from vLLM, for that reason: vLLM observes the inter-token latency once
per engine step and request; the simulator observes, per request, its mean gap as many
times as it had gaps (one per step after the first: each token in the plain model, each
verify step with speculation). Count and sum are vLLM's; the spread within a request is
lost, so the quantiles of ``vllm:inter_token_latency_seconds`` are those of the
requests' mean gaps.
"""

from __future__ import annotations

from bisect import bisect_left

from loadtest.sim.model import ResponsePlan, Truth

__all__ = [
    "FINISH_REASONS",
    "ITL_BUCKETS",
    "REQUEST_LATENCY_BUCKETS",
    "TTFT_BUCKETS",
    "Histogram",
    "VllmStats",
    "buckets_1_2_5",
]

TTFT_BUCKETS = (
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75,
    1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0,
)  # fmt: skip
ITL_BUCKETS = (
    0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5,
    0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0,
)  # fmt: skip
"""Also ``vllm:time_per_output_token_seconds`` (the name before 0.11, still served) and
``vllm:request_time_per_output_token_seconds``."""
REQUEST_LATENCY_BUCKETS = (
    0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0,
    40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0,
)  # fmt: skip
PARAMS_N_BUCKETS = (1, 2, 5, 10, 20)
FINISH_REASONS = ("stop", "length", "abort")
"""vLLM's ``FinishReason`` (``vllm/v1/engine/__init__.py``): a tool call ends as ``stop``
in the engine, a request whose client went away as ``abort``."""


def buckets_1_2_5(max_value: int) -> tuple[int, ...]:
    """vLLM's ``build_1_2_5_buckets``: 1, 2, 5, 10, 20, 50, ... up to ``max_value``."""
    out: list[int] = []
    scale = 1
    while True:
        for mantissa in (1, 2, 5):
            if mantissa * scale > max_value:
                return tuple(out)
            out.append(mantissa * scale)
        scale *= 10


class Histogram:
    """A Prometheus histogram: a count per bucket (``le`` bounds, then +Inf) and a sum."""

    __slots__ = ("bounds", "counts", "total")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)
        self.total = 0.0

    def observe(self, value: float, times: int = 1) -> None:
        """Count ``value`` (``times`` over): into the first bucket whose bound is >= it."""
        self.counts[bisect_left(self.bounds, value)] += times
        self.total += value * times

    @property
    def count(self) -> int:
        """Observations so far."""
        return sum(self.counts)

    def cumulative(self) -> list[int]:
        """Counts at or below each bound, then the total (the +Inf bucket)."""
        out, running = [], 0
        for c in self.counts:
            running += c
            out.append(running)
        return out


_TIMES = (
    "vllm:time_to_first_token_seconds",
    "vllm:e2e_request_latency_seconds",
    "vllm:request_queue_time_seconds",
    "vllm:request_inference_time_seconds",
    "vllm:request_prefill_time_seconds",
    "vllm:request_decode_time_seconds",
    "vllm:inter_token_latency_seconds",
    "vllm:time_per_output_token_seconds",
    "vllm:request_time_per_output_token_seconds",
)
_SIZES = (
    "vllm:request_prompt_tokens",
    "vllm:request_generation_tokens",
    "vllm:request_max_num_generation_tokens",
    "vllm:request_params_n",
    "vllm:request_params_max_tokens",
)


class VllmStats:
    """Counters and histograms of the requests one simulator process ended."""

    __slots__ = (
        "_decoding",
        "_ended_tokens",
        "_last_write_ns",
        "finished",
        "histograms",
        "prompt_tokens",
    )

    def __init__(self, max_model_len: int) -> None:
        self.prompt_tokens = 0
        self._ended_tokens = 0
        self._decoding: dict[str, Truth] = {}
        """Requests admitted and not ended, by id: their tokens count as they are made."""
        self._last_write_ns: dict[str, int] = {}
        """Streams whose first token was observed, by id: when they last wrote."""
        self.finished = dict.fromkeys(FINISH_REASONS, 0)
        """Requests ended, by vLLM's finish reason (``vllm:request_success``)."""
        sizes = buckets_1_2_5(max_model_len)
        bounds: dict[str, tuple[float, ...]] = {
            "vllm:time_to_first_token_seconds": TTFT_BUCKETS,
            "vllm:inter_token_latency_seconds": ITL_BUCKETS,
            "vllm:time_per_output_token_seconds": ITL_BUCKETS,
            "vllm:request_time_per_output_token_seconds": ITL_BUCKETS,
            "vllm:request_params_n": PARAMS_N_BUCKETS,
        }
        self.histograms = {
            name: Histogram(bounds.get(name, REQUEST_LATENCY_BUCKETS)) for name in _TIMES
        } | {name: Histogram(bounds.get(name, sizes)) for name in _SIZES}

    def request_admitted(self, truth: Truth) -> None:
        """Count a request's output tokens from now on, as they are written."""
        self._decoding[truth.id] = truth

    def streamed(self, truth: Truth, steps: int, now_ns: int) -> None:
        """A stream wrote its next ``steps`` steps at ``now_ns``.

        vLLM observes the time to first token and each inter-token gap at the engine
        step that made it, as it counts generation tokens: observed only when a request
        ended, a window's TTFT and gap counts lagged its token counter by the requests
        still decoding, and tokens per decode step by the counters was off at its edges.
        """
        h = self.histograms
        last = self._last_write_ns.get(truth.id)
        if last is None:  # timed from when it began to write, as the truth has it
            first = truth.first_token_written_ns or now_ns
            h["vllm:time_to_first_token_seconds"].observe((first - truth.received_ns) / 1e9)
            steps, last = steps - 1, now_ns  # pieces due with the first are gaps of 0
        if steps > 0:
            gap_s = (now_ns - last) / 1e9 / steps
            h["vllm:inter_token_latency_seconds"].observe(gap_s, steps)
            h["vllm:time_per_output_token_seconds"].observe(gap_s, steps)
        self._last_write_ns[truth.id] = now_ns

    @property
    def generation_tokens(self) -> int:
        """Output tokens made so far, those of requests still decoding included.

        vLLM counts ``generation_tokens`` per engine step, as it counts the accepted
        drafts: counted only when a request ended, a window's accepted per decode step
        (accepted / (output - accepted - finished)) read 1.45 to 14.3 with 4 drafts a
        step, the in-flight requests' accepted drafts in it and their tokens not.
        """
        return self._ended_tokens + sum(t.tokens_written for t in self._decoding.values())

    def request_ended(
        self, plan: ResponsePlan, truth: Truth, admitted_ns: int, streamed: bool
    ) -> None:
        """Count one request that was admitted and has ended (``truth.end_ns`` set).

        Every such request counts in ``request_success`` and the end-to-end and queue
        histograms; the ones that got a first token also in the prefill, decode and
        token histograms (a request cancelled before it has none to give). A whole
        (not streamed) answer is written with its last token: its first was the
        engine's when it was due (``first_token_scheduled_ns``).
        """
        self._decoding.pop(truth.id, None)
        live = self._last_write_ns.pop(truth.id, None) is not None
        h = self.histograms
        end = truth.end_ns if truth.end_ns is not None else admitted_ns
        reason = plan.finish_reason if truth.outcome == "ok" else "abort"
        self.finished["stop" if reason == "tool_calls" else reason] += 1
        h["vllm:e2e_request_latency_seconds"].observe((end - truth.received_ns) / 1e9)
        h["vllm:request_queue_time_seconds"].observe((admitted_ns - truth.received_ns) / 1e9)
        h["vllm:request_params_n"].observe(1)  # the simulator answers one choice
        h["vllm:request_params_max_tokens"].observe(plan.max_tokens)
        h["vllm:request_max_num_generation_tokens"].observe(plan.max_tokens)
        first = truth.first_token_written_ns if streamed else truth.first_token_scheduled_ns
        if first is None or truth.tokens_written == 0:
            return
        tokens = truth.tokens_written
        self.prompt_tokens += plan.prompt_tokens
        self._ended_tokens += tokens
        h["vllm:request_prompt_tokens"].observe(plan.prompt_tokens)
        h["vllm:request_generation_tokens"].observe(tokens)
        if not live:  # a whole answer: timed by its plan, observed with its end
            h["vllm:time_to_first_token_seconds"].observe((first - truth.received_ns) / 1e9)
        h["vllm:request_prefill_time_seconds"].observe((first - admitted_ns) / 1e9)
        h["vllm:request_inference_time_seconds"].observe((end - admitted_ns) / 1e9)
        decode_s = (end - first) / 1e9
        h["vllm:request_decode_time_seconds"].observe(decode_s)
        h["vllm:request_time_per_output_token_seconds"].observe(
            decode_s / (tokens - 1) if tokens > 1 else 0.0
        )
        gaps = truth.steps - 1
        if gaps > 0 and not live:
            h["vllm:inter_token_latency_seconds"].observe(decode_s / gaps, gaps)
            h["vllm:time_per_output_token_seconds"].observe(decode_s / gaps, gaps)
