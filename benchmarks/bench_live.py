"""The live outputs' cost to the driver (not a test: prints figures, asserts nothing).

    python -m benchmarks.bench_live [--seconds 10] [--rounds 3] [--streams 64] [--workers 1]

The same closed-loop run against the simulator (its own process: ``--streams`` sessions
of 128-token streams, 20 ms to the first token, 25 ms between tokens) goes once plain and
once with ``--prometheus``, scraped every second as Prometheus would, alternating,
``--rounds`` times, each a ``loadtest run`` process of its own. The figures are the
summary's: client lag p50/p99 (how late the driver's loop got to bytes the kernel
already had), TTFT p50, output tokens/s; and the scrapes answered. On a shared machine
the rounds differ by milliseconds: read the spread, not one round.
"""

from __future__ import annotations

import argparse
import json
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

SCENARIO = """
name = "live-bench"
max_tokens = 128
[[sources]]
kind = "inline"
category = "chat"
prompts = ["a", "b", "c", "d", "e", "f", "g", "h"]
[load]
concurrency = {streams}
duration_s = {seconds}
warmup_s = 1
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _scrape(port: int, stop: threading.Event, answered: list[int]) -> None:
    while not stop.wait(1.0):
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as r:
                r.read()
            answered[0] += 1
        except OSError:
            pass


def _leg(scenario: Path, endpoint: str, out: Path, live: bool, workers: int) -> dict[str, Any]:
    argv = [sys.executable, "-m", "loadtest", "run", str(scenario), "--endpoint", endpoint]
    argv += ["--no-tui", "-q", "--out", str(out), "--workers", str(workers)]
    answered = [0]
    stop = threading.Event()
    scraper = None
    if live:
        port = _free_port()
        argv += ["--prometheus", f"127.0.0.1:{port}"]
        scraper = threading.Thread(target=_scrape, args=(port, stop, answered), daemon=True)
        scraper.start()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL)
    stop.set()
    if scraper is not None:
        scraper.join()
    (run_dir,) = sorted(out.iterdir())[-1:]
    s = json.loads((run_dir / "summary.json").read_text())
    lag, ttft = s["metrics"]["client_lag_ms"], s["metrics"]["ttft_ms"]
    return {
        "lag_p50": lag["p50"],
        "lag_p99": lag["p99"],
        "ttft_p50": ttft["p50"],
        "tok_s": s["throughput"]["output_tokens_per_s"],
        "scrapes": answered[0],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--streams", type=int, default=64)
    ap.add_argument("--workers", type=int, default=1)
    args = ap.parse_args()
    port = _free_port()
    sim = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "loadtest",
            "sim",
            "--port",
            str(port),
            "--ttft-ms",
            "20",
            "--itl-ms",
            "25",
            "--min-output-fraction",
            "1",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        time.sleep(3)
        with tempfile.TemporaryDirectory() as tmp:
            scenario = Path(tmp) / "s.toml"
            scenario.write_text(SCENARIO.format(streams=args.streams, seconds=args.seconds))
            print("round  live   lag p50  lag p99  TTFT p50  tok/s  scrapes")
            for r in range(args.rounds):
                for live in (False, True):
                    out = Path(tmp) / f"out-{r}-{live}"
                    f = _leg(scenario, f"http://127.0.0.1:{port}", out, live, args.workers)
                    print(
                        f"{r + 1:>5}  {'yes' if live else 'no':<5} {f['lag_p50']:>8.2f} "
                        f"{f['lag_p99']:>8.2f} {f['ttft_p50']:>9.2f} {f['tok_s']:>6.0f} "
                        f"{f['scrapes']:>8}"
                    )
    finally:
        sim.terminate()
        sim.wait(10)


if __name__ == "__main__":
    main()
