"""Cost of rebuilding a killed run's summary (not a test: prints figures, asserts nothing).

    python -m benchmarks.bench_rebuild                      # 1k, 10k and 100k lines
    python -m benchmarks.bench_rebuild --lines 1000,1000000 --repeat 3

``report``, ``view`` and ``compare`` rebuild the summary of a folder without
summary.json each time they read it (``loadtest summarize`` writes it once). This says
what that costs: one short run of the built-in simulator is made, its requests.jsonl
repeated (indices and times shifted, so every line is a request of its own) to each
size, its summary.json removed, and ``rebuild_summary`` timed; the median of the repeats
is printed with the lines per second.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import orjson

from loadtest.cli.main import main
from loadtest.report.rebuild import rebuild_summary

_SCENARIO = """
name = "bench-rebuild"
max_tokens = 16
[[sources]]
kind = "inline"
prompts = ["a", "b", "c", "d"]
[load]
concurrency = 8
requests = 400
[sim]
ttft_ms = 2.0
itl_ms = 0.5
"""
_TIMES = ("intended_ms", "sent_ms", "first_token_ms", "end_ms")


def _base_run(tmp: Path) -> Path:
    scenario = tmp / "bench.toml"
    scenario.write_text(_SCENARIO)
    out = tmp / "out"
    with contextlib.redirect_stdout(io.StringIO()):  # its results table is not ours
        if main(["run", str(scenario), "--out", str(out), "--no-tui", "-q"]) != 0:
            raise SystemExit("the base run failed")
    (run,) = out.iterdir()
    return run


def _folder(base: Path, lines: int, into: Path) -> Path:
    """``base`` with its requests.jsonl repeated to ``lines`` lines, no summary."""
    folder = into / f"run-{lines}"
    shutil.copytree(base, folder, ignore=shutil.ignore_patterns("summary.*", "*.hgrm"))
    rows = [orjson.loads(x) for x in (base / "requests.jsonl").read_bytes().splitlines()]
    span = max(r["end_ms"] for r in rows)
    with open(folder / "requests.jsonl", "wb") as f:
        for i in range(lines):
            row = dict(rows[i % len(rows)])
            shift = (i // len(rows)) * span
            row["index"] = i
            for key in _TIMES:
                if row[key] is not None:
                    row[key] = round(row[key] + shift, 4)
            f.write(orjson.dumps(row) + b"\n")
    return folder


def main_(argv: list[str] | None = None) -> None:
    """Print the median rebuild time per size."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lines", default="1000,10000,100000", help="sizes, comma-separated")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-rebuild-") as tmp:
        base = _base_run(Path(tmp))
        print(f"{'lines':>9} {'median s':>9} {'lines/s':>10}  (of {args.repeat})")
        for n in (int(x) for x in args.lines.split(",")):
            folder = _folder(base, n, Path(tmp))
            times = []
            for _ in range(args.repeat):
                t0 = time.perf_counter()
                s = rebuild_summary(folder).summary
                times.append(time.perf_counter() - t0)
                assert s["requests"]["sent"] == n
            med = statistics.median(times)
            print(f"{n:>9} {med:>9.3f} {n / med:>10.0f}")


if __name__ == "__main__":
    main_()
