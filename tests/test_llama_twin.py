"""The twin of llama.cpp: fitted at concurrency 1, 2 and 4, held out at 3 (``tests/twin_sweep.py``).

A small sweep (40-90 s on 2 cores): two rounds of 4, 6 and 8 requests at concurrency
1, 2 and 4 and 8 at 3 against llama.cpp (2 slots, 1 thread), then three times the same 8
at 3 against the twin. TTFT and TPOT p50 must agree within 15% (plus half the
difference between llama.cpp's two rounds: its own figure is known no better); a figure
on which llama.cpp's rounds disagree by more than 15% cannot tell, and the test says so
(a skip naming the figures and the noise) after judging the others. The p95s are
judged the same way and printed, not asserted: the twin's tails are not within 15% of
llama.cpp's yet (docs/simulator.md), and a suite that fails on a known shortfall gates
nothing. The larger fit of the note is
``benchmarks/check_twin_llama.py``.
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

BOUND = 0.15
JUDGED = ("TTFT p50", "TPOT p50")
"""The figures asserted; the p95s are printed beside them."""
SIZES = Sizes(fit=((1, 4), (2, 6), (4, 8)), held=(3, 8), rounds=2, twin_runs=3)


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
    verdict = judge_twin(sweep, twin, BOUND)
    print(verdict.report)
    # The tails are not within the bound yet (docs/simulator.md: the twin's pace is
    # stationary, llama.cpp's machine is not): they are reported, the medians judged.
    wrong = [name for name in verdict.wrong if name in JUDGED]
    assert not wrong, f"the twin is off by more than {BOUND:.0%} on {wrong}:\n{verdict.report}"
    if tails := [name for name in verdict.wrong if name not in JUDGED]:
        print(f"not met (reported, not judged): {tails}")
    if noisy := [name for name in verdict.noisy if name in JUDGED]:
        pytest.skip(
            f"cannot tell {noisy}: llama.cpp's two rounds disagreed by more than "
            f"{BOUND:.0%}:\n{verdict.report}"
        )
