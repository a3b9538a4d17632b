"""False-positive rate of ``compare`` on identical deployments (not a test: prints a figure).

    python -m benchmarks.bench_compare_fpr              # 50 comparisons, ~5 minutes
    python -m benchmarks.bench_compare_fpr --pairs 60 --requests 60
    python -m benchmarks.bench_compare_fpr --keep DIR     # then --reuse DIR: compare again
    python -m benchmarks.bench_compare_fpr --reuse DIR --runs-per-side 2   # as ab does

Two simulators with the same configuration (different seeds: the same distributions,
independent draws, as two replicas of one deployment would be) each serve N short runs,
alternating A, B, B, A as ``ab`` does; run i of A is then compared with run i of B. A
comparison *flags* when any of its lines says faster or slower; at a family-wise level
of 5% the rate should stay at or below 5%. The runs are made once and only compared
afterwards, so the figure costs N short runs per side and N comparisons. Last measured
(busy 2-core machine, --pairs 100 kept, then reused): one run a side 2 of 100 flagged
(the 15% one-run bar; 8 at 2%), two runs a side 2 of 50.
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

from loadtest.app.run.job import RunOptions, run_job
from loadtest.measure.stats import MIN_EFFECT
from loadtest.report.compare import compare_runs, load_run
from loadtest.sim import SimConfig, SimProcess


def _scenario(folder: Path, max_tokens: int) -> Path:
    prompts = ", ".join(f'"prompt number {i}"' for i in range(200))
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "fpr.toml"
    path.write_text(
        f'name = "fpr"\nmax_tokens = {max_tokens}\n[[sources]]\nkind = "inline"\n'
        f"prompts = [{prompts}]\n[load]\nconcurrency = 4\n"
    )
    return path


def _runs(args: argparse.Namespace, folder: Path) -> dict[str, list[Path]]:
    config = SimConfig(step_token_share=0.0, ttft_ms=8.0, itl_ms=2.0, ttft_sigma=0.2, itl_sigma=0.2)
    sims = {"a": SimProcess(config), "b": SimProcess(dataclasses.replace(config, seed=1))}
    urls = {side: p.start() for side, p in sims.items()}
    scenario = _scenario(folder, args.max_tokens)
    made: dict[str, list[Path]] = {"a": [], "b": []}
    try:
        for i in range(args.pairs * args.runs_per_side):
            for side in ("a", "b") if i % 2 == 0 else ("b", "a"):
                options = RunOptions(
                    scenario=str(scenario),
                    endpoint=urls[side],
                    requests=args.requests,
                    out=str(folder / side),
                    seed=i,
                    tui=False,
                )
                # The runs' own tables would bury the figure.
                with contextlib.redirect_stdout(io.StringIO()):
                    _, run_dir, _ = run_job(options)
                made[side].append(run_dir)
    finally:
        for p in sims.values():
            p.stop()
    return made


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=50, help="comparisons (default: 50)")
    parser.add_argument("--requests", type=int, default=40, help="requests per run")
    parser.add_argument("--max-tokens", type=int, default=16)
    parser.add_argument("--resamples", type=int, default=1000)
    parser.add_argument("--min-effect", type=float, default=MIN_EFFECT * 100, metavar="PCT")
    parser.add_argument("--json", help="also write the figures to this file")
    parser.add_argument(
        "--runs-per-side",
        type=int,
        default=1,
        help="runs pooled per side of a comparison (default: 1; needs pairs x this runs)",
    )
    parser.add_argument("--keep", metavar="DIR", help="make the runs in DIR and keep them")
    parser.add_argument("--reuse", metavar="DIR", help="compare the runs kept in DIR again")
    args = parser.parse_args()
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:
        if args.reuse:
            made = {s: sorted((Path(args.reuse) / s).iterdir()) for s in ("a", "b")}
        else:
            made = _runs(args, Path(args.keep or tmp))
        ran_s = time.monotonic() - started
        flagged: list[str] = []
        lines_flagged = lines = 0
        k = args.runs_per_side
        groups = [
            (made["a"][i : i + k], made["b"][i : i + k])
            for i in range(0, len(made["a"]) - k + 1, k)
        ]
        for i, (ra, rb) in enumerate(groups):
            c = compare_runs(
                [load_run(r) for r in ra],
                [load_run(r) for r in rb],
                resamples=args.resamples,
                min_effect=args.min_effect / 100,
            )
            called = [
                f"{m} {p} {d['verdict']}"
                for m, mc in c["metrics"].items()
                for p, d in mc["percentiles"].items()
                if d["verdict"] in ("faster", "slower")
            ]
            lines += sum(len(mc["percentiles"]) for mc in c["metrics"].values())
            lines_flagged += len(called)
            if called:
                flagged.append(f"pair {i}: {', '.join(called)}")
    rate = len(flagged) / len(groups)
    print(
        f"{len(groups)} comparisons of identical deployments, {k} run(s) a side "
        f"({args.requests} requests a run)"
    )
    print(f"flagged: {len(flagged)} ({rate:.1%}; target <= 5%)")
    print(f"lines flagged: {lines_flagged} of {lines}")
    for f in flagged:
        print(f"  {f}")
    print(f"runs took {ran_s:.0f} s, comparisons {time.monotonic() - started - ran_s:.0f} s")
    if args.json:
        Path(args.json).write_text(
            json.dumps({"comparisons": len(groups), "flagged": len(flagged), "rate": rate})
        )


if __name__ == "__main__":
    main()
