"""The twin of llama.cpp: fitted at concurrency 1, 2 and 4, held out at 3 (``tests/twin_sweep.py``).

A small sweep (about 3 minutes on 2 cores): four rounds of 3, 4 and 6 requests at
concurrency 1, 2 and 4 and 12 at 3 against llama.cpp (2 slots, 1 thread), then eight
times the same 12 at 3 against the twin. The test asserts what holds on every run of a
machine of this kind: the fit reads llama.cpp's slots, the simulator's llama flavour
sends llama.cpp's keys, and the twin's TTFT and TPOT p50 are within the bound that the
measured spread supports (``TEST_BOUNDS``, plus half the difference between llama.cpp's
odd and even rounds). Its p95s are printed, not judged. The 15% the twin is built to,
with its spread over repeated fits, is ``benchmarks/check_twin_llama.py --repeat N``
(figures in docs/simulator.md): a gate that a busy machine fails by chance is a defect.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import aiohttp
import orjson
import pytest

from loadtest.sim import InProcessSim, SimConfig
from tests.conftest import read_jsonl
from tests.llama_servers import require_llama_extra
from tests.twin_sweep import Sizes, run_llama_sweep, run_twin, scenario
from tests.twin_sweep import judge as judge_twin

require_llama_extra()

pytestmark = [pytest.mark.llama, pytest.mark.timeout(600)]

TEST_BOUNDS = {"TTFT p50": 0.6, "TPOT p50": 0.6}
"""Over every recorded run of this test on machines of this kind (docs/simulator.md) the
p50s were off by up to +31% on a quiet machine and +73% with mypy running beside it,
where llama.cpp's own rounds disagreed as much; 60% plus half that disagreement holds
them all and still fails a twin whose median is off by a factor of 1.6 or more.
The p95s moved by -36% to +47% between runs of one fit: reported, not judged."""
SIZES = Sizes(fit=((1, 3), (2, 4), (4, 6)), held=(3, 12), rounds=4, twin_runs=8)
"""A p95 is judged, so four rounds: a round's TTFT tail is which requests queue behind
two long answers, and that is the luck of the order llama.cpp took the round's first
requests in (two rounds of 16 gave it once in the rounds of two sweeps); and the twin
eight times over (its p95 over three or four runs moved by up to 40% from one set of
seeds to the next)."""


async def _sim_timings() -> set[str]:
    """The ``timings`` keys of the simulator's llama flavour."""
    body = {
        "model": "sim-llm",
        "messages": [{"role": "user", "content": "a question " * 20}],
        "max_tokens": 4,
        "stream": True,
    }
    async with (
        InProcessSim(SimConfig(flavour="llama", ttft_ms=1.0, itl_ms=0.5)) as sim,
        aiohttp.ClientSession() as http,
        http.post(f"{sim.url}/v1/chat/completions", json=body) as resp,
    ):
        raw = await resp.read()
    last = [line[6:] for line in raw.split(b"\n") if line.startswith(b"data: {")][-1]
    return set(orjson.loads(last)["timings"])


def test_a_twin_fitted_at_concurrency_1_2_4_predicts_concurrency_3(tmp_path: Path) -> None:
    path = scenario(tmp_path, SIZES)
    sweep = run_llama_sweep(path, SIZES, tmp_path / "sweep")
    # The simulator's llama flavour carries the keys real llama.cpp sent here.
    real_keys = set(read_jsonl(sweep.fit[0] / "requests.jsonl")[0]["server_timings"])
    assert asyncio.run(_sim_timings()) == real_keys
    twin, settings = run_twin(path, sweep, SIZES, tmp_path)
    assert settings["max_running"] == 2  # llama.cpp's slots, from its /metrics
    verdict = judge_twin(sweep, twin, TEST_BOUNDS)
    print(verdict.report)
    assert not verdict.wrong, (
        f"the twin is off by more than its bound on {list(verdict.wrong)}:\n{verdict.report}"
    )
    if verdict.noisy:
        pytest.skip(
            f"cannot tell {list(verdict.noisy)}: llama.cpp's odd and even rounds disagreed "
            f"by more than the bound:\n{verdict.report}"
        )
