"""Long contexts pass through whole (#30): a 128 KB request body and 256 KB SSE lines.

vLLM's own benchmark client failed on these ("Chunk too big", aiohttp's 128 KiB line
limit) or slowed tenfold; loadtest reads with ``iter_any`` and its own parser, whose
guard against an endless line (``tests/test_hostile.py``, ``huge-line``) is 1 MiB.
Correctness only: no speed is asserted here (``benchmarks/bench_long.py`` measures it).
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import orjson

from loadtest.datasets import build_pool
from loadtest.engine.outcome import RunConfig
from loadtest.engine.request_unit import prompt_body
from loadtest.engine.runner import Runner
from loadtest.model.record import RequestRecord
from loadtest.protocol.sse import DEFAULT_MAX_EVENT_BYTES
from loadtest.sim import InProcessSim, SimConfig
from loadtest.sim.model import plan_response
from tests.conftest import make_scenario, read_jsonl

LINE = 256 << 10
PROMPT_CHARS = 32768 * 4  # 32k tokens at the simulator's four characters a token
TOKENS = 6


async def test_a_128_kb_body_and_256_kb_lines_arrive_whole(tmp_path: Path) -> None:
    assert DEFAULT_MAX_EVENT_BYTES > LINE + 1024  # the guard's default admits the line
    sim_cfg = SimConfig(
        ttft_ms=0.0,
        itl_ms=1.0,
        ttft_sigma=0,
        itl_sigma=0,
        ttft_per_1k_tokens_ms=0,
        min_output_fraction=1.0,
        piece_bytes=LINE,
    )
    filler = "every byte of a long prompt must reach the server " * (PROMPT_CHARS // 40)
    prompts = [(f"prompt {i} " + filler)[:PROMPT_CHARS] for i in range(3)]
    sc = make_scenario(
        {"mode": "closed", "concurrency": 3, "requests": 6},
        sources=[{"kind": "inline", "prompts": prompts}],
        max_tokens=TOKENS,
    )
    pool, _ = build_pool(sc)
    # The simulator's answer follows from the request's bytes: its plan is the truth.
    expected = {}
    for p in pool.prompts():
        body = prompt_body(sc, "sim-llm", p)
        assert len(body) > PROMPT_CHARS
        plan = plan_response(sim_cfg, body, orjson.loads(body))
        assert all(len(piece) == LINE for piece in plan.pieces)
        expected[p.id] = hashlib.sha256("".join(plan.pieces).encode()).hexdigest()
    records: list[RequestRecord] = []
    async with InProcessSim(sim_cfg) as sim:
        cfg = RunConfig(
            scenario=sc, endpoint=sim.url, model="sim-llm", run_dir=tmp_path, record_outputs=True
        )
        runner = Runner(cfg, pool, on_record=records.append)
        await runner.run()
        assert sim.server is not None
        served = len(sim.server.truth)
    assert len(records) == 6
    for r in records:
        assert (r.outcome, r.error) == ("ok", None)
        assert len(r.token_chunk_ns) == TOKENS  # no line lost, none cut
        assert r.output_sha256 == expected[r.prompt_id]  # every byte of every line
        assert r.prompt_tokens == PROMPT_CHARS // 4  # the server read the whole body
        assert r.prompt_chars == PROMPT_CHARS
    assert runner.stale_retries == 0
    assert served == len(records)  # no request sent twice
    assert len(read_jsonl(tmp_path / "requests.jsonl")) == 6
