"""Deployment cost of a server process, measured on a real short-lived simulator process."""

from __future__ import annotations

import asyncio
import socket
import sys
from pathlib import Path

import pytest

from loadtest.errors import EndpointError
from loadtest.features.deployment_cost import EnergyMeter, RssSampler, measure_cold_start

pytestmark = pytest.mark.timeout(120)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_cold_start_and_memory_of_a_simulator_process() -> None:
    port = _free_port()
    cmd = [sys.executable, "-m", "loadtest", "sim", "--port", str(port)]
    cold, proc = await measure_cold_start(cmd, f"http://127.0.0.1:{port}", "sim-llm")
    try:
        sampler = RssSampler(proc.pid, interval_s=0.01).start()
        mem = sampler.stop()
        again = RssSampler(proc.pid, interval_s=0.01).start()
        await asyncio.sleep(0.2)
        later = again.stop()
    finally:
        proc.terminate()
        proc.wait(15)
    assert cold.ready_s > 0
    assert cold.first_token_error is None
    assert cold.first_token_s is not None and cold.first_token_s > cold.ready_s
    # A Python process with aiohttp loaded holds megabytes, not bytes.
    assert mem.samples >= 1 and mem.steady_bytes > 10_000_000
    assert later.samples > 1
    assert later.peak_bytes >= later.steady_bytes > 10_000_000


async def test_a_server_that_dies_before_ready_is_an_endpoint_error() -> None:
    cmd = [sys.executable, "-c", "raise SystemExit(3)"]
    with pytest.raises(EndpointError, match="exited with 3"):
        await measure_cold_start(cmd, f"http://127.0.0.1:{_free_port()}", "m")


def test_energy_without_counters_is_not_available_never_zero(tmp_path: Path) -> None:
    use = EnergyMeter(powercap=tmp_path / "none").start().stop()
    if use.source is not None and "nvml" in use.source:
        pytest.skip("this machine has a GPU that NVML reads")
    assert use.joules is None and use.watts is None
    assert use.reason is not None and use.reason.startswith("not available on this machine")
    assert "RAPL" in use.reason


def _zone(root: Path, name: str, label: str, uj: int, max_uj: int) -> Path:
    zone = root / name
    zone.mkdir(parents=True)
    (zone / "name").write_text(label + "\n")
    (zone / "energy_uj").write_text(f"{uj}\n")
    (zone / "max_energy_range_uj").write_text(f"{max_uj}\n")
    return zone / "energy_uj"


def test_rapl_energy_sums_top_zones_and_survives_a_wrap(tmp_path: Path) -> None:
    # A powercap tree laid out as Linux lays it out: two packages and a sub-zone of one.
    a = _zone(tmp_path, "intel-rapl:0", "package-0", 1_000_000, 10_000_000)
    b = _zone(tmp_path, "intel-rapl:1", "package-1", 9_500_000, 10_000_000)
    sub = _zone(tmp_path, "intel-rapl:0:0", "core", 0, 10_000_000)
    meter = EnergyMeter(powercap=tmp_path).start()
    a.write_text("3000000\n")  # +2 J
    b.write_text("500000\n")  # wrapped: +1 J
    sub.write_text("5000000\n")  # part of package-0: not counted twice
    use = meter.stop()
    assert use.source is not None and use.source.startswith("rapl:package-0+rapl:package-1")
    if "nvml" in use.source:
        pytest.skip("NVML's share on this machine is not known to the test")
    assert use.joules == pytest.approx(3.0)
