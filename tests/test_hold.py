"""The hold while a restarted target is down, between a coordinator and its workers.

The coordinator sets the flag and stops the target only once every worker has confirmed
that it holds: a fixed lead (60 ms, three of a worker's looks) was not enough on a busy
machine, where a Ray task's look took longer and its sessions failed on refused
connections (8 of at most 4 allowed, in a suite run). Here through the local workers'
real files; the Ray actor's side runs in ``test_ray``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from pathlib import Path

import pytest

from loadtest.app.scale.coordinator import WorkerFilesHold
from loadtest.app.scale.worker_main import HOLD_ACK, local_hold_line
from loadtest.features.faults import rig as rig_module
from loadtest.features.faults.load import HoldFlag
from loadtest.features.faults.plan import FaultPlan
from loadtest.features.faults.rig import FaultRig


async def _until(check: Callable[[], bool], what: str) -> None:
    for _ in range(500):  # up to 5 s
        if check():
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"not {what} after 5 s")


async def test_a_worker_confirms_the_hold_it_sees_and_withdraws_it_when_cleared(
    tmp_path: Path,
) -> None:
    dirs = [tmp_path / "worker-0", tmp_path / "worker-1"]
    for d in dirs:
        d.mkdir()
    control = WorkerFilesHold(dirs)
    flags = [HoldFlag(local_hold_line(d)) for d in dirs]
    watching = [asyncio.create_task(f.watch()) for f in flags[:1]]
    try:
        control(True)
        # A worker holds as soon as it has looked, and confirms right after.
        await _until(lambda: flags[0]() and (dirs[0] / HOLD_ACK).exists(), "held by worker 0")
        assert not control.holding()  # worker 1 is not watching: not every worker holds
        assert not (dirs[1] / HOLD_ACK).exists()
        watching.append(asyncio.create_task(flags[1].watch()))
        await _until(control.holding, "held by both")
        control(False)
        await _until(lambda: not flags[0]() and not flags[1](), "released")
        await _until(lambda: not any((d / HOLD_ACK).exists() for d in dirs), "unconfirmed")
        assert not control.holding()
    finally:
        for t in watching:
            t.cancel()
        await asyncio.gather(*watching, return_exceptions=True)


async def test_a_restart_stops_the_target_only_once_every_worker_holds(tmp_path: Path) -> None:
    d = tmp_path / "worker-0"
    d.mkdir()
    rig = FaultRig(FaultPlan())
    rig.on_hold = WorkerFilesHold([d])
    flag = HoldFlag(local_hold_line(d))
    # The worker looks only after 0.3 s (a busy machine): the rig waits for it.
    started = asyncio.get_running_loop().time()

    async def late_worker() -> None:
        await asyncio.sleep(0.3)
        await flag.watch()

    worker = asyncio.create_task(late_worker())
    try:
        await rig.hold_load(True)
        waited = asyncio.get_running_loop().time() - started
        assert flag() is True and (d / HOLD_ACK).exists()
        assert waited >= 0.3
    finally:
        worker.cancel()
        await asyncio.gather(worker, return_exceptions=True)


async def test_a_worker_that_never_confirms_delays_the_stop_by_the_bound_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(rig_module, "HOLD_CONFIRM_S", 0.2)
    d = tmp_path / "worker-0"
    d.mkdir()
    rig = FaultRig(FaultPlan())
    rig.on_hold = WorkerFilesHold([d])  # no worker watches (it has ended, or died)
    with caplog.at_level(logging.WARNING, logger="loadtest"):
        await asyncio.wait_for(rig.hold_load(True), timeout=5)
    assert "not every worker confirmed the hold within" in caplog.text
