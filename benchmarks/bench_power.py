"""Power of the decision's cell on the simulator (not a test: prints a curve).

    python -m benchmarks.bench_power                 # ~3 minutes of runs, ~1 of tests
    python -m benchmarks.bench_power --runs 8 --trials 60 --json power.json

For each difference ``d`` a simulator is made ``d`` faster than the baseline's (its
gap between tokens, ``itl_ms``, times 1 - d) and serves ``--runs`` runs of
``--requests`` requests, as does the baseline, all interleaved in time. Each trial then draws two
runs a side (``ab --repeat 2``) and ``n`` requests from each run, and judges the cell
exactly as ``ab --sweep`` does (``decision_cells``: the run bootstrap of the medians of
e2e, the interval, the practical bar for two runs a side), with a family of one test:
Holm over a family of m divides alpha by up to m. The figure is, per ``n``, the
smallest ``d`` called faster in at least 19 trials of 20. The true effect of each
configuration on the median e2e is measured from all its runs (TTFT does not shrink,
so it is a little less than ``d``).

It also prints the spreads ``app.ab.costs`` uses for ``--check``: how much a whole
run's median moves between runs of one configuration beyond the sampling noise of its
requests (run-to-run), and the median within-run log-spread of a request's e2e.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import io
import json
import tempfile
import time
from pathlib import Path

import numpy as np

from loadtest.app.run.job import RunOptions, run_job
from loadtest.measure.stats import MIN_EFFECT, practical_effect
from loadtest.report.compare import load_run
from loadtest.report.decision_cells import RunSamples, judged, latency_test
from loadtest.sim import SimConfig, SimProcess

BASE = SimConfig(step_token_share=0.0, ttft_ms=5.0, itl_ms=4.0, ttft_sigma=0.2, itl_sigma=0.2)
DIFFERENCES = (0.05, 0.1, 0.2, 0.3)
CELLS = (5, 10, 20, 40)


def _scenario(folder: Path, max_tokens: int) -> Path:
    prompts = ", ".join(f'"prompt number {i}"' for i in range(200))
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "power.toml"
    path.write_text(
        f'name = "power"\nmax_tokens = {max_tokens}\n[[sources]]\nkind = "inline"\n'
        f'category = "chat"\nprompts = [{prompts}]\n[load]\nconcurrency = 1\nwarmup_s = 0\n'
    )
    return path


def _e2e(run_dir: Path) -> np.ndarray:
    return np.asarray(load_run(run_dir).samples["e2e_ms"], dtype=float)


def _runs(args: argparse.Namespace, folder: Path) -> dict[float, list[np.ndarray]]:
    """Every configuration's runs, interleaved in time (run i of each in turn, the order
    reversed every other round), so that the machine's drift falls on all alike."""
    scenario = _scenario(folder, args.max_tokens)
    configs = (0.0, *DIFFERENCES)
    sims = {
        d: SimProcess(dataclasses.replace(BASE, itl_ms=BASE.itl_ms * (1 - d), seed=int(d * 1000)))
        for d in configs
    }
    made: dict[float, list[np.ndarray]] = {}
    try:
        urls = {d: p.start() for d, p in sims.items()}
        for i in range(args.runs):
            for d in configs if i % 2 == 0 else configs[::-1]:
                options = RunOptions(
                    scenario=str(scenario),
                    endpoint=urls[d],
                    requests=args.requests,
                    out=str(folder / f"d{d}"),
                    seed=i,
                    tui=False,
                )
                with contextlib.redirect_stdout(io.StringIO()):  # the runs' own tables
                    _, run_dir, _ = run_job(options)
                made.setdefault(d, []).append(_e2e(run_dir))
    finally:
        for p in sims.values():
            p.stop()
    return made


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=6, help="runs per configuration")
    parser.add_argument("--requests", type=int, default=40, help="requests per run")
    parser.add_argument("--trials", type=int, default=40, help="trials per cell size and d")
    parser.add_argument("--max-tokens", type=int, default=16)
    parser.add_argument("--resamples", type=int, default=500)
    parser.add_argument("--json", help="also write the figures to this file")
    args = parser.parse_args()
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:
        made = _runs(args, Path(tmp))
    ran_s = time.monotonic() - started
    rng = np.random.default_rng(0)
    bar = practical_effect(2, 2, MIN_EFFECT)
    base_all = np.concatenate(made[0.0])
    true = {
        d: float(np.median(np.concatenate(made[d])) / np.median(base_all) - 1) for d in DIFFERENCES
    }
    power: dict[int, dict[float, float]] = {}
    for n in CELLS:
        for d in DIFFERENCES:
            called = 0
            for _ in range(args.trials):
                sides = []
                for runs in (made[0.0], made[d]):
                    picked = rng.choice(len(runs), 2, replace=False)
                    cells = [
                        rng.choice(runs[i], min(n, runs[i].size), replace=False) for i in picked
                    ]
                    sides.append([RunSamples({"chat": {"e2e_ms": c}}) for c in cells])
                t = latency_test(sides[0], sides[1], "chat", "e2e_ms", bar, args.resamples)
                called += judged(t, t.p_value)["verdict"] == "faster"
            power.setdefault(n, {})[d] = called / args.trials
    medians = [float(np.median(r)) for r in made[0.0]]
    median_spread = float(np.std(np.log(medians), ddof=1))
    request_spread = float(np.median([np.std(np.log(r), ddof=1) for r in made[0.0]]))
    # What moves whole runs beyond the sampling noise of a median of ``requests`` values.
    noise = (1.2533 * request_spread) ** 2 / args.requests
    run_spread = float(np.sqrt(max(0.0, median_spread**2 - noise)))
    print(
        f"power of one cell (2 runs a side, n requests a run, bar {bar:.0%}), "
        f"{args.trials} trials each; runs {args.runs} x {args.requests} requests a config"
    )
    print("  n   " + "".join(f"d={d:<5.0%} " for d in DIFFERENCES) + " smallest d called 19/20")
    smallest: dict[int, float | None] = {}
    for n in CELLS:
        ok = [d for d in DIFFERENCES if power[n][d] >= 0.95]
        smallest[n] = min(ok) if ok else None
        row = "".join(f"{power[n][d]:<7.0%} " for d in DIFFERENCES)
        said = "none in the grid" if smallest[n] is None else f"{smallest[n]:.0%}"
        print(f"  {n:<3} {row} {said}")
    print(
        "  true effect on the median e2e: "
        + ", ".join(f"d={d:.0%}: {true[d]:+.1%}" for d in DIFFERENCES)
    )
    print(
        f"spreads (baseline's {args.runs} runs): sd of a run's median {median_spread:.1%}, of "
        f"which beyond the sampling of {args.requests} requests {run_spread:.1%}; per "
        f"request {request_spread:.0%} (log sd, median over runs)"
    )
    print(f"runs took {ran_s:.0f} s, trials {time.monotonic() - started - ran_s:.0f} s")
    if args.json:
        Path(args.json).write_text(
            json.dumps(
                {
                    "power": {
                        str(n): {str(d): p for d, p in row.items()} for n, row in power.items()
                    },
                    "smallest": {str(n): s for n, s in smallest.items()},
                    "true_effect": {str(d): e for d, e in true.items()},
                    "median_spread": median_spread,
                    "run_spread": run_spread,
                    "request_spread": request_spread,
                },
                indent=2,
            )
        )


if __name__ == "__main__":
    main()
