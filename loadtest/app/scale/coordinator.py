"""The coordinator of a run with workers: what happens once per run, beside the load.

With ``--workers N`` (local processes or Ray tasks) the load is sent by the workers, but
some parts of a run must happen exactly once: the fault rig (toxics on the draft's
proxy, hook actions, the ``/metrics`` scrape into ``metrics.jsonl``, the managed
target) and its verdicts, judged on the merged records. They run here, in the parent,
in an event loop of their own thread, while the main thread waits on the workers (and
handles the signals). The rig sees the run through ``CoordinatorContext``: the run's
clock, folder, scenario and side-request settings; what only a process that sends load
has (its client, its in-flight count, bursts, records) is not there, and the rig is told
so (``in_flight_known``).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

from loadtest.engine.hooks import HookResult

if TYPE_CHECKING:
    from loadtest.config.scenario import Scenario
    from loadtest.features.faults.rig import FaultRig
    from loadtest.measure.recorders import Metrics
    from loadtest.model.json import JsonObject
    from loadtest.model.prompt import Prompt
    from loadtest.model.record import RequestRecord
    from loadtest.transport.client import Client
    from loadtest.transport.side import SideHttp

__all__ = ["Coordinator", "CoordinatorContext", "WorkerFilesHold"]

T = TypeVar("T")


class WorkerFilesHold:
    """The rig's ``on_hold`` for local workers: a ``hold`` file in each worker's folder
    while the load must hold (``worker_main.HOLD``, which each worker watches), and each
    worker's ``hold-ack`` once it holds. Ray tasks are told through the run's control
    actor instead (``ray_backend``)."""

    def __init__(self, dirs: list[Path]) -> None:
        self.dirs = dirs

    def __call__(self, down: bool) -> None:
        from loadtest.app.scale.worker_main import HOLD

        for d in self.dirs:
            path = d / HOLD
            if down:
                d.mkdir(parents=True, exist_ok=True)
                path.touch()
            else:
                path.unlink(missing_ok=True)

    def holding(self) -> bool:
        """Whether every worker has confirmed that it holds."""
        from loadtest.app.scale.worker_main import HOLD_ACK

        return all((d / HOLD_ACK).exists() for d in self.dirs)


class CoordinatorContext:
    """The run as the coordinator's hooks see it (``RunContext`` without the load)."""

    def __init__(
        self,
        t0_ns: int,
        started_wall: float,
        run_dir: Path,
        scenario: Scenario,
        model: str,
        side_http: SideHttp,
    ) -> None:
        self._t0_ns = t0_ns
        self._started_wall = started_wall
        self._run_dir = run_dir
        self._scenario = scenario
        self._model = model
        self._side_http = side_http

    @property
    def t0_ns(self) -> int:
        """The common start of the workers, on this machine's monotonic clock."""
        return self._t0_ns

    @property
    def started_wall(self) -> float:
        """The common start, wall clock."""
        return self._started_wall

    @property
    def run_dir(self) -> Path:
        """The merged run's folder."""
        return self._run_dir

    @property
    def scenario(self) -> Scenario:
        """The scenario (the whole load, not a worker's share)."""
        return self._scenario

    @property
    def model(self) -> str:
        """The model the workers ask for."""
        return self._model

    @property
    def side_http(self) -> SideHttp:
        """The run's TLS and key for side requests."""
        return self._side_http

    def _none(self, what: str) -> NoReturn:
        raise RuntimeError(f"a coordinator of workers has no {what}: the workers do")

    @property
    def metrics(self) -> Metrics:
        """Not here: each worker has its own (merged at the end)."""
        self._none("metrics")

    @property
    def in_flight(self) -> int:
        """Not here: the open requests are split over the workers."""
        self._none("in-flight count")

    @property
    def client(self) -> Client:
        """Not here: each worker has its own client."""
        self._none("client")

    def burst(self, n: int) -> None:
        """Not here: bursts are sent by each worker's ``FaultLoad``."""
        self._none("load to burst")

    def end_load(self, reason: str) -> None:
        """Not here: each worker judges its own stop rules."""
        self._none("load to end")

    def warming_up_at(self, ns: int) -> bool:
        """Whether ``ns`` falls in the warm-up (by time: the workers share the clock)."""
        return ns < self._t0_ns + int(self._scenario.load.warmup_s * 1e9)

    def account(self, rec: RequestRecord, prompt: Prompt, extra: JsonObject | None = None) -> None:
        """Not here: the workers account their requests."""
        self._none("records")


class Coordinator:
    """Runs the fault rig once, in a thread's event loop, beside the workers."""

    def __init__(self, rig: FaultRig) -> None:
        self.rig = rig
        rig.in_flight_known = False
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="loadtest-coordinator", daemon=True
        )
        self._thread.start()
        self._begun: concurrent.futures.Future[None] | None = None

    def _call(self, coro: Coroutine[Any, Any, T], timeout_s: float | None = None) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout_s)

    def start(self) -> None:
        """Start the rig's edges (the proxy, the managed target) before the workers."""
        self._call(self.rig.start())

    def begin(self, context: Callable[[int], CoordinatorContext], start_wall: float) -> None:
        """At ``start_wall`` (the workers' common start) start the rig's timeline, on a
        context made with that instant's monotonic clock (the workers take theirs then)."""

        async def at_start() -> None:
            await asyncio.sleep(max(0.0, start_wall - time.time()))
            await self.rig.on_start(context(time.perf_counter_ns()))

        self._begun = asyncio.run_coroutine_threadsafe(at_start(), self._loop)

    def finish(self) -> None:
        """The workers are done: stop the timeline, the scraper, the target, the proxy."""

        async def stop() -> None:
            await self.rig.on_finish()

        try:
            if self._begun is not None:
                self._begun.cancel()  # workers that ended before the start
            self._call(stop(), timeout_s=120)
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)

    def result(self, run_dir: Path) -> HookResult:
        """The rig's verdicts, judged once on the merged ``requests.jsonl``."""
        return self.rig.result(run_dir)
