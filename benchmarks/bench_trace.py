"""Dispatch lag of a replayed trace (not a test: prints figures, asserts nothing).

    python -m benchmarks.bench_trace                 # 1,000 req/s for 10 s
    python -m benchmarks.bench_trace --rate 500 --seconds 5

A trace of evenly spaced requests (1 ms apart at 1,000 req/s, each line carrying its
prompt, 4 output tokens) is replayed against the simulator in its own process; the
figures are the dispatch lag (send minus the trace's own time) and whether every line
went out in its order.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
from pathlib import Path

import numpy as np
import orjson

from benchmarks.bench_client import DISPATCH_SIM
from loadtest.config.scenario import parse_scenario
from loadtest.engine.gc_policy import QuietGc
from loadtest.engine.runner import RunConfig, Runner
from loadtest.features.workload import prepare_workload
from loadtest.model.json import JsonObject
from loadtest.model.record import RequestRecord
from loadtest.sim import SimProcess


def write_trace(path: Path, rate: float, seconds: float) -> int:
    n = int(rate * seconds)
    lines = (
        orjson.dumps({"timestamp": i * 1000.0 / rate, "output_length": 4, "prompt": f"bench {i}"})
        for i in range(n)
    )
    path.write_bytes(b"\n".join(lines) + b"\n")
    return n


async def replay(trace: Path, url: str, run_dir: Path, sink: list[RequestRecord]) -> None:
    sc = parse_scenario(
        {
            "name": "bench-trace",
            "sources": [{"kind": "trace", "path": str(trace)}],
            "load": {"mode": "closed", "grace_s": 30},
            "timeouts": {"first_byte_s": 60, "between_chunks_s": 60},
        },
        "bench.toml",
    )
    wl = prepare_workload(sc, "sim-llm", None)
    assert wl is not None
    cfg = RunConfig(scenario=wl.scenario, endpoint=url, model="sim-llm", run_dir=run_dir)
    runner = Runner(cfg, None, hooks=[*wl.hooks, QuietGc()], unit=wl.unit, on_record=sink.append)
    await runner.run()


def bench(rate: float, seconds: float) -> JsonObject:
    """Replay ``rate * seconds`` requests; returns the lag figures."""
    with tempfile.TemporaryDirectory() as tmp, SimProcess(DISPATCH_SIM) as sim:
        trace = Path(tmp) / "trace.jsonl"
        n = write_trace(trace, rate, seconds)
        records: list[RequestRecord] = []
        asyncio.run(replay(trace, sim.url, Path(tmp) / "run", records))
    records.sort(key=lambda r: r.index)
    lags = np.array([(r.sent_ns - r.intended_ns) / 1e6 for r in records])
    sent = [r.sent_ns for r in records]
    return {
        "rate": rate,
        "trace_requests": n,
        "sent": len(records),
        "ok": sum(r.outcome == "ok" for r in records),
        "in_order": sent == sorted(sent),
        "dispatch_lag_ms": {
            "p50": round(float(np.percentile(lags, 50)), 3),
            "p99": round(float(np.percentile(lags, 99)), 3),
            "max": round(float(lags.max()), 3),
        },
    }


def main() -> None:
    """Run the benchmark and print its figures as JSON."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--rate", type=float, default=1000.0)
    p.add_argument("--seconds", type=float, default=10.0)
    args = p.parse_args()
    print(json.dumps(bench(args.rate, args.seconds), indent=2))


if __name__ == "__main__":
    main()
