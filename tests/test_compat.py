"""The private-API hooks check themselves; on this install every check must pass.

A dependency upgrade that breaks one of their assumptions makes these tests fail
loudly, rather than the hook silently falling back in production.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import sys
import time

import aiohttp
import numpy as np
import pytest
from hdrh.histogram import HdrHistogram

from loadtest._compat import arrivals, eager_send, hdr_internals, kernel_stamps, selfcheck
from loadtest._compat.checks import CompatCheck
from loadtest.measure import hdr
from loadtest.transport.client import Client, ClientConfig
from tests.conftest import log_records

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="SO_TIMESTAMPNS")


def test_every_self_check_passes_on_this_install() -> None:
    checks = selfcheck.report()
    assert {c.name for c in checks} == {"kernel_stamps", "arrivals", "eager_send", "hdr_internals"}
    failed = [c for c in checks if not c.ok]
    if not sys.platform.startswith("linux"):
        failed = [c for c in failed if c.name != "kernel_stamps"]
    assert not failed, failed
    assert selfcheck.fallbacks() == () or not sys.platform.startswith("linux")


def test_python_outside_the_verified_range_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    now = sys.version_info[:2]
    monkeypatch.setattr(kernel_stamps, "VERIFIED_PYTHON", ((now[0], now[1] + 1), (9, 9)))
    check = kernel_stamps.self_check.__wrapped__()
    assert not check.ok
    assert "not verified" in check.detail or "SO_TIMESTAMPNS" in check.detail


def test_aiohttp_outside_the_verified_range_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(aiohttp, "__version__", "4.0.0")
    check = arrivals.self_check.__wrapped__()
    assert not check.ok and "4.0.0" in check.detail


class _Holder(asyncio.Protocol):
    def __init__(self) -> None:
        self.rx_ns = 0
        self.data: list[bytes] = []
        self.got = asyncio.Event()

    def data_received(self, data: bytes) -> None:
        self.data.append(data)
        self.got.set()


@linux_only
async def test_stamps_survive_a_change_of_protocol(kernel_stamping: bool) -> None:
    """asyncio's set_protocol resets the read callback: stamping must follow it."""
    loop = asyncio.get_running_loop()
    with socket.create_server(("127.0.0.1", 0)) as listener:
        holder = _Holder()
        transport, first = await loop.create_connection(
            _Holder, "127.0.0.1", listener.getsockname()[1]
        )
        assert kernel_stamps.install(transport, holder)
        peer, _ = listener.accept()
        with peer:
            second = _Holder()
            transport.set_protocol(second)  # what start_tls and upgrades do
            before = time.perf_counter_ns()
            peer.sendall(b"after the change")
            await asyncio.wait_for(second.got.wait(), 5)
            assert second.data == [b"after the change"]
            assert not first.data
            assert holder.rx_ns >= before  # stamped, not left at 0 by asyncio's reader
        transport.close()


def test_a_failed_check_falls_back_visibly(monkeypatch: pytest.MonkeyPatch) -> None:
    bad = CompatCheck("kernel_stamps", False, "pretend asyncio changed")
    monkeypatch.setattr(kernel_stamps, "self_check", lambda: bad)
    monkeypatch.setattr("loadtest._compat.checks._warned", set())

    class _T(asyncio.Transport):
        pass

    with log_records("loadtest.compat") as records:
        assert kernel_stamps.install(_T(), _Holder()) is False
    assert any(
        "pretend asyncio changed" in r.getMessage() and r.levelno == logging.WARNING
        for r in records
    )


@pytest.fixture
def slow_hdr(monkeypatch: pytest.MonkeyPatch) -> None:
    bad = CompatCheck("hdr_internals", False, "pretend hdrh changed")
    monkeypatch.setattr(hdr_internals, "self_check", lambda: bad)


def _filled(values: np.ndarray) -> HdrHistogram:
    h = hdr.new_histogram()
    hdr.record_array(h, values)
    return h


@pytest.mark.usefixtures("slow_hdr")
def test_hdr_fallbacks_give_hdrhs_own_results() -> None:
    rng = np.random.default_rng(3)
    values = rng.integers(1, 5_000_000, 500).astype(np.int64)
    h = _filled(values)
    want = hdr.new_histogram()
    for v in values.tolist():
        want.record_value(v)
    assert h.get_total_count() == 500
    for q in (50.0, 90.0, 99.0, 99.9):
        assert hdr.fast_percentile(h, q) == want.get_value_at_percentile(q)
    lowest, _, counts = hdr.bucket_arrays(h)
    assert int(counts.sum()) == 500 and lowest.size == counts.size
    merged = hdr.new_histogram()
    hdr.add_into(merged, h)
    assert merged.get_total_count() == 500
    ok = hdr.record_corrected_many(
        merged, np.array([1000, 10], dtype=np.int64), np.array([100, 100], dtype=np.int64)
    )
    assert ok.all() and merged.get_total_count() == 500 + 10 + 1


def test_eager_send_check_and_class() -> None:
    assert eager_send.self_check().ok
    cls = eager_send.eager_request_class()
    assert (cls is eager_send.EagerRequest) == (sys.version_info < (3, 12))


async def test_the_client_records_no_fallback_here() -> None:
    async with Client(ClientConfig(base_url="http://127.0.0.1:9")) as client:
        fell = client.fallbacks
    assert fell == () or not sys.platform.startswith("linux")


def test_a_child_that_asked_dies_with_its_parent() -> None:
    # A parent starts a long child with die_with_parent, prints its pid, then is killed
    # hard: the child must not outlive it (a managed server left running after a killed
    # run holds its port and a core).
    import os
    import signal
    import subprocess
    import sys
    import time

    code = (
        "import subprocess, sys, time\n"
        "from loadtest._compat.orphans import die_with_parent\n"
        "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'],"
        " preexec_fn=die_with_parent)\n"
        "print(p.pid, flush=True)\n"
        "time.sleep(60)\n"
    )
    parent = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert parent.stdout is not None
    child = int(parent.stdout.readline())
    parent.send_signal(signal.SIGKILL)
    parent.wait(10)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            return
        # Reap it if it became ours; a zombie still answers kill(0).
        time.sleep(0.05)
        try:
            with open(f"/proc/{child}/stat") as f:
                if f.read().split()[2] == "Z":
                    return
        except FileNotFoundError:
            return
    raise AssertionError(f"child {child} outlived its killed parent")


def test_fast_percentiles_are_hdrhs_own_at_every_small_count() -> None:
    # Small counts are where the target count lands on a half (e.g. p95 of 10 values:
    # 9.5), and where an arithmetic in another order would round to another bucket.
    rng = np.random.default_rng(11)
    for n in range(1, 61):
        values = rng.integers(1, 2_000_000, n).astype(np.int64)
        h = _filled(values)
        for q in (0.0, 1.0, 50.0, 90.0, 95.0, 99.0, 99.9, 100.0, 33.3, 66.7, 12.5):
            assert hdr.fast_percentile(h, q) == h.get_value_at_percentile(q), (n, q)
