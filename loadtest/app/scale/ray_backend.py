"""``--ray ADDRESS``: the same workers as ``--workers``, as tasks on a Ray cluster.

Each worker is a Ray task (one CPU) running ``worker_main.worker_run``; it ships the
files of its folder (``requests.jsonl``, ``histograms.hlog``, its hooks' side files)
back with its encoded metrics, since its machine may not be this one; they are written
into its ``worker-<i>/`` here and merged as a local worker's. Ctrl-C here increments
a counter in a small Ray actor that the workers poll, so a stop reaches every machine
and is handled as locally: the first stops gracefully, the next cancels. ``ray`` is the
optional extra ``ray``.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import logging
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from loadtest.app.scale.worker_main import WorkerJob, WorkerResult, worker_run
from loadtest.errors import EndpointError, MissingExtraError

if TYPE_CHECKING:
    from loadtest.engine.runner import RunConfig
    from loadtest.features.faults.load import HoldControl

__all__ = ["RAY_REWRITES", "run_on_ray"]

_GO_MARGIN_S = 0.5
"""From naming the common start to it: the tasks poll for it every 50 ms."""

log = logging.getLogger("loadtest")

RAY_REWRITES = ("127.0.0.1", "localhost", "::1")
"""Hosts Ray itself swaps for the machine's primary address."""


def _loopback_node(address: str) -> str | None:
    """``_node_ip_address`` for a cluster on loopback, so that the driver stays there too.

    Without it ``ray.init`` registers the driver under the machine's primary address
    (its log says "Connecting to existing Ray cluster at address: <that address>"), and
    a run meant to stay on loopback would reach out through the network interface. Ray
    rewrites exactly ``127.0.0.1``, ``localhost`` and ``::1`` to that address wherever
    it meets them (``resolve_ip_for_localhost``), so a cluster that must stay on
    loopback is started on another loopback address (``127.0.0.2``): that one is kept.
    """
    host = address.removeprefix("ray://").rsplit(":", 1)[0].strip("[]")
    try:
        loopback = ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = host == "localhost"
    if not loopback:
        return None
    if host in RAY_REWRITES:
        log.warning(
            "Ray replaces %s with this machine's network address, so the run's Ray "
            "traffic leaves loopback; start the cluster with --node-ip-address "
            "127.0.0.2 (any other 127.x address) and pass --ray 127.0.0.2:PORT to keep it "
            "on loopback",
            host,
        )
        return None
    return host


class _Hold:
    """The fault rig's ``on_hold`` on Ray: the control actor's flag, set and confirmed,
    and the tasks' confirmations that they hold (the rig stops the target once every
    task holds). Called from the coordinator's threads; once the run's Ray session is
    closed, a late call (a restart cut short by the run's end) does nothing."""

    def __init__(self, control: Any, tasks: int) -> None:
        self._control = control
        self._tasks = tasks
        self._lock = threading.Lock()
        self._open = True

    def __call__(self, down: bool) -> None:
        import ray

        with self._lock:
            if self._open:
                ray.get(self._control.hold.remote(down))

    def holding(self) -> bool:
        import ray

        with self._lock:
            return not self._open or ray.get(self._control.holding.remote()) >= self._tasks

    def close(self) -> None:
        with self._lock:
            self._open = False


def _write_lives(configs: list[RunConfig], lives: dict[int, bytes]) -> None:
    """Each task's last ``live.json``, into its folder here (``app.process.live`` reads them)."""
    from loadtest.model.atomic import write_atomic

    for i, data in lives.items():
        folder = Path(configs[i].run_dir)
        folder.mkdir(parents=True, exist_ok=True)
        write_atomic(folder / "live.json", data)


def run_on_ray(
    configs: list[RunConfig],
    tls: tuple[str | None, bool],
    address: str,
    on_first_stop: Callable[[], None],
    on_start_wall: Callable[[float], None] | None = None,
    hold_with: Callable[[HoldControl], None] | None = None,
    live: bool = False,
) -> list[WorkerResult]:
    """Run one Ray task per config; returns their results, files written locally.

    ``live``: each task hands its ``live.json`` to the control actor once a second, and
    it is written into the task's ``worker-<i>/`` here, where the live outputs read it.

    ``hold_with`` is handed the hold (``HoldControl``), which sets the control actor's
    hold flag that every task looks at every 20 ms (``HoldFlag``) and counts the tasks
    that confirmed it: a restarted target's hold
    reaches every machine, as the stop does, with no shared file."""
    try:
        import ray
    except ImportError as exc:
        raise MissingExtraError("--ray", "ray") from exc

    try:
        ray.init(
            address=address,
            include_dashboard=False,
            log_to_driver=False,
            _node_ip_address=_loopback_node(address),
        )
    except (ConnectionError, RuntimeError, ValueError) as exc:
        raise EndpointError(f"cannot join the Ray cluster at {address}: {exc}") from exc
    hold: _Hold | None = None
    try:

        @ray.remote
        class Control:
            """Stops (pressed here, polled by the tasks) and the start gate: each task
            says it is ready, and waits for the common start named here."""

            def __init__(self) -> None:
                self.n = 0
                self.ready_tasks = 0
                self.start_wall: float | None = None
                self.down = False
                self.holding_tasks: set[int] = set()
                self.live_states: dict[int, bytes] = {}

            def live(self, task: int, data: bytes) -> None:
                self.live_states[task] = data

            def lives(self) -> dict[int, bytes]:
                return self.live_states

            def hold(self, down: bool) -> None:
                self.down = down

            def held(self) -> bool:
                return self.down

            def ack(self, task: int, holds: bool) -> None:
                if holds:
                    self.holding_tasks.add(task)
                else:
                    self.holding_tasks.discard(task)

            def holding(self) -> int:
                return len(self.holding_tasks)

            def press(self) -> int:
                self.n += 1
                return self.n

            def count(self) -> int:
                return self.n

            def ready(self) -> int:
                self.ready_tasks += 1
                return self.ready_tasks

            def readies(self) -> int:
                return self.ready_tasks

            def go(self, start_wall: float) -> None:
                self.start_wall = start_wall

            def start(self) -> float | None:
                return self.start_wall

        @ray.remote(num_cpus=1, max_retries=0)
        def task(job: WorkerJob, control: Any) -> WorkerResult:
            from loadtest.features.faults.load import HoldChannel

            def start() -> float:
                ray.get(control.ready.remote())
                while (at := ray.get(control.start.remote())) is None:
                    time.sleep(0.05)
                return float(at)

            def ack(holds: bool) -> None:
                ray.get(control.ack.remote(job.index, holds))

            def publish(data: bytes) -> None:
                control.live.remote(job.index, data)  # no wait: the next second replaces it

            return worker_run(
                job,
                start,
                lambda: ray.get(control.count.remote()),
                HoldChannel(lambda: bool(ray.get(control.held.remote())), ack),
                publish if job.live else None,
            )

        control = Control.remote()  # type: ignore[attr-defined]
        hold = _Hold(control, len(configs))
        if hold_with is not None:
            hold_with(hold)
        n = len(configs)
        refs = [
            task.remote(
                WorkerJob(
                    cfg,
                    tls,
                    ship_files=True,
                    live=live,
                    index=i,
                    workers=n,
                    run_seed=configs[0].scenario.seed,  # worker 0 keeps the run's seed
                ),
                control,
            )
            for i, cfg in enumerate(configs)
        ]
        # The gate: once every task is ready (or one has ended: it failed), all start.
        while ray.get(control.readies.remote()) < n:
            done, _ = ray.wait(refs, num_returns=1, timeout=0.05)
            if done:
                break
        start_wall = time.time() + _GO_MARGIN_S
        if on_start_wall is not None:
            on_start_wall(start_wall)
        ray.get(control.go.remote(start_wall))
        presses = {"n": 0}

        def stop(sig: int, _frame: Any) -> None:
            presses["n"] += 1
            if presses["n"] == 1:
                on_first_stop()
            control.press.remote()

        old = {s: signal.signal(s, stop) for s in (signal.SIGINT, signal.SIGTERM)}
        try:
            pending = list(refs)
            while pending:
                _, pending = ray.wait(pending, num_returns=len(pending), timeout=0.5)
                if live:
                    _write_lives(configs, ray.get(control.lives.remote()))
        finally:
            for s, h in old.items():
                signal.signal(s, h)
        results: list[WorkerResult] = ray.get(refs)
    finally:
        if hold is not None:
            hold.close()
        ray.shutdown()
    kept = []
    for cfg, result in zip(configs, results, strict=True):
        folder = Path(cfg.run_dir)
        folder.mkdir(parents=True, exist_ok=True)
        for name, data in result.files or ():
            (folder / Path(name).name).write_bytes(data)  # a bare name: nothing outside it
        kept.append(dataclasses.replace(result, files=None))
    return kept
