"""The capacity search against a designed capacity (not a test: prints figures).

    python -m benchmarks.bench_search [--searches 20] [--capacity 12] [--hi 64]

The built-in simulator serves ``--capacity`` requests at once (``max_running``); one
more session waits about a whole request (32 tokens at 5 ms) for a slot, so from
``capacity + 1`` on some TTFT is over 150 ms, while up to ``capacity`` none waits
(TTFT ~5 ms). With ``ttft_ms.max = 80`` the designed boundary is ``capacity``. Each
search (``sweep --search concurrency=1..HI``, its own seed) is a ``loadtest`` process;
the figures are how often the bracket holds the designed boundary and the runs each
needed, beside what grids need: powers of two (1, 2, 4, ... HI) bracket it only to an
octave, and a grid that brackets it to one step runs every whole number of the range
(or, knowing the octave first, the powers of two and then every number inside it).
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import tempfile
from pathlib import Path

SCENARIO = """
name = "designed"
max_tokens = 32
seed = {seed}
[[sources]]
kind = "inline"
prompts = ["a", "b", "c", "d"]
[load]
concurrency = 1
duration_s = 1.5
warmup_s = 0.5
[slo]
ttft_ms.max = 80
[sim]
ttft_ms = 5.0
ttft_sigma = 0.05
itl_ms = 5.0
itl_sigma = 0.05
min_output_fraction = 1.0
max_running = {capacity}
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--searches", type=int, default=20)
    ap.add_argument("--capacity", type=int, default=12)
    ap.add_argument("--hi", type=int, default=64)
    args = ap.parse_args()
    held, runs = 0, []
    with tempfile.TemporaryDirectory() as tmp:
        for seed in range(args.searches):
            scenario = Path(tmp) / f"s{seed}.toml"
            scenario.write_text(SCENARIO.format(seed=seed + 1, capacity=args.capacity))
            out = Path(tmp) / f"out{seed}"
            argv = [sys.executable, "-m", "loadtest", "sweep", str(scenario), "--no-tui", "-q"]
            argv += ["--search", f"concurrency=1..{args.hi}", "--out", str(out)]
            subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            (folder,) = out.iterdir()
            result = json.loads((folder / "capacity.json").read_text())
            b = result["bracket"]
            ok = b["low"] is not None and b["high"] is not None
            ok = ok and b["low"] <= args.capacity < b["high"]
            held += ok
            runs.append(result["runs"])
            print(f"search {seed + 1:>2}: {result['answer']} ({result['runs']} runs)")
    powers = int(math.log2(args.hi)) + 1
    octave = 2 ** int(math.log2(args.capacity))
    print(
        f"\nheld the designed boundary {args.capacity}: {held}/{args.searches}; runs per "
        f"search {min(runs)}-{max(runs)} (mean {sum(runs) / len(runs):.1f})\n"
        f"grids: powers of two {powers} runs (bracket {octave}..{2 * octave} only); "
        f"every whole number {args.hi} runs; powers then every number inside the octave "
        f"{powers + octave - 1} runs"
    )


if __name__ == "__main__":
    main()
