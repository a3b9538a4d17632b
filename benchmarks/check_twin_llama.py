"""The twin of llama.cpp, fitted on a larger sweep than the test's: the figures of the note.

The same procedure as ``tests/test_llama_twin.py`` (``tests/twin_sweep.py``): rounds of
concurrency 1, 2 and 4 (fitted) and 3 (held out) against llama.cpp (2 slots, 1 thread),
then the held-out step against the twin (4 times); prints each figure's twin / llama.cpp and
llama.cpp's own noise (its odd rounds against its even ones), the fitted profile, and
the held-out figures by round. Run from the repository root (about 4 minutes here):

    python -m benchmarks.check_twin_llama [--rounds 4] [--out DIR]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from tests.twin_sweep import Sizes, judge, run_llama_sweep, run_twin, scenario

BOUND = 0.15


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--out", default="", help="keep the runs here (default: a temp dir)")
    args = parser.parse_args()
    sizes = Sizes(fit=((1, 6), (2, 8), (4, 12)), held=(3, 12), rounds=args.rounds, twin_runs=4)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(args.out or tmp)
        out.mkdir(parents=True, exist_ok=True)
        t0 = time.monotonic()
        path = scenario(out, sizes)
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


if __name__ == "__main__":
    main()
