"""The twin of llama.cpp, fitted on a larger sweep than the test's: the figures of the note.

The same procedure as ``tests/test_llama_twin.py`` (``tests/twin_sweep.py``): rounds of
concurrency 1, 2 and 4 (fitted) and 3 (held out) against llama.cpp (2 slots, 1 thread),
then the held-out step against the twin (12 times, each of its own seed: its p95s over
4 runs moved by up to 30% from one set of seeds to the next); prints each figure's
twin / llama.cpp and llama.cpp's own noise (its odd rounds against its even ones), the
fitted profile, and the held-out figures by round. Run from the repository root (3-5
minutes here):

    python -m benchmarks.check_twin_llama [--rounds 4] [--out DIR]

``--again DIR`` fits and runs the twin again on the llama.cpp sweep a run with
``--out DIR`` kept (no llama.cpp: seconds, for trying a change to the fit on the same
engine figures).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from tests.twin_sweep import Sizes, Sweep, judge, run_llama_sweep, run_twin, scenario

BOUND = 0.15


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--out", default="", help="keep the runs here (default: a temp dir)")
    parser.add_argument("--again", default="", help="the kept runs of an earlier --out DIR")
    args = parser.parse_args()
    sizes = Sizes(fit=((1, 6), (2, 8), (4, 12)), held=(3, 12), rounds=args.rounds, twin_runs=12)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(args.out or tmp)
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
