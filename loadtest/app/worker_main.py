"""What runs inside one worker (a local process or a Ray task): its share of the load.

``worker_run`` builds the prompts, waits for the common start (wall clock, so that it
also holds across machines), runs the ``Runner`` and returns its metrics as encoded
HdrHistograms, its own measured window, and, for workers on other machines, the
contents of its ``requests.jsonl`` and ``histograms.hlog`` (their files stay local
otherwise). Stop requests arrive as signals (local) or through ``stop_count`` (Ray).
"""

from __future__ import annotations

import asyncio
import dataclasses
import shutil
import signal
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

from loadtest.report.atomic import write_atomic

__all__ = ["worker_run"]


def worker_run(
    payload: dict[str, Any], stop_count: Callable[[], int] | None = None
) -> dict[str, Any]:
    """Run one worker's share; returns its result (see the module docstring)."""
    from loadtest.datasets import build_pool
    from loadtest.engine.gc_policy import QuietGc
    from loadtest.engine.runner import Runner
    from loadtest.measure.merge import encode_metrics
    from loadtest.report.hlog import HlogHook
    from loadtest.transport.auth import tls_context

    ship = bool(payload.get("ship_files"))
    cfg = payload["config"]
    if ship:  # on another machine: a scratch folder, shipped back and removed
        cfg = dataclasses.replace(cfg, run_dir=Path(tempfile.mkdtemp(prefix="loadtest-worker-")))
    # An SSLContext does not cross process boundaries: each worker builds its own.
    cfg = dataclasses.replace(cfg, tls=tls_context(*payload["tls"]))
    run_dir = Path(cfg.run_dir)

    async def main() -> dict[str, Any]:
        pool, _ = build_pool(cfg.scenario)
        runner = Runner(cfg, pool, hooks=[HlogHook(), QuietGc()])
        if stop_count is None:
            loop = asyncio.get_running_loop()
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.add_signal_handler(sig, runner.on_stop_signal)
        delay = payload["start_wall"] - time.time()
        if delay > 0:
            await asyncio.sleep(delay)
        tasks = [asyncio.create_task(_progress(runner, run_dir, bool(payload.get("live"))))]
        if stop_count is not None:
            tasks.append(asyncio.create_task(_poll_stop(runner, stop_count)))
        try:
            outcome = await runner.run()
        finally:
            for t in tasks:
                t.cancel()
        return {
            "metrics": encode_metrics(outcome.metrics),
            "t0_ns": outcome.t0_ns,
            "started_wall": outcome.started_wall,
            "duration_s": outcome.duration_s,
            "measured_s": outcome.measured_s,
            "interrupted": outcome.interrupted,
            "stale_retries": runner.stale_retries,
        }

    result = asyncio.run(main())
    if ship:
        result["requests"] = (run_dir / "requests.jsonl").read_bytes()
        result["hlog"] = (run_dir / "histograms.hlog").read_bytes()
        shutil.rmtree(run_dir, ignore_errors=True)
    else:
        write_atomic(run_dir / "result.json", orjson.dumps(result))
    return result


async def _poll_stop(runner: Any, stop_count: Callable[[], int]) -> None:
    seen = 0
    while True:
        await asyncio.sleep(0.5)
        pressed = await asyncio.to_thread(stop_count)
        while seen < pressed:
            seen += 1
            runner.on_stop_signal()


async def _progress(runner: Any, run_dir: Path, live: bool) -> None:
    """Once a second: counters for progress lines; with ``live``, the metrics too.

    ``live``: the parent shows a dashboard of all workers, built from each worker's
    encoded histograms (``live.json``), merged as at the end of the run.
    """
    from loadtest.measure.merge import encode_metrics

    while True:
        await asyncio.sleep(1.0)
        m = runner.metrics
        state = {
            "sent": m.sent,
            "ok": m.outcomes["ok"],
            "failed": m.outcomes["failed"],
            "in_flight": runner.in_flight,
            "rate": m.rate_history[-1] if m.rate_history else 0.0,
            "tok_rate": m.token_rate_history[-1] if m.token_rate_history else 0.0,
        }
        write_atomic(run_dir / "progress.json", orjson.dumps(state))
        if live:
            snapshot = {
                "metrics": encode_metrics(m),
                "in_flight": runner.in_flight,
                "measured": runner.measured,
                "rate_history": m.rate_history[-120:],
                "token_rate_history": m.token_rate_history[-120:],
                "ttft_p95_history": m.ttft_p95_history[-120:],
            }
            write_atomic(run_dir / "live.json", orjson.dumps(snapshot))
