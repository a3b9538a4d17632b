"""How long a ``--duration`` run lasts against endpoints that stall, trickle or never end.

    python -m benchmarks.bench_bounds [--duration 5] [--grace 10]

Each misbehaving endpoint (tests/hostile.py: ``stall`` writes one chunk then sleeps 30 s,
``slowloris`` writes a byte every 0.25 s, ``endless`` streams tokens forever) gets a
closed-loop run of two sessions bound by ``--duration``, with no warm-up. The figure is the
wall time of the whole ``loadtest run`` process against its bound: warm-up + duration +
grace, plus start-up and writing the results. Prints a table; asserts nothing.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson

from tests.hostile import HostileServer

MODES = ("stall", "slowloris", "endless", "ok")

_SCENARIO = """
name = "bounds"
max_tokens = 64

[[sources]]
kind = "inline"
category = "chat"
prompts = ["hello", "there"]

[load]
mode = "closed"
concurrency = 2
warmup_s = 0
grace_s = {grace}
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--duration", type=float, default=5.0)
    ap.add_argument("--grace", type=float, default=10.0)
    args = ap.parse_args()
    print(f"--duration {args.duration:g} s, grace {args.grace:g} s, 2 sessions")
    print(f"{'endpoint':<10} {'wall s':>7} {'bound s':>8} {'sent':>5} {'outcomes':<40}")
    with tempfile.TemporaryDirectory() as tmp, HostileServer() as hostile:
        scenario = Path(tmp) / "bounds.toml"
        scenario.write_text(_SCENARIO.format(grace=args.grace))
        for mode in MODES:
            out = Path(tmp) / mode
            t = time.perf_counter()
            subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "loadtest",
                    "run",
                    str(scenario),
                    "--endpoint",
                    hostile.url(mode),
                    "--duration",
                    str(args.duration),
                    "--no-tui",
                    "-q",
                    "--out",
                    str(out),
                ],
                capture_output=True,
                check=False,
            )
            wall = time.perf_counter() - t
            (run_dir,) = out.iterdir()
            r = orjson.loads((run_dir / "summary.json").read_bytes())["requests"]
            outcomes = f"ok {r['ok']} failed {r['failed']} cancelled {r['cancelled']}"
            if r.get("cancelled_by"):
                outcomes += " " + ",".join(f"{k}:{v}" for k, v in r["cancelled_by"].items())
            bound = args.duration + args.grace
            print(f"{mode:<10} {wall:7.1f} {bound:8.1f} {r['sent']:5d} {outcomes:<40}")


if __name__ == "__main__":
    main()
