"""What a user gets from one whole command, beside a plain aiohttp reader (not a test).

    python -m benchmarks.bench_process                 # 3 rounds, 1,500 x 256 tokens, c=256
    python -m benchmarks.bench_process --rounds 5 --requests 1500 --concurrency 256

A fast SSE server (``benchmarks.fast_sse``) runs on core 1; each round runs, on core 0,
``loadtest run --endpoint`` as a whole process (its own start-up, load and files) and a
plain aiohttp line reader in a process of its own sending the same requests. Per round:

- loadtest's tokens/s while running (output tokens over the measured window) and over
  the whole process (command to exit), and their ratio (the target: at least 70%);
- the plain reader's tokens/s over its own load (not its start-up), and loadtest's
  in-run rate over it (the ingest target: 2.5x);
- the first request's send after the command started, and the time from the load's
  end (``phase: load done``, the last response) to ``phase: results written``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.bench_client import _plain_reader
from benchmarks.bench_startup import time_run

_SCENARIO = """
name = "process"
max_tokens = {tokens}
[[sources]]
kind = "inline"
category = "chat"
prompts = ["bench prompt one", "bench prompt two", "bench prompt three"]
[load]
mode = "closed"
concurrency = {concurrency}
warmup_s = 0
[timeouts]
first_byte_s = 60
between_chunks_s = 60
"""


async def _plain(url: str, requests: int, concurrency: int, tokens: int) -> tuple[int, float]:
    """The yardstick (``bench_client``'s plain reader): data lines, seconds of its load."""
    t0 = time.perf_counter()
    lines = await _plain_reader(url, concurrency, math.inf, tokens, requests=requests)
    return lines, time.perf_counter() - t0


def plain_round(url: str, requests: int, concurrency: int, tokens: int) -> dict[str, float]:
    """The plain reader in its own process on core 0: token events/s over its load."""
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "benchmarks.bench_process",
            "--plain-reader",
            url,
            "--requests",
            str(requests),
            "--concurrency",
            str(concurrency),
            "--tokens",
            str(tokens),
        ],
        check=True,
        capture_output=True,
        text=True,
        preexec_fn=lambda: os.sched_setaffinity(0, {0}),
    )
    lines, wall = json.loads(out.stdout)
    # The role event and the finish event are data lines without a token.
    token_events = lines - 2 * requests
    return {"tokens_per_s": token_events / wall, "wall_s": wall}


def loadtest_round(
    url: str, scenario: Path, out: Path, requests: int, extra: list[str], tree: str | None
) -> dict[str, float | None]:
    """One whole ``loadtest run`` on core 0 (the loadtest of checkout ``tree``, if given)."""
    t = time_run(str(scenario), out, url, requests=requests, extra=extra, cpus={0}, tree=tree)
    marks = dict(t.marks)
    s = t.summary
    tokens = float(s["throughput"]["output_tokens"])  # type: ignore[index]
    measured = float(s["run"]["measured_s"])  # type: ignore[index]
    req = s["requests"]
    done, written = marks.get("load done"), marks.get("results written")
    return {
        "in_run_tokens_per_s": tokens / measured,
        "whole_tokens_per_s": tokens / t.total_s,
        "process_s": t.total_s,
        "first_sent_s": t.first_sent_s,
        "files_after_load_s": None if done is None or written is None else written - done,
        "exit_after_load_s": None if done is None else t.total_s - done,
        "ok": float(req["ok"]),  # type: ignore[index]
        "sent": float(req["sent"]),  # type: ignore[index]
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--requests", type=int, default=1500)
    ap.add_argument("--concurrency", type=int, default=256)
    ap.add_argument("--tokens", type=int, default=256)
    ap.add_argument("--port", type=int, default=18500)
    ap.add_argument("--loop", choices=("asyncio", "uvloop"), default="asyncio")
    ap.add_argument("--plain-reader", metavar="URL", help=argparse.SUPPRESS)
    ap.add_argument(
        "--trees",
        nargs="+",
        metavar="TREE",
        help="checkouts whose loadtest runs in turn, each round (A/B of commits)",
    )
    args = ap.parse_args()
    if args.plain_reader:
        lines, wall = asyncio.run(
            _plain(args.plain_reader, args.requests, args.concurrency, args.tokens)
        )
        print(json.dumps([lines, wall]))
        return
    server = subprocess.Popen(
        [sys.executable, "-m", "benchmarks.fast_sse", "--port", str(args.port), "--cpu", "1"],
        stdout=subprocess.PIPE,
        text=True,
    )
    url = f"http://127.0.0.1:{args.port}"
    try:
        assert server.stdout is not None
        print(server.stdout.readline().strip())
        rows: list[tuple[str | None, dict[str, float | None], dict[str, float]]] = []
        with tempfile.TemporaryDirectory() as tmp:
            scenario = Path(tmp) / "process.toml"
            scenario.write_text(_SCENARIO.format(tokens=args.tokens, concurrency=args.concurrency))
            for i in range(args.rounds):
                for tree in args.trees or [None]:
                    out = Path(tmp) / f"r{i}-{len(rows)}"
                    lt = loadtest_round(
                        url, scenario, out, args.requests, ["--loop", args.loop], tree
                    )
                    plain = plain_round(url, args.requests, args.concurrency, args.tokens)
                    rows.append((tree, lt, plain))
                    print((f"{tree}: " if tree else "") + _line(i + 1, lt, plain), flush=True)
        for tree in args.trees or [None]:
            mine = [(lt, p) for t, lt, p in rows if t == tree]
            ratios = [_f(lt["in_run_tokens_per_s"]) / p["tokens_per_s"] for lt, p in mine]
            whole = [_f(lt["whole_tokens_per_s"]) / _f(lt["in_run_tokens_per_s"]) for lt, _ in mine]
            print(
                (f"{tree}: " if tree else "")
                + f"median: loadtest in-run / plain {statistics.median(ratios):.2f}x, "
                f"whole process / in-run {statistics.median(whole):.0%} over {len(mine)} rounds"
            )
    finally:
        server.terminate()
        server.wait(10)


def _f(x: float | None) -> float:
    assert x is not None
    return x


def _line(i: int, lt: dict[str, float | None], plain: dict[str, float]) -> str:
    def f(x: float | None, fmt: str) -> str:
        return "-" if x is None else format(x, fmt)

    in_run, whole = lt["in_run_tokens_per_s"], lt["whole_tokens_per_s"]
    assert in_run is not None
    assert whole is not None
    return (
        f"round {i}: loadtest {in_run / 1000:.0f}k tok/s in run, {whole / 1000:.0f}k whole "
        f"({whole / in_run:.0%}; process {f(lt['process_s'], '.2f')} s, first request "
        f"{f(lt['first_sent_s'], '.3f')} s, files {f(lt['files_after_load_s'], '.3f')} s "
        f"and exit {f(lt['exit_after_load_s'], '.3f')} s after the load; "
        f"ok {f(lt['ok'], '.0f')}/{f(lt['sent'], '.0f')}) | plain reader "
        f"{plain['tokens_per_s'] / 1000:.0f}k tok/s | ratio {in_run / plain['tokens_per_s']:.2f}x"
    )


if __name__ == "__main__":
    main()
