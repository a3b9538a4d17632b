"""What a server process costs to deploy: resident memory, cold start, energy.

A draft model is not free: it adds weights and a KV cache to the server's memory and
load time. These figures are measured on the server *process* (any process: llama.cpp
through ``serve-llama``, or the simulator), beside the latency a load run records.

Energy comes from counters the machine exposes: Linux RAPL (``/sys/class/powercap/*/
energy_uj``, the CPU package) and, when ``pynvml`` imports and a GPU answers, NVML's
total energy. Where neither is readable the result is ``None`` with the reason, never 0.
"""

from __future__ import annotations

import asyncio
import contextlib
import statistics
import subprocess
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import psutil

from loadtest._compat.orphans import die_with_parent
from loadtest.errors import EndpointError, ProtocolError, UsageError
from loadtest.protocol.openai import ServerError, StreamReader
from loadtest.protocol.sse import SSEParser
from loadtest.transport.side import SideHttp, not_ready

__all__ = [
    "ColdStart",
    "EnergyMeter",
    "EnergyUse",
    "MemoryUse",
    "RssSampler",
    "measure_cold_start",
]

POWERCAP = Path("/sys/class/powercap")


@dataclass(frozen=True, slots=True)
class MemoryUse:
    """Resident memory of a process and its children over a sampled span, in bytes."""

    steady_bytes: int
    """The median of the samples: what the process holds while it serves."""
    peak_bytes: int
    samples: int


@dataclass(frozen=True, slots=True)
class ColdStart:
    """Seconds from the process's start to its readiness and to a first streamed token."""

    ready_s: float
    first_token_s: float | None
    """None when the first request failed (``first_token_error`` says how)."""
    first_token_error: str | None = None


@dataclass(frozen=True, slots=True)
class EnergyUse:
    """Energy over a span, or why it cannot be told on this machine.

    The counters are the machine's (CPU packages, GPUs), not the process's: on a machine
    shared with other work the figure includes that work.
    """

    joules: float | None
    source: str | None
    """Which counters were read, e.g. ``rapl:package-0`` or ``nvml``."""
    reason: str | None = None
    """Set when ``joules`` is None: what the machine lacks."""
    seconds: float = 0.0

    @property
    def watts(self) -> float | None:
        """Mean power over the span (None when energy is unknown or the span empty)."""
        if self.joules is None or self.seconds <= 0:
            return None
        return self.joules / self.seconds


def _tree_rss(proc: psutil.Process) -> int:
    total = proc.memory_info().rss
    for child in proc.children(recursive=True):
        # A child that ended between listing and reading holds nothing now.
        with contextlib.suppress(psutil.Error):
            total += child.memory_info().rss
    return total


class RssSampler:
    """Samples the resident memory of a process tree on a thread until ``stop``."""

    def __init__(self, pid: int, interval_s: float = 0.1) -> None:
        if interval_s <= 0:
            raise UsageError(f"interval_s must be positive, not {interval_s}")
        self._proc = psutil.Process(pid)
        self._interval = interval_s
        self._samples: list[int] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="rss-sampler", daemon=True)

    def _loop(self) -> None:
        while not self._stop.wait(self._interval):
            try:
                self._samples.append(_tree_rss(self._proc))
            except psutil.Error:
                return  # the process ended: the samples so far are the record

    def start(self) -> RssSampler:
        """Take a first sample now, then sample on a thread (returns self for chaining)."""
        try:
            self._samples.append(_tree_rss(self._proc))
        except psutil.Error as exc:
            raise EndpointError(f"process {self._proc.pid} is gone: {exc}") from exc
        self._thread.start()
        return self

    def stop(self) -> MemoryUse:
        """Stop sampling and summarize (``start`` made sure of one sample)."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
        return MemoryUse(
            steady_bytes=int(statistics.median(self._samples)),
            peak_bytes=max(self._samples),
            samples=len(self._samples),
        )


def _rapl_zones(root: Path) -> list[Path]:
    # Top-level zones only (intel-rapl:0, not intel-rapl:0:0): sub-zones are parts of them.
    return sorted(p for p in root.glob("*/energy_uj") if p.parent.name.count(":") == 1)


def _read_rapl(zones: Sequence[Path]) -> list[int]:
    return [int(z.read_text()) for z in zones]


def _nvml_mj() -> int | None:
    """Total GPU energy since driver load in mJ, summed over devices; None if unreadable."""
    try:
        import pynvml  # type: ignore[import-not-found]

        pynvml.nvmlInit()
        try:
            handles = [
                pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(pynvml.nvmlDeviceGetCount())
            ]
            if not handles:
                return None
            return sum(int(pynvml.nvmlDeviceGetTotalEnergyConsumption(h)) for h in handles)
        finally:
            pynvml.nvmlShutdown()
    except Exception:  # ImportError, or any NVML error: the machine cannot tell
        return None


class EnergyMeter:
    """Energy between ``start`` and ``stop`` from RAPL and NVML, where readable."""

    def __init__(self, powercap: Path = POWERCAP) -> None:
        self._powercap = powercap
        self._zones = _rapl_zones(powercap)
        self._rapl0: list[int] | None = None
        self._nvml0: int | None = None
        self._t0 = 0.0
        self._why: list[str] = []

    def start(self) -> EnergyMeter:
        """Read the counters now (returns self for chaining)."""
        self._why = []
        self._t0 = time.monotonic()
        if not self._zones:
            self._why.append(f"no RAPL zones under {self._powercap}")
        else:
            try:
                self._rapl0 = _read_rapl(self._zones)
            except OSError as exc:  # usually root-only since the PLATYPUS side channel
                self._why.append(f"RAPL not readable ({exc.strerror})")
        self._nvml0 = _nvml_mj()
        if self._nvml0 is None:
            self._why.append("no NVML (pynvml not importable or no GPU)")
        return self

    def stop(self) -> EnergyUse:
        """Energy since ``start``: the sum of what was readable, or None with the reasons."""
        seconds = time.monotonic() - self._t0
        joules = 0.0
        sources: list[str] = []
        if self._rapl0 is not None:
            now = _read_rapl(self._zones)
            for zone, a, b in zip(self._zones, self._rapl0, now, strict=True):
                span = b - a
                if span < 0:  # the counter wrapped at max_energy_range_uj
                    span += int((zone.parent / "max_energy_range_uj").read_text())
                joules += span / 1e6
                sources.append(f"rapl:{(zone.parent / 'name').read_text().strip()}")
        if self._nvml0 is not None:
            end = _nvml_mj()
            if end is not None:
                joules += (end - self._nvml0) / 1e3
                sources.append("nvml")
        if not sources:
            reason = "; ".join(self._why) or "no energy counter"
            return EnergyUse(None, None, f"not available on this machine: {reason}", seconds)
        return EnergyUse(joules, "+".join(sources), None, seconds)


async def measure_cold_start(
    cmd: Sequence[str],
    base_url: str,
    model: str,
    *,
    prompt: str = "Say hello.",
    timeout_s: float = 300.0,
) -> tuple[ColdStart, subprocess.Popen[bytes]]:
    """Start ``cmd`` and time it to ``/health`` answering 200, then to a first token.

    The first request is a streamed chat completion sent the moment the server is ready.
    Returns the timings and the running process (the caller stops it).
    """
    t0 = time.monotonic()
    # Popen returns once forked (it waits on nothing); a Popen, not an asyncio process, so
    # that the caller can stop the server from synchronous code as well.
    proc = subprocess.Popen(  # noqa: ASYNC220
        list(cmd),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        preexec_fn=die_with_parent,  # not past an ab killed hard
    )
    try:
        async with SideHttp().session(timeout_s=None) as s:
            ready_s = await _until_ready(s, proc, base_url, t0, timeout_s)
            first_s, error = await _first_token(s, base_url, model, prompt, t0, timeout_s)
    except BaseException:
        proc.kill()
        proc.wait()
        raise
    return ColdStart(ready_s, first_s, error), proc


async def _until_ready(
    s: aiohttp.ClientSession,
    proc: subprocess.Popen[bytes],
    base_url: str,
    t0: float,
    timeout_s: float,
) -> float:
    url = base_url + "/health"
    last = "nothing"
    while (left := timeout_s - (time.monotonic() - t0)) > 0:
        if proc.poll() is not None:
            raise EndpointError(f"the server exited with {proc.returncode} before it was ready")
        got = await not_ready(s, url, min(2.0, max(0.1, left)))
        if got is None:
            return time.monotonic() - t0
        last = got
        await asyncio.sleep(0.02)
    raise EndpointError(f"the server was not ready at {url} within {timeout_s:g} s (last: {last})")


async def _first_token(
    s: aiohttp.ClientSession, base_url: str, model: str, prompt: str, t0: float, timeout_s: float
) -> tuple[float | None, str | None]:
    """Seconds from ``t0`` to the first streamed token, or why there was none.

    The stream is read by the load's own parser and chunk reader: a chunk that is not a
    JSON object, an error event or an HTML page is a reason, never an exception.
    """
    body = {
        "model": model,
        "messages": [{"role": "user", "content": prompt}],
        "max_tokens": 8,
        "stream": True,
    }
    parser, reader = SSEParser(), StreamReader()
    try:
        async with s.post(
            base_url + "/v1/chat/completions",
            json=body,
            timeout=aiohttp.ClientTimeout(total=timeout_s),
        ) as r:
            if r.status != 200:
                return None, f"HTTP {r.status}"
            async for data in r.content.iter_any():
                for event in parser.feed(data):  # a token before an error still came
                    reader.on_event(event, time.perf_counter_ns())
                    if reader.token_chunk_ns:
                        return time.monotonic() - t0, None
    except (ProtocolError, ServerError) as exc:
        return None, f"{type(exc).__name__}: {exc}"
    except TimeoutError:
        return None, f"no token within {timeout_s:g} s"
    except aiohttp.ClientError as exc:
        return None, f"{type(exc).__name__}: {exc}"
    return None, "the stream ended without a token"
