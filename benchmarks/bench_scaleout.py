"""Every shipped scenario in one process, with --workers 2 and on a two-node Ray cluster.

For each scenario in ``scenarios/`` (the llama.cpp ones only with ``--llama``) three short
runs against the built-in deployment: one process, two local workers, and two Ray tasks on
a cluster this script starts on loopback (a head on 127.0.0.2 and a node on 127.0.0.3,
stopped at the end; Ray swaps 127.0.0.1 for the machine's address, see
docs/scale-out.md). Per pair it prints the accounting (sent == ok + failed + cancelled
== lines), the fault verdicts side by side, and for TTFT, TPOT and e2e the p50
difference with its 95% bootstrap interval (``compare_runs``, as ``loadtest compare``).

    python -m benchmarks.bench_scaleout [--duration S] [--no-ray] [--llama] [NAME ...]
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HEAD, NODE = "127.0.0.2", "127.0.0.3"
METRICS = ("ttft_ms", "tpot_ms", "e2e_ms")


def _ray(*args: str) -> None:
    env = dict(os.environ, RAY_AUTH_MODE="disabled")
    subprocess.run(
        [sys.executable, "-m", "ray.scripts.scripts", *args],
        check=True,
        capture_output=True,
        env=env,
        timeout=180,
    )


def _cluster(temp: Path) -> str:
    with socket.socket() as s:
        s.bind((HEAD, 0))
        port = s.getsockname()[1]
    _ray(
        "start",
        "--head",
        f"--node-ip-address={HEAD}",
        f"--port={port}",
        "--num-cpus=1",
        "--include-dashboard=false",
        "--disable-usage-stats",
        f"--temp-dir={temp}",
    )
    _ray("start", f"--address={HEAD}:{port}", f"--node-ip-address={NODE}", "--num-cpus=1")
    return f"{HEAD}:{port}"


def _run(sc: Path, out: Path, duration: float, *extra: str) -> Path | str:
    cmd = [sys.executable, "-m", "loadtest", "run", str(sc), "--no-tui", "-q", "--seed", "3"]
    bound = [] if "trace" in sc.name else ["--duration", str(duration)]
    env = dict(os.environ, RAY_AUTH_MODE="disabled")
    done = subprocess.run(
        [*cmd, *bound, "--out", str(out), *extra], capture_output=True, text=True, env=env
    )
    tail = done.stderr.strip().splitlines()[-1] if done.stderr.strip() else "no message"
    if done.returncode not in (0, 1):  # 1: an SLO or a fault verdict missed, still a run
        return f"exit {done.returncode}: {tail}"
    runs = list(out.iterdir()) if out.is_dir() else []
    if len(runs) != 1:
        return f"exit {done.returncode} and {len(runs)} run folders: {tail}"
    return runs[0]


def _line(name: str, how: str, one: Path, other: Path) -> str:
    import orjson

    from loadtest.report.compare import compare_runs, load_run

    s = orjson.loads((other / "summary.json").read_bytes())
    r = s["requests"]
    lines = sum(1 for _ in (other / "requests.jsonl").open())
    exact = r["sent"] == r["ok"] + r["failed"] + r["cancelled"] == lines
    base = orjson.loads((one / "summary.json").read_bytes())
    verdicts = [v["verdict"] for v in s.get("faults", [])]
    base_verdicts = [v["verdict"] for v in base.get("faults", [])]
    c = compare_runs([load_run(one)], [load_run(other)], resamples=1000)
    cells = []
    for m in METRICS:
        p = c["metrics"][m]["percentiles"]["p50"]
        a, low, high = p["a"], p["ci_low"], p["ci_high"]
        if a is None or low is None or high is None:
            cells.append(f"{m} -")
            continue
        cells.append(f"{m} {a:.1f} {p['diff']:+.1f} [{low:+.1f},{high:+.1f}]")
    faults = f" faults {base_verdicts} vs {verdicts}" if verdicts or base_verdicts else ""
    return (
        f"{name:<22} {how:<9} sent {r['sent']:>5} accounted {'yes' if exact else 'NO'}"
        f"  {'; '.join(cells)}{faults}"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("names", nargs="*", help="scenario names (default: all)")
    ap.add_argument("--duration", type=float, default=10.0)
    ap.add_argument("--no-ray", action="store_true")
    ap.add_argument("--llama", action="store_true", help="the llama.cpp scenarios too")
    args = ap.parse_args()
    scenarios = sorted((ROOT / "scenarios").glob("*.toml"))
    if args.names:
        scenarios = [p for p in scenarios if p.stem in args.names]
    if not args.llama:
        scenarios = [p for p in scenarios if not p.stem.startswith("llama")]
    with tempfile.TemporaryDirectory(prefix="lt-so-", dir="/tmp") as tmp:
        address = None if args.no_ray else _cluster(Path(tmp) / "ray")
        try:
            for sc in scenarios:
                one = _run(sc, Path(tmp) / f"{sc.stem}-one", args.duration)
                if isinstance(one, str):
                    print(f"{sc.stem:<22} one process failed: {one}", flush=True)
                    continue
                ways: list[tuple[str, tuple[str, ...]]] = [("workers", ("--workers", "2"))]
                if address is not None:
                    ways.append(("ray", ("--workers", "2", "--ray", address)))
                for how, extra in ways:
                    other = _run(sc, Path(tmp) / f"{sc.stem}-{how}", args.duration, *extra)
                    if isinstance(other, str):
                        print(f"{sc.stem:<22} {how:<9} failed: {other}", flush=True)
                    else:
                        print(_line(sc.stem, how, one, other), flush=True)
        finally:
            if address is not None:
                _ray("stop", "--force")


if __name__ == "__main__":
    main()
