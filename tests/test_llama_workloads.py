"""The workloads against a real engine: llama.cpp's server, its /tokenize, its counts.

Exact lengths are checked against the server's own ``usage``; a trace is replayed in
its order and times; conversations grow turn by turn. Skipped without the ``llama``
extra, a failure without it under ``LOADTEST_REQUIRE_LLAMA=1`` (as in test_llama).

The rule for prompt lengths, as llama.cpp counts them: its ``/tokenize`` (what the
prompts are cut with) leaves out the BOS token, and every prompt it serves starts with
one, so ``api = "completions"`` reports exactly the intended length plus 1; a chat
request adds the chat template's tokens as well.
"""

from __future__ import annotations

import asyncio
import itertools
from pathlib import Path
from typing import Any

import orjson
import pytest

from loadtest.app.engines.llama import MODEL_ALIAS
from loadtest.app.run.job import finish_run
from loadtest.config.scenario import Scenario
from loadtest.engine.runner import RunConfig, Runner
from loadtest.features.multiturn import MultiTurn
from loadtest.features.workload import Workload, workload_for
from loadtest.model.json import JsonObject
from tests.conftest import make_scenario, read_jsonl
from tests.llama_servers import require_llama_extra, wait_ready

require_llama_extra()
pytestmark = pytest.mark.timeout(300)

BOS = 1
"""Tokens llama.cpp puts before every prompt that its /tokenize leaves out (``<bos>``)."""
GRACE = {"grace_s": 120}
"""A shared 2-core machine can take seconds per answer: the run waits them out, since
the tests judge lengths and order, not speed (an open run stops at its last send)."""
LAG_BOUND_MS = 250.0
"""As in test_trace: generous, for a shared machine; a request sent out of turn is later."""


async def _run(url: str, sc: Scenario, run_dir: Path) -> tuple[Workload, list[Any]]:
    await wait_ready(url)
    # Blocking calls to /tokenize: off the loop, as the run command does.
    wl = await asyncio.to_thread(workload_for, sc, url + "/v1", MODEL_ALIAS)
    assert wl is not None
    cfg = RunConfig(scenario=wl.scenario, endpoint=url, model=MODEL_ALIAS, run_dir=run_dir)
    outcome = await Runner(cfg, wl.pool, hooks=list(wl.hooks), unit=wl.unit).run()
    finish_run(cfg, outcome, dict(wl.counts), {}, 0, show=False)  # its declared files
    rows = read_jsonl(run_dir / "requests.jsonl")
    assert [r["outcome"] for r in rows] == ["ok"] * len(rows), [r["error"] for r in rows]
    return wl, rows


async def test_synthetic_lengths_are_exact_as_llama_cpp_counts_them(
    llama_baseline: str, tmp_path: Path
) -> None:
    src = {
        "kind": "synthetic",
        "input_tokens": {"dist": "uniform", "mean": 60, "min": 20, "max": 100},
        "output_tokens": 6,
        "limit": 6,
    }
    sc = make_scenario(
        {"mode": "closed", "concurrency": 2, "requests": 6, **GRACE},
        sources=[src],
        api="completions",
        sampling={"temperature": 0.0},
    )
    wl, rows = await _run(llama_baseline, sc, tmp_path)
    assert wl.pool is not None
    intended = {p.id: p.input_tokens or 0 for p in wl.pool.prompts()}
    assert len(set(intended.values())) > 1  # drawn lengths, not one length
    for r in rows:
        assert not r["tokens_estimated"]
        assert r["prompt_tokens"] == intended[r["prompt_id"]] + BOS
        assert r["output_tokens"] == 6  # ignore_eos / min_tokens honoured
    report = orjson.loads((tmp_path / "workload.json").read_bytes())
    assert report["requests"] == report["exact_output"] == 6
    assert report["stopped_early"] == 0
    assert report["prompt_overhead_median"] == report["prompt_overhead_max"] == BOS


async def test_a_chat_template_adds_the_same_tokens_to_every_prompt(
    llama_baseline: str, tmp_path: Path
) -> None:
    src = {"kind": "synthetic", "input_tokens": 48, "output_tokens": 4, "limit": 4}
    sc = make_scenario({"mode": "closed", "concurrency": 2, "requests": 4, **GRACE}, sources=[src])
    _, rows = await _run(llama_baseline, sc, tmp_path)
    assert {r["output_tokens"] for r in rows} == {4}
    report = orjson.loads((tmp_path / "workload.json").read_bytes())
    # BOS plus the template's markers; a merge at the text's two edges may move it by one.
    assert report["prompt_overhead_median"] > BOS
    assert report["prompt_overhead_max"] - report["prompt_overhead_median"] <= 1
    assert {r["prompt_tokens"] for r in rows} <= {
        48 + report["prompt_overhead_max"] - d for d in (0, 1, 2)
    }


async def test_a_trace_is_replayed_in_order_at_its_times(
    llama_baseline: str, tmp_path: Path
) -> None:
    lines: list[JsonObject] = [
        {"timestamp": 0, "input_length": 40, "output_length": 3, "hash_ids": [1]},
        {"timestamp": 300, "input_length": 40, "output_length": 3, "hash_ids": [1]},
        {"timestamp": 700, "input_length": 24, "output_length": 2},
        {"timestamp": 1100, "input_length": 60, "output_length": 3, "hash_ids": [2]},
        {"timestamp": 1500, "input_length": 16, "output_length": 2},
    ]
    path = tmp_path / "trace.jsonl"
    path.write_bytes(b"".join(orjson.dumps(x) + b"\n" for x in lines))
    src = {"kind": "trace", "path": str(path), "block_size": 16}
    sc = make_scenario({"mode": "closed", **GRACE}, sources=[src], api="completions")
    _, rows = await _run(llama_baseline, sc, tmp_path / "run")
    rows.sort(key=lambda x: x["index"])
    assert len(rows) == len(lines)
    for r, line in zip(rows, lines, strict=True):
        assert r["trace_index"] == r["index"]
        assert r["intended_ms"] == pytest.approx(line["timestamp"], abs=0.01)
        assert 0 <= r["dispatch_lag_ms"] < LAG_BOUND_MS
        assert r["prompt_tokens"] == line["input_length"] + BOS
        assert r["output_tokens"] == line["output_length"]
    sent = [r["sent_ms"] for r in rows]
    assert sent == sorted(sent)


async def test_each_turn_carries_its_history(llama_baseline: str, tmp_path: Path) -> None:
    convs = [
        {
            "id": f"c{i}",
            "conversations": [
                {"from": "human", "value": f"Name three fruits, list {i}."},
                {"from": "gpt", "value": "apple, pear, plum"},
                {"from": "human", "value": "Now three colours."},
                {"from": "gpt", "value": "red, green, blue"},
                {"from": "human", "value": "And three animals?"},
                {"from": "gpt", "value": "cat, dog, owl"},
            ],
        }
        for i in range(2)
    ]
    path = tmp_path / "convs.jsonl"
    path.write_bytes(b"".join(orjson.dumps(c) + b"\n" for c in convs))
    sc = make_scenario(
        {"mode": "closed", "concurrency": 2, "requests": 2, **GRACE},
        sources=[{"kind": "conversations", "path": str(path)}],
        max_tokens=6,
        sampling={"temperature": 0.0},
    )
    wl, rows = await _run(llama_baseline, sc, tmp_path / "run")
    assert isinstance(wl.unit, MultiTurn)
    by_conv: dict[str, list[Any]] = {}
    for r in rows:
        by_conv.setdefault(r["conversation"], []).append(r)
    assert sorted(by_conv) == ["c0", "c1"]
    for turns in by_conv.values():
        turns.sort(key=lambda r: r["turn"])
        assert [r["turn"] for r in turns] == [1, 2, 3]
        tokens = [r["prompt_tokens"] for r in turns]
        # Each turn holds the last turn's prompt, its answer and the new question.
        for prev, cur in itertools.pairwise(turns):
            assert cur["prompt_tokens"] > prev["prompt_tokens"] + prev["output_tokens"], tokens
    table = orjson.loads((tmp_path / "run" / "multiturn.json").read_bytes())
    assert table["conversations_completed"] == 2
    by_turn = table["ttft_by_turn"]
    assert [t["turn"] for t in by_turn] == [1, 2, 3]
    assert all(t["requests"] == 2 and t["ttft_p50_ms"] > 0 for t in by_turn)
    means = [t["prompt_tokens_mean"] for t in by_turn]
    assert means == sorted(means) and len(set(means)) == 3
