"""The twin against the engine it was fitted to: llama.cpp, at a load the fit never saw.

A profile is fitted from a llama.cpp sweep at concurrency 1, 2 and 4, then concurrency 3
is run against llama.cpp and against the twin serving the profile; TTFT and TPOT p50
and p95 of the twin must agree with llama.cpp's within a bound. Used by the test
(``tests/test_llama_twin.py``, small) and the benchmark of a larger fit
(``benchmarks/check_twin_llama.py``).

llama.cpp's figures move with what else runs on the machine (its thread competes with
it). So the sweep runs in rounds, each a step at every concurrency, the held-out one
included: a drift of the machine then falls on the fit and the held-out step alike,
and the held-out step of the odd rounds against that of the even ones measures
llama.cpp's own noise. A figure on which llama.cpp disagrees with itself by more than
the bound cannot tell the twin right from wrong at this size: it is not judged.
"""

from __future__ import annotations

import asyncio
import json
import random
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from loadtest.app.engines.llama import MODEL_ALIAS
from loadtest.app.engines.twin import fit_profile
from loadtest.app.run.job import RunOptions, run_job
from loadtest.sim import SimConfig, SimProcess
from loadtest.sim.profile import Settings, with_profile
from tests.conftest import read_jsonl
from tests.llama_servers import start, stop, wait_ready

__all__ = ["Sizes", "Verdict", "judge", "run_llama_sweep", "run_sweep", "run_twin", "scenario"]

_WORDS = "apple river stone cloud music garden window paper silver forest engine ocean"


@dataclass(frozen=True, slots=True)
class Sizes:
    """How big a sweep is: requests per step at each concurrency, and the rounds."""

    fit: tuple[tuple[int, int], ...] = ((1, 4), (2, 6), (4, 8))
    """(concurrency, requests) of the fitted steps, each round."""
    held: tuple[int, int] = (3, 10)
    """(concurrency, requests) of the held-out step, each round."""
    rounds: int = 2
    twin_runs: int = 3
    """The twin's held-out step, run this many times: each run draws the same prompts
    as each of llama.cpp's held-out steps (TPOT is bimodal, stalled or not, and which
    requests a prefill stalls moves its p50 as much as the bound), and more of them
    make less sampling noise."""
    words: tuple[int, ...] = (5, 15, 30, 45, 60)
    """Prompt lengths in words (each several times, none a prefix of another)."""
    answers: tuple[int, int] = (8, 16)
    """The two answer lengths (``max_tokens``, exact: ``ignore_eos``). Two, so that
    streams fall out of step and a prompt is prefilled beside a decoding stream in the
    fitted steps too, as it always is in the held-out one."""


def scenario(tmp: Path, sizes: Sizes) -> Path:
    """Prompts of the given lengths in two sources, one per answer length."""
    rnd = random.Random(1)
    words = _WORDS.split()
    # Seed 4613 draws the two answer lengths in turn, and every prompt length, early on.
    text = 'name = "twin"\nseed = 4613\nmax_tokens = 16\n'
    text += "[sampling]\nignore_eos = true\ntemperature = 0.0\ncache_prompt = false\n"
    for n in sizes.answers:
        prompts = [" ".join(rnd.choice(words) for _ in range(k)) for k in sizes.words * 3]
        text += f'[[sources]]\nkind = "inline"\ncategory = "chat"\nmax_tokens = {n}\n'
        text += f"prompts = {json.dumps(prompts)}\n"
    text += '[load]\nmode = "closed"\nconcurrency = 1\nrequests = 8\nwarmup_s = 0\n'
    path = tmp / "twin.toml"
    path.write_text(text)
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
        record_chunks=True,  # the fit reads the prefill stalls off the chunk stamps
    )
    run_job(options)
    return folder


@dataclass(slots=True)
class Sweep:
    """The folders of a sweep's runs."""

    fit: list[Path] = field(default_factory=list)
    held: list[Path] = field(default_factory=list)


def run_llama_sweep(scenario: Path, sizes: Sizes, folder: Path) -> Sweep:
    """The sweep against a llama.cpp started for it: 2 slots, 1 thread (two llama.cpp
    threads wait for each other at every operation, and on a shared machine one of
    them is often descheduled, which makes timing erratic)."""
    proc, url = start("none", parallel=2, threads=1)
    try:
        asyncio.run(wait_ready(url))
        return run_sweep(scenario, url, sizes, folder)
    finally:
        stop(proc)


def run_sweep(scenario: Path, url: str, sizes: Sizes, folder: Path) -> Sweep:
    """Every step, round by round, against the engine at ``url``."""
    out = Sweep()
    for r in range(sizes.rounds):
        for c, n in sizes.fit:
            out.fit.append(_run(scenario, url, c, n, folder / f"r{r}-c{c}"))
        c, n = sizes.held
        out.held.append(_run(scenario, url, c, n, folder / f"r{r}-held-c{c}"))
    return out


def run_twin(
    scenario: Path, sweep: Sweep, sizes: Sizes, folder: Path
) -> tuple[list[Path], Settings]:
    """Fit the profile on the sweep's fitted steps and run the held-out step on it."""
    profile, settings, _ = fit_profile([str(f) for f in sweep.fit], folder / "profile.toml")
    c, n = sizes.held
    twin = []
    for i in range(sizes.twin_runs):
        # A twin of its own seed each time: a request's gaps are drawn from its body and
        # the seed, so one twin serving the same requests again draws the same gaps and
        # falls into the same phase of its two slots, where llama.cpp's rounds differ.
        config = with_profile(SimConfig(profile=str(profile), seed=i), {})
        with SimProcess(config) as sim:
            twin.append(_run(scenario, sim.url, c, n, folder / f"twin-{i}"))
    return twin, settings


def _figures(folders: list[Path]) -> dict[str, float]:
    every = [r for f in folders for r in read_jsonl(f / "requests.jsonl") if not r["warmup"]]
    rows = [r for r in every if r["outcome"] == "ok"]
    # A loaded machine can push a request past its timeout; the figures need nearly all.
    assert len(rows) >= 0.9 * len(every), [
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


@dataclass(frozen=True, slots=True)
class Verdict:
    """The twin against llama.cpp, figure by figure."""

    lines: tuple[str, ...]
    wrong: tuple[str, ...]
    """Figures off by more than the bound (plus half llama.cpp's own difference between
    its rounds) where llama.cpp agreed with itself within the bound."""
    noisy: tuple[str, ...]
    """Figures on which llama.cpp disagreed with itself by more than the bound."""
    off: dict[str, float]
    """Each figure's twin / llama.cpp - 1."""

    @property
    def report(self) -> str:
        return "\n".join(self.lines)


def judge(sweep: Sweep, twin: list[Path], bound: float | Mapping[str, float]) -> Verdict:
    """The twin's figures against llama.cpp's held-out steps (all rounds together), and
    llama.cpp's odd rounds against its even ones; ``bound`` is one for every figure or
    one per figure (a figure not named is reported, not judged)."""
    real, got = _figures(sweep.held), _figures(twin)
    a, b = _figures(sweep.held[0::2]), _figures(sweep.held[1::2] or sweep.held)
    lines, wrong, noisy, offs = [], [], [], {}
    for name, value in real.items():
        off = got[name] / value - 1
        noise = a[name] / b[name] - 1
        offs[name] = off
        limit = bound if isinstance(bound, float) else bound.get(name)
        lines.append(
            f"{name}: llama.cpp {value:.1f}, twin {got[name]:.1f} ({off:+.0%}); "
            f"llama.cpp against itself {noise:+.0%}"
            + ("" if limit is None else f"; bound {limit:.0%}")
        )
        if limit is None:
            continue
        if abs(noise) > limit:
            noisy.append(name)
        elif abs(off) > limit + abs(noise) / 2:
            # llama.cpp's own figure is known to about half its rounds' difference: the
            # twin must be within the bound of some figure in that range.
            wrong.append(name)
    return Verdict(tuple(lines), tuple(wrong), tuple(noisy), offs)
