"""The simulator's ``/metrics`` against vLLM 0.11.0's own list (names, types, labels,
buckets), and its counters and histograms against the requests it served."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest
from prometheus_client.parser import text_string_to_metric_families

from loadtest.sim import SimConfig
from loadtest.sim.process import InProcessSim
from loadtest.sim.tokenize import MAX_MODEL_LEN
from loadtest.sim.vllm_stats import buckets_1_2_5

VLLM = orjson.loads(
    (Path(__file__).parent.parent / "fixtures" / "vllm-metrics-0.11.0.json").read_bytes()
)
K = 4
ACCEPT = 0.8
MODEL = "sim-served"
# Families vLLM registers by default that the simulator leaves out, and why.
NOT_SERVED = {
    # An info gauge whose labels are vLLM's CacheConfig fields, which the simulator lacks.
    "vllm:cache_config_info",
    # Tokens per engine step: the plain model has no steps to count.
    "vllm:iteration_tokens_total",
}


@asynccontextmanager
async def _target(**settings: Any) -> AsyncIterator[InProcessSim]:
    """A speculative target and its draft (``speculative=False``: a plain server)."""
    speculative = settings.pop("speculative", True)
    base = {"model": MODEL, "itl_ms": 2.0, "itl_sigma": 0.0, "ttft_ms": 2.0, **settings}
    if not speculative:
        async with InProcessSim(SimConfig(**base)) as plain:
            yield plain
        return
    async with InProcessSim(SimConfig(role="draft", draft_token_ms=0.1)) as draft:
        cfg = SimConfig(
            draft_url=draft.url,
            spec_k=K,
            accept_chat=ACCEPT,
            draft_timeout_ms=2000.0,  # no fallback from one slow draft call on a busy machine
            **base,
        )
        async with InProcessSim(cfg) as target:
            yield target


async def _ask(
    s: aiohttp.ClientSession, url: str, i: int, stream: bool = True, max_tokens: int = 40
) -> None:
    body = {
        "model": MODEL,
        "messages": [{"role": "user", "content": f"tell me about {i} " * 20}],
        "max_tokens": max_tokens,
        "ignore_eos": True,  # exactly max_tokens: the answers are told apart by length
        "stream": stream,
    }
    async with s.post(url + "/v1/chat/completions", json=body) as resp:
        assert resp.status == 200
        await resp.read()


async def _page(sim: InProcessSim, requests: int, **kw: Any) -> dict[str, Any]:
    async with aiohttp.ClientSession() as s:
        await asyncio.gather(*(_ask(s, sim.url, i, **kw) for i in range(requests)))
        async with s.get(sim.url + "/metrics") as resp:
            text = await resp.text()
    return {f.name: f for f in text_string_to_metric_families(text)}


def _served_families(speculative: bool) -> dict[str, dict[str, Any]]:
    whens = {"always", "speculative"} if speculative else {"always"}
    return {
        f["name"]: f for f in VLLM["families"] if f["when"] in whens and f["name"] not in NOT_SERVED
    }


def _bounds(spec: dict[str, Any]) -> list[float]:
    buckets = spec["buckets"]
    if buckets == "max_model_len_1_2_5":
        buckets = buckets_1_2_5(MAX_MODEL_LEN)
    return [float(b) for b in buckets]


@pytest.mark.parametrize("speculative", [True, False])
async def test_the_page_has_vllms_names_types_labels_and_buckets(speculative: bool) -> None:
    async with _target(speculative=speculative) as sim:
        page = await _page(sim, 3)
    want = _served_families(speculative)
    ours = {name: f for name, f in page.items() if name.startswith("vllm:")}
    assert sorted(ours) == sorted(want)
    for name, family in ours.items():
        spec = want[name]
        assert family.type == spec["type"], name
        for sample in family.samples:
            labels = {k: v for k, v in sample.labels.items() if k != "le"}
            assert sorted(labels) == sorted(spec["labels"]), name
            assert labels["model_name"] == MODEL and labels["engine"] == "0", name
        if spec["type"] == "histogram":
            les = [s.labels["le"] for s in family.samples if s.name.endswith("_bucket")]
            assert [float(le) for le in les[:-1]] == _bounds(spec), name
            assert les[-1] == "+Inf", name
    reasons = [s.labels["finished_reason"] for s in page["vllm:request_success"].samples]
    assert reasons == VLLM["finished_reasons"]
    if speculative:
        per_pos = page["vllm:spec_decode_num_accepted_tokens_per_pos"].samples
        assert [s.labels["position"] for s in per_pos] == [str(i) for i in range(K)]


def _value(page: dict[str, Any], name: str, **labels: str) -> float:
    family = page[name]
    return sum(
        float(s.value)
        for s in family.samples
        if s.name in (name + "_total", name, name + "_count")
        and all(s.labels.get(k) == v for k, v in labels.items())
    )


async def test_per_position_counts_add_up_to_the_accepted_total() -> None:
    async with _target() as sim:
        page = await _page(sim, 6)
    drafts = _value(page, "vllm:spec_decode_num_drafts")
    accepted = _value(page, "vllm:spec_decode_num_accepted_tokens")
    per_pos = [s.value for s in page["vllm:spec_decode_num_accepted_tokens_per_pos"].samples]
    assert drafts > 0 and _value(page, "vllm:spec_decode_num_draft_tokens") == drafts * K
    # A draft that accepted a tokens counts once at each position 0..a-1.
    assert sum(per_pos) == accepted
    assert drafts >= per_pos[0] >= per_pos[1] >= per_pos[2] >= per_pos[3]


@pytest.mark.parametrize("speculative", [True, False])
async def test_the_histograms_count_every_request_served_from_its_truth(
    speculative: bool,
) -> None:
    n, whole = 8, 2
    async with _target(speculative=speculative) as sim, aiohttp.ClientSession() as s:
        await asyncio.gather(
            *(_ask(s, sim.url, i) for i in range(n - whole)),
            *(_ask(s, sim.url, i, stream=False, max_tokens=30) for i in range(whole)),
        )
        async with s.get(sim.url + "/metrics") as resp:
            page = {f.name: f for f in text_string_to_metric_families(await resp.text())}
        async with s.get(sim.url + "/sim/truth") as resp:
            truth = await resp.json()
    assert sim.server is not None and sim.server.served == n == len(truth)
    streams = [t for t in truth if t["completion_tokens"] == 40]
    answers = [t for t in truth if t["completion_tokens"] == 30]
    assert len(streams) == n - whole and len(answers) == whole
    for name in (
        "vllm:time_to_first_token_seconds",
        "vllm:e2e_request_latency_seconds",
        "vllm:request_queue_time_seconds",
        "vllm:request_prefill_time_seconds",
        "vllm:request_decode_time_seconds",
        "vllm:request_inference_time_seconds",
        "vllm:request_time_per_output_token_seconds",
        "vllm:request_prompt_tokens",
        "vllm:request_generation_tokens",
    ):
        assert _value(page, name) == n, name
    assert _value(page, "vllm:request_success", finished_reason="length") == n
    assert _value(page, "vllm:generation_tokens") == 40 * len(streams) + 30 * whole
    # One inter-token gap per step after the first: each token in the plain model (and
    # in a whole answer, timed by it), each verify step (a draft) of a speculative stream.
    steps = sum(t["steps"] for t in truth)
    assert _value(page, "vllm:inter_token_latency_seconds") == steps - n
    assert _value(page, "vllm:time_per_output_token_seconds") == steps - n
    assert all(t["steps"] == 30 for t in answers)
    if speculative:
        drafts = _value(page, "vllm:spec_decode_num_drafts")
        assert drafts == sum(t["steps"] - 1 for t in streams) > 0
        assert all(t["steps"] < 40 for t in streams)  # drafts were accepted
    else:
        assert all(t["steps"] == 40 for t in streams)
    # The sums are the truth's own times: a stream's first token when it was written, a
    # whole answer's when it was due (it is written with the last).
    ttft = sum(t["first_token_written_ns"] - t["received_ns"] for t in streams)
    ttft += sum(t["first_token_scheduled_ns"] - t["received_ns"] for t in answers)
    assert _sum(page, "vllm:time_to_first_token_seconds") == pytest.approx(ttft / 1e9)
    e2e = sum(t["end_ns"] - t["received_ns"] for t in truth)
    assert _sum(page, "vllm:e2e_request_latency_seconds") == pytest.approx(e2e / 1e9)


def _sum(page: dict[str, Any], name: str) -> float:
    return float(next(s.value for s in page[name].samples if s.name == name + "_sum"))


async def test_prefix_cache_counters_are_in_tokens_and_match_cached_tokens() -> None:
    async with _target(speculative=False, prefix_cache=True) as sim, aiohttp.ClientSession() as s:
        body = {
            "model": MODEL,
            "messages": [{"role": "user", "content": "the same long question " * 40}],
            "max_tokens": 4,
        }
        cached = []
        for _ in range(3):
            async with s.post(sim.url + "/v1/chat/completions", json=body) as resp:
                usage = (await resp.json())["usage"]
                cached.append(usage["prompt_tokens_details"]["cached_tokens"])
        async with s.get(sim.url + "/metrics") as resp:
            page = {f.name: f for f in text_string_to_metric_families(await resp.text())}
    prompt = usage["prompt_tokens"]
    assert cached[0] == 0 and cached[1] == cached[2] > 0
    assert _value(page, "vllm:prefix_cache_queries") == 3 * prompt
    assert _value(page, "vllm:prefix_cache_hits") == sum(cached)
    assert _value(page, "vllm:num_preemptions") == 0


async def test_generation_tokens_count_a_stream_still_decoding_as_vllm_counts_per_step() -> None:
    # Counted only when a request ended, a window cut mid-stream held the accepted
    # drafts of requests still decoding but not their tokens: accepted per decode step
    # read 14.3 with 4 drafts a step.
    body = {
        "model": MODEL,
        "messages": [{"role": "user", "content": "count to a thousand " * 10}],
        "max_tokens": 400,
        "ignore_eos": True,
        "stream": True,
    }
    async with (
        _target(itl_ms=10.0) as sim,
        aiohttp.ClientSession() as s,
        s.post(sim.url + "/v1/chat/completions", json=body) as resp,
    ):
        seen = 0
        async for line in resp.content:
            seen += line.startswith(b"data: {")
            if seen >= 40:
                break
        async with s.get(sim.url + "/metrics") as metrics:
            page = {f.name: f for f in text_string_to_metric_families(await metrics.text())}
        assert sim.server is not None and sim.server.served == 0  # still decoding
    generated = _value(page, "vllm:generation_tokens")
    accepted = _value(page, "vllm:spec_decode_num_accepted_tokens")
    assert 40 <= generated < 400
    # The one request is in its decode steps: output = accepted + steps + its prefill
    # token. Above K is impossible, less the one step the engine may have made and the
    # stream not yet written when the page was read.
    steps = generated - accepted - 1
    assert steps > 0 and accepted / steps <= K + 1
