"""The simulator answers requests as vLLM and llama.cpp do: lengths, finish reasons,
usage chunks, cached prompt tokens and both /tokenize dialects."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import aiohttp
import orjson

from loadtest.sim import InProcessSim, SimConfig

FAST = SimConfig(ttft_ms=1.0, ttft_sigma=0.0, itl_ms=0.2, itl_sigma=0.0)


def _chat(i: int, **extra: Any) -> dict[str, Any]:
    return {
        "model": "sim-llm",
        "messages": [{"role": "user", "content": f"question number {i}: " + "x" * 400}],
        **extra,
    }


async def _stream(url: str, body: dict[str, Any]) -> list[dict[str, Any]]:
    async with (
        aiohttp.ClientSession() as http,
        http.post(f"{url}/v1/chat/completions", json={**body, "stream": True}) as resp,
    ):
        raw = await resp.read()
    lines = [line[6:] for line in raw.split(b"\n") if line.startswith(b"data: ")]
    assert lines[-1] == b"[DONE]"
    return [orjson.loads(line) for line in lines[:-1]]


def _tokens(chunks: list[dict[str, Any]]) -> int:
    return sum(1 for c in chunks for ch in c["choices"] if ch.get("delta", {}).get("content"))


def _finish(chunks: list[dict[str, Any]]) -> str:
    (reason,) = [ch["finish_reason"] for c in chunks for ch in c["choices"] if ch["finish_reason"]]
    return str(reason)


async def test_ignore_eos_gives_exactly_max_tokens_and_min_tokens_a_floor() -> None:
    async with InProcessSim(FAST) as sim:
        for i in range(12):
            exact = await _stream(sim.url, _chat(i, max_tokens=64, ignore_eos=True))
            assert _tokens(exact) == 64 and _finish(exact) == "length"
            floor = await _stream(sim.url, _chat(i, max_tokens=64, min_tokens=60))
            assert 60 <= _tokens(floor) <= 64


async def test_stop_before_max_tokens_and_length_at_it() -> None:
    reasons: dict[str, list[int]] = {"stop": [], "length": []}
    async with InProcessSim(FAST) as sim:
        for i in range(40):
            chunks = await _stream(sim.url, _chat(i, max_tokens=16))
            reasons[_finish(chunks)].append(_tokens(chunks))
    # Drawn between 8 and 16 tokens: both kinds occur, each with its own lengths.
    assert reasons["stop"] and reasons["length"]
    assert all(n < 16 for n in reasons["stop"]) and set(reasons["length"]) == {16}


async def test_an_engine_that_ignores_the_hints_still_stops_early() -> None:
    async with InProcessSim(replace(FAST, length_hints=False)) as sim:
        lengths = [
            _tokens(await _stream(sim.url, _chat(i, max_tokens=64, ignore_eos=True)))
            for i in range(20)
        ]
    assert min(lengths) < 64


async def test_a_tool_call_finishes_with_tool_calls() -> None:
    tool = {"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}
    async with InProcessSim(FAST) as sim:
        chunks = await _stream(sim.url, _chat(1, max_tokens=32, tools=[tool]))
    assert _finish(chunks) == "tool_calls"


async def test_usage_comes_only_when_asked_for() -> None:
    async with InProcessSim(FAST) as sim:
        plain = await _stream(sim.url, _chat(1, max_tokens=8))
        asked = await _stream(
            sim.url, _chat(1, max_tokens=8, stream_options={"include_usage": True})
        )
    assert not any("usage" in c for c in plain)
    (usage,) = [c["usage"] for c in asked if c.get("usage")]
    assert usage["completion_tokens"] == _tokens(asked)
    assert "prompt_tokens_details" not in usage  # no prefix cache, as vLLM leaves it out


async def test_the_prefix_cache_reports_the_tokens_it_served() -> None:
    cfg = replace(FAST, prefix_cache=True, ttft_per_1k_tokens_ms=400.0)
    ask = {"max_tokens": 4, "stream_options": {"include_usage": True}}
    async with InProcessSim(cfg) as sim:
        first = await _stream(sim.url, _chat(7, **ask))
        again = await _stream(sim.url, _chat(7, **ask))
    cold = next(c["usage"] for c in first if c.get("usage"))
    warm = next(c["usage"] for c in again if c.get("usage"))
    assert cold["prompt_tokens_details"]["cached_tokens"] == 0
    served = warm["prompt_tokens_details"]["cached_tokens"]
    expected = int(warm["prompt_tokens"] * (1 - cfg.prefix_hit_factor))
    assert served == expected > 0


async def test_tokenize_speaks_llama_cpp_and_vllm() -> None:
    async with InProcessSim(FAST) as sim, aiohttp.ClientSession() as http:
        async with http.post(f"{sim.url}/tokenize", json={"content": "abcdefgh"}) as r:
            llama = await r.json()
        async with http.post(f"{sim.url}/tokenize", json={"prompt": "abcdefghij"}) as r:
            vllm = await r.json()
        async with http.post(f"{sim.url}/tokenize", json={"nothing": 1}) as r:
            assert r.status == 400
    assert set(llama) == {"tokens"} and len(llama["tokens"]) == 2
    assert set(vllm) == {"tokens", "count", "max_model_len", "token_strs"}
    assert vllm["count"] == 3 and vllm["token_strs"] == ["abcd", "efgh", "ij"]
    assert vllm["tokens"][:2] == llama["tokens"]


def _text(chunks: list[dict[str, Any]]) -> str:
    return "".join(ch.get("delta", {}).get("content") or "" for c in chunks for ch in c["choices"])


async def test_temperature_zero_is_greedy_and_a_seed_varies_a_sampled_answer() -> None:
    async with InProcessSim(FAST) as sim:
        greedy = [
            _text(await _stream(sim.url, _chat(3, max_tokens=24, temperature=0, seed=s)))
            for s in (1, 2, 3)
        ]
        sampled = [
            _text(await _stream(sim.url, _chat(3, max_tokens=24, temperature=0.8, seed=s)))
            for s in (1, 2, 3, 1)
        ]
    assert len(set(greedy)) == 1
    assert len(set(sampled[:3])) == 3 and sampled[3] == sampled[0]
