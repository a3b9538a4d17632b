"""The twin of llama.cpp, fitted on a larger sweep than the test's: the figures of the note.

The same procedure as ``tests/test_llama_twin.py`` (``tests/twin_sweep.py``): rounds of
concurrency 1, 2 and 4 (fitted) and 3 (held out) against llama.cpp (2 slots, 1 thread),
then the held-out step against the twin (12 times, each of its own seed: its p95s over
4 runs moved by up to 30% from one set of seeds to the next); prints each figure's
twin / llama.cpp and llama.cpp's own noise (its odd rounds against its even ones), the
fitted profile, and the held-out figures by round. Run from the repository root (3-5
minutes here):

    python -m benchmarks.check_twin_llama [--rounds 4] [--repeat N] [--out DIR]

``--repeat N`` fits N times in a row (a fresh llama.cpp sweep each) and ends with each
figure's spread over the fits and how often it was within the 15% the twin is built to.

``--again DIR`` fits and runs the twin again on the llama.cpp sweep a run with
``--out DIR`` kept (no llama.cpp: seconds, for trying a change to the fit on the same
engine figures).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from tests.twin_sweep import Sizes, Sweep, Verdict, judge, run_llama_sweep, run_twin, scenario

BOUND = 0.15


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--repeat", type=int, default=1, help="fits in a row, then the spread")
    parser.add_argument("--out", default="", help="keep the runs here (default: a temp dir)")
    parser.add_argument("--again", default="", help="the kept runs of an earlier --out DIR")
    args = parser.parse_args()
    sizes = Sizes(fit=((1, 6), (2, 8), (4, 12)), held=(3, 12), rounds=args.rounds, twin_runs=12)
    offs: list[dict[str, float]] = []
    for attempt in range(max(1, args.repeat)):
        print(f"== fit {attempt + 1} of {max(1, args.repeat)}")
        offs.append(_one_fit(args, sizes, attempt).off)
    if len(offs) > 1:
        print(f"== spread over {len(offs)} fits (twin / llama.cpp - 1)")
        for name in offs[0]:
            values = [o[name] for o in offs]
            within = sum(1 for v in values if abs(v) <= BOUND)
            print(
                f"{name}: min {min(values):+.0%}, median {statistics.median(values):+.0%}, "
                f"max {max(values):+.0%}; within {BOUND:.0%} in {within} of {len(values)}"
            )


def _one_fit(args: argparse.Namespace, sizes: Sizes, attempt: int) -> Verdict:
    """One sweep of llama.cpp (or the kept one), its fit and the twin's runs, printed."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(args.out or tmp) / (f"fit{attempt}" if args.repeat > 1 else "")
        out.mkdir(parents=True, exist_ok=True)
        t0 = time.monotonic()
        path = scenario(out, sizes)
        if args.again:
            sweep = _kept(Path(args.again) / "sweep", sizes)
            out = Path(tmp)
        else:
            sweep = run_llama_sweep(path, sizes, out / "sweep")
        twin, settings = run_twin(path, sweep, sizes, out)
        verdict = judge(sweep, twin, BOUND)
        print(f"sizes: {sizes}")
        print(f"took {time.monotonic() - t0:.0f} s")
        print("profile:", ", ".join(f"{k} {v}" for k, v in settings.items()))
        print(verdict.report)
        print(
            f"off by more than {BOUND:.0%}: {list(verdict.wrong) or 'none'}; cannot tell: "
            f"{list(verdict.noisy) or 'none'}"
        )
        return verdict


def _kept(folder: Path, sizes: Sizes) -> Sweep:
    """The sweep an earlier run kept (``run_sweep``'s folder names)."""
    rounds = sorted({int(p.name.split("-")[0][1:]) for p in folder.glob("r*-c*")})
    if not rounds:
        raise SystemExit(f"{folder}: no kept sweep (r0-c1, ...)")
    out = Sweep()
    for r in rounds:
        out.fit += [folder / f"r{r}-c{c}" for c, _ in sizes.fit]
        out.held.append(folder / f"r{r}-held-c{sizes.held[0]}")
    return out


if __name__ == "__main__":
    main()
