"""Reasoning models against the simulator: each part's times as its truth says (#47).

The simulator streams a think segment before the answer, in each way real servers do
(``reasoning_format``), and its ``/sim/truth`` says when it wrote the segment's first
and last pieces and the answer's first. The client's split must land on those writes,
within the bound of the TTFT-vs-truth tests (``test_e2e``: every delay in (0, 250) ms,
the median under 5 ms, against the 10 ms gaps a chunk stamped one late would add).
"""

from __future__ import annotations

import statistics
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest

from loadtest.model.record import RequestRecord
from loadtest.sim import InProcessSim, SimConfig
from tests.conftest import make_scenario, read_jsonl, run_against, tool_source

REASONING = SimConfig(
    ttft_ms=20.0,
    itl_ms=10.0,
    ttft_sigma=0.1,
    itl_sigma=0.1,
    reasoning_tokens=8,
    reasoning_sigma=0.3,
)
"""Gaps of 10 ms, as test_e2e's truth test: a part's first token stamped one chunk late
puts its delay past ~7 ms, and the medians below must then fail."""
REQUESTS = 16


async def _truth(sim: InProcessSim) -> dict[str, dict[str, Any]]:
    async with aiohttp.ClientSession() as s, s.get(sim.url + "/sim/truth") as resp:
        return {t["id"]: t for t in orjson.loads(await resp.read())}


async def _run(
    cfg: SimConfig, tmp_path: Path, api: str = "chat", **top: Any
) -> tuple[dict[str, RequestRecord], dict[str, dict[str, Any]], Any]:
    sc = make_scenario(
        {"mode": "closed", "concurrency": 4, "requests": REQUESTS},
        api=api,
        max_tokens=32,
        tmp=tmp_path,
        **top,
    )
    ids: dict[str, RequestRecord] = {}
    async with InProcessSim(cfg) as sim:
        _, out = await run_against(
            sim, sc, tmp_path, on_record=lambda r: ids.__setitem__(r.response_id or "", r)
        )
        truth = await _truth(sim)
    assert len(ids) == REQUESTS
    assert all(r.outcome == "ok" for r in ids.values()), [r.error for r in ids.values()]
    return ids, truth, out


def _delays_ms(pairs: list[tuple[int, int]]) -> list[float]:
    """Client stamp minus the simulator's write, each checked as test_e2e checks TTFT."""
    delays = sorted((seen - written) / 1e6 for seen, written in pairs)
    assert all(0 < d < 250 for d in delays), delays
    assert delays[len(delays) // 2] < 5.0, delays
    return delays


CASES = [
    ("vllm", "chat", "field"),
    ("reasoning", "chat", "field"),
    ("llama", "chat", "field"),
    ("think-tags", "chat", "think-tags"),
    ("vllm", "responses", "field"),
    ("think-tags", "responses", "field"),  # the Responses API's reasoning is typed
]


@pytest.mark.parametrize(("fmt", "api", "way"), CASES)
async def test_each_parts_times_match_the_truth(
    tmp_path: Path, fmt: str, api: str, way: str
) -> None:
    ids, truth, out = await _run(replace(REASONING, reasoning_format=fmt), tmp_path, api)
    firsts, lasts, answers, spans = [], [], [], []
    for rid, r in ids.items():
        t, split = truth[rid], r.reasoning
        assert split is not None and split.way == way
        assert r.first_token_ns == split.first_ns  # TTFT is the first reasoning token's
        assert split.answer_ns is not None and r.ttfa_ns is not None and r.ttft_ns is not None
        firsts.append((split.first_ns, t["reasoning_start_ns"]))
        lasts.append((split.last_ns, t["reasoning_end_ns"]))
        answers.append((split.answer_ns, t["answer_start_ns"]))
        # TTFA is later than TTFT by the reasoning's duration, as the server wrote it.
        assert r.ttfa_ns - r.ttft_ns == split.reasoning_ns > 0
        truth_span = t["answer_start_ns"] - t["reasoning_start_ns"]
        spans.append(abs(split.reasoning_ns - truth_span) / 1e6)
        # Pieces go one a chunk here (no speculation): the count is exact either way.
        assert split.tokens == t["reasoning_tokens"]
        assert split.reported == (None if fmt == "think-tags" else t["reasoning_tokens"])
        assert not split.disagree
        assert r.output_tokens == t["completion_tokens"]
    delays = {
        "first": _delays_ms(firsts),
        "last": _delays_ms(lasts),
        "answer": _delays_ms(answers),
    }
    # Both ends read late by the same few µs typically: the span is the server's.
    assert statistics.median(spans) < 5.0, spans
    figures = {k: round(statistics.median(v), 3) for k, v in delays.items()}
    print(way, api, figures, "span", round(statistics.median(spans), 3), round(max(spans), 3))
    block = out.metrics.reasoning.summary()
    assert block is not None
    assert block["with_reasoning"] == block["requests"] == REQUESTS
    assert block["splits"][way] == REQUESTS and block["tokens_disagree"] == 0
    total = out.metrics.total.hists
    assert total["ttfa_ms"].get_total_count() == total["ttfa_ms_corrected"].get_total_count()
    assert total["ttfa_ms"].get_value_at_percentile(50) > total["ttft_ms"].get_value_at_percentile(
        50
    )
    rows = read_jsonl(tmp_path / "requests.jsonl")
    for row in rows:
        assert row["reasoning_split"] == way and row["ttfa_ms"] > row["ttft_ms"]
        assert row["answer_tokens"] == row["output_tokens"] - row["reasoning_tokens"] > 0
        back = RequestRecord.from_json(row)
        assert back.reasoning is not None and back.reasoning.way == way
        assert back.ttfa_ns == round(row["ttfa_ms"] * 1e6)


async def test_without_reasoning_ttfa_is_ttft_and_the_split_none(tmp_path: Path) -> None:
    ids, truth, out = await _run(replace(REASONING, reasoning_tokens=0), tmp_path)
    for rid, r in ids.items():
        assert r.reasoning is None and r.ttfa_ns == r.ttft_ns
        assert truth[rid]["answer_start_ns"] == truth[rid]["first_token_written_ns"]
    assert out.metrics.reasoning.summary() is None  # no block where nothing reasoned
    rows = read_jsonl(tmp_path / "requests.jsonl")
    assert all(r["reasoning_split"] == "none" and r["ttfa_ms"] == r["ttft_ms"] for r in rows)
    assert all(
        r["reasoning_tokens"] == 0 and r["answer_tokens"] == r["output_tokens"] for r in rows
    )


@pytest.mark.parametrize("said", ["wrong", "none"])
async def test_usage_reasoning_tokens_are_used_and_checked(tmp_path: Path, said: str) -> None:
    ids, truth, out = await _run(replace(REASONING, reasoning_usage=said), tmp_path)
    for rid, r in ids.items():
        split, real = r.reasoning, truth[rid]["reasoning_tokens"]
        assert split is not None and split.counted == real
        if said == "wrong":  # half the count: fewer than the chunks that carried it
            assert split.reported == real // 2 == split.tokens and split.disagree
        else:
            assert split.reported is None and split.tokens == real and not split.disagree
    block = out.metrics.reasoning.summary()
    assert block is not None
    assert block["tokens_disagree"] == (REQUESTS if said == "wrong" else 0)


@pytest.mark.parametrize("fmt", ["llama", "think-tags"])
async def test_a_tool_call_after_reasoning_is_the_answer(tmp_path: Path, fmt: str) -> None:
    cfg = replace(REASONING, reasoning_format=fmt)
    ids, truth, _ = await _run(cfg, tmp_path, sources=[tool_source(tmp_path, 20)])
    answers = []
    for rid, r in ids.items():
        split = r.reasoning
        assert split is not None and split.answer_ns is not None
        # Judged on the call alone: the think text (tags and all) is not in it.
        assert r.tool_call_valid is True and r.tool_calls == 1
        assert r.tool_call_ns is not None and r.tool_call_ns >= split.answer_ns
        answers.append((split.answer_ns, truth[rid]["answer_start_ns"]))
    _delays_ms(answers)


async def test_a_whole_answer_splits_too(tmp_path: Path) -> None:
    ids, truth, _ = await _run(REASONING, tmp_path, stream=False)
    for rid, r in ids.items():
        split = r.reasoning
        assert split is not None and split.way == "field"
        assert split.tokens == truth[rid]["reasoning_tokens"]
        assert r.ttfa_ns == r.ttft_ns  # one body: both parts arrive at once


@pytest.fixture
async def draft() -> AsyncIterator[InProcessSim]:
    async with InProcessSim(SimConfig(role="draft", draft_token_ms=0.2)) as d:
        yield d


async def test_speculation_can_pay_in_the_reasoning_only(
    draft: InProcessSim, tmp_path: Path
) -> None:
    # Every reasoning proposal accepted, no answer one: joined steps carry k + 1 = 5
    # reasoning tokens a chunk and one answer token. The 2 s draft timeout as in
    # test_steps: a stall of the shared loop must not make the target fall back.
    cfg = replace(
        REASONING,
        draft_url=draft.url,
        spec_k=4,
        accept_reasoning=1.0,
        accept_chat=0.0,
        reasoning_tokens=20,
        reasoning_sigma=0.0,
        draft_timeout_ms=2000.0,
    )
    ids, _, _ = await _run(cfg, tmp_path)
    for r in ids.values():
        split = r.reasoning
        assert split is not None
        answer = r.output_tokens - split.tokens
        # The first token is the prefill's; every later step gives 5 reasoning tokens.
        assert split.chunks <= 1 + -(-(split.tokens - 1) // 5) + 1, (split.tokens, split.chunks)
        assert split.answer_chunks == answer  # one token a step


async def test_a_time_to_first_answer_slo_counts_in_goodput(tmp_path: Path) -> None:
    # TTFT is ~20 ms; the answer comes ~8 gaps of 10 ms later: a 50 ms limit on TTFA
    # holds TTFT's requests but not the answers, so goodput must see TTFA, not TTFT.
    slo = {"ttfa_ms": {"p95": 50.0}, "ttft_ms": {"p95": 50.0}}
    ids, _, out = await _run(REASONING, tmp_path, slo=slo)
    ttfa = [r.ttfa_ns for r in ids.values() if r.ttfa_ns is not None]
    within = sum(ns <= 50e6 for ns in ttfa)
    assert within < REQUESTS and out.metrics.goodput == within


@pytest.mark.parametrize(
    ("sampling", "api", "scale"),
    [
        ({"reasoning_effort": "low"}, "chat", 0.5),
        ({"reasoning_effort": "high"}, "chat", 2.0),
        ({"reasoning": {"effort": "high"}}, "responses", 2.0),
        ({"chat_template_kwargs": {"enable_thinking": False}}, "chat", 0.0),
    ],
)
async def test_reasoning_controls_pass_through_and_move_the_think_segment(
    tmp_path: Path, sampling: dict[str, Any], api: str, scale: float
) -> None:
    """The scenario's sampling is sent as-is, so a reasoning control reaches the server;
    the simulator reasons as much as the effort asks (its truth counts the pieces)."""
    cfg = replace(REASONING, reasoning_tokens=12, reasoning_sigma=0.0)
    plain, plain_truth, _ = await _run(cfg, tmp_path / "plain", api=api)
    ids, truth, _ = await _run(cfg, tmp_path / "asked", api=api, sampling=sampling)
    asked = [truth[i]["reasoning_tokens"] for i in ids]
    base = [plain_truth[i]["reasoning_tokens"] for i in plain]
    assert set(base) == {12}, base
    assert set(asked) == {round(12 * scale)}, asked
    if scale == 0:  # no think segment: the split is none and TTFA is TTFT
        assert all(r.reasoning is None and r.ttfa_ns == r.ttft_ns for r in ids.values())
    else:
        assert all(r.reasoning is not None for r in ids.values())
