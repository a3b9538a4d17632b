"""``--ray ADDRESS``: the same workers as ``--workers``, as tasks on a Ray cluster.

Each worker is a Ray task (one CPU) running ``worker_main.worker_run``; it ships its
``requests.jsonl`` and ``histograms.hlog`` back with its encoded metrics, since its
machine may not be this one. Ctrl-C here increments a counter in a small Ray actor
that the workers poll, so a stop reaches every machine and is handled as locally: the
first stops gracefully, the next cancels. ``ray`` is the optional extra ``ray``.
"""

from __future__ import annotations

import dataclasses
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from loadtest.app.worker_main import WorkerJob, WorkerResult, worker_run
from loadtest.errors import EndpointError, MissingExtraError

if TYPE_CHECKING:
    from loadtest.engine.runner import RunConfig

__all__ = ["run_on_ray"]


def run_on_ray(
    configs: list[RunConfig],
    tls: tuple[str | None, bool],
    address: str,
    start_delay_s: float,
    on_first_stop: Callable[[], None],
) -> list[WorkerResult]:
    """Run one Ray task per config; returns their results, files written locally."""
    try:
        import ray
    except ImportError as exc:
        raise MissingExtraError("--ray", "ray") from exc

    try:
        ray.init(address=address, include_dashboard=False, log_to_driver=False)
    except (ConnectionError, RuntimeError, ValueError) as exc:
        raise EndpointError(f"cannot join the Ray cluster at {address}: {exc}") from exc
    try:

        @ray.remote
        class StopCounter:
            def __init__(self) -> None:
                self.n = 0

            def press(self) -> int:
                self.n += 1
                return self.n

            def count(self) -> int:
                return self.n

        @ray.remote(num_cpus=1, max_retries=0)
        def task(job: WorkerJob, counter: Any) -> WorkerResult:
            return worker_run(job, lambda: ray.get(counter.count.remote()))

        counter = StopCounter.remote()  # type: ignore[attr-defined]
        start_wall = time.time() + start_delay_s + 2.0  # scheduling tasks takes a moment
        refs = [
            task.remote(WorkerJob(cfg, start_wall, tls, ship_files=True), counter)
            for cfg in configs
        ]
        presses = {"n": 0}

        def stop(sig: int, _frame: Any) -> None:
            presses["n"] += 1
            if presses["n"] == 1:
                on_first_stop()
            counter.press.remote()

        old = {s: signal.signal(s, stop) for s in (signal.SIGINT, signal.SIGTERM)}
        try:
            pending = list(refs)
            while pending:
                _, pending = ray.wait(pending, num_returns=len(pending), timeout=0.5)
        finally:
            for s, h in old.items():
                signal.signal(s, h)
        results: list[WorkerResult] = ray.get(refs)
    finally:
        ray.shutdown()
    kept = []
    for cfg, result in zip(configs, results, strict=True):
        folder = Path(cfg.run_dir)
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "requests.jsonl").write_bytes(result.requests or b"")
        (folder / "histograms.hlog").write_bytes(result.hlog or b"")
        kept.append(dataclasses.replace(result, requests=None, hlog=None))
    return kept
