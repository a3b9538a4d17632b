"""20,000 concurrent slow streams from one machine (not a test: prints figures only).

    python -m benchmarks.bench_streams20k [--streams 20000] [--workers 2] [--addresses 4]
        [--sim-procs 2] [--itl-ms 2500] [--max-tokens 16] [--ramp-s 20] [--warmup-s 45]
        [--duration-s 60] [--json PATH]

The driver is the real command, ``loadtest run --workers N --source-address A,B,...``,
against a simulator of ``--sim-procs`` processes sharing one port (each a share of the
streams: one process may open at most RLIMIT_NOFILE descriptors). Tokens are seconds
apart (lognormal around ``--itl-ms``), so that 2 cores can carry the streams at all;
sessions start over ``--ramp-s``, stay busy (a new request as one ends), and the run
measures ``--duration-s`` after ``--warmup-s``.

Printed, from one run:
- streams held: the simulator's own count of running requests (``/health`` of each of
  its processes) at the plateau, its peak, and the driver's sockets per source address;
- memory per stream: the RSS of the driver's processes (the command and its workers)
  and of the simulator's, each at the plateau minus at the first sample, over the
  streams opened in between (the simulator's includes its per-request truth record);
- TTFT error: each measured request's client TTFT minus the simulator's own TTFT
  (first token written minus request received, kernel-stamped), joined by response id
  over every simulator process's ``/sim/truth``; p50, p99, p99.9, max;
- driver CPU: each worker's CPU time over the plateau, as a share of one core, and the
  run's own busy verdict (``summary.json`` ``driver``: client lag against the gaps);
- accounting: sent = ok + failed + cancelled, and one line of requests.jsonl each;
- the load average before and after.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
import numpy as np
import orjson
import psutil

from loadtest.sim import SimConfig, SimProcess

ROOT = Path(__file__).resolve().parent.parent


@dataclass(slots=True)
class Sample:
    """One look at the processes while the run goes."""

    t: float
    held: int
    driver_rss: int
    sim_rss: int
    worker_cpu: dict[int, float] = field(default_factory=dict)


def _tree(pid: int) -> list[psutil.Process]:
    try:
        p = psutil.Process(pid)
        return [p, *p.children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


def _is_worker(p: psutil.Process) -> bool:
    # Workers are spawned (multiprocessing's spawn_main); the resource tracker is not one.
    try:
        return any("spawn_main" in part for part in p.cmdline())
    except psutil.NoSuchProcess:
        return False


def _rss(procs: list[psutil.Process]) -> int:
    total = 0
    for p in procs:
        with contextlib.suppress(psutil.NoSuchProcess):
            total += p.memory_info().rss
    return total


def _health(url: str, pids: set[int]) -> dict[int, int]:
    """``running`` of each simulator process: fresh connections until each answered."""
    seen: dict[int, int] = {}
    for _ in range(12):
        req = urllib.request.Request(url + "/health", headers={"Connection": "close"})
        try:
            with urllib.request.urlopen(req, timeout=2) as resp:
                h = orjson.loads(resp.read())
        except OSError:
            continue
        seen[h["pid"]] = h["running"]
        if pids <= seen.keys():
            break
    return seen


async def _truth(url: str, pids: set[int]) -> dict[str, dict[str, int]]:
    """Every simulator process's truth, by response id (each GET reaches one process)."""
    out: dict[str, dict[str, int]] = {}
    got: set[int] = set()
    for _ in range(60):
        conn = aiohttp.TCPConnector(force_close=True)
        async with aiohttp.ClientSession(connector=conn) as s, s.get(url + "/sim/truth") as r:
            pid = int(r.headers["X-Sim-Pid"])
            if pid not in got:
                got.add(pid)
                for t in orjson.loads(await r.read()):
                    out[t["id"]] = t
        if pids <= got:
            break
    if not pids <= got:
        raise SystemExit(f"truth of simulator processes {sorted(pids - got)} not reached")
    return out


def _scenario(path: Path, a: argparse.Namespace) -> None:
    path.write_text(
        f'name = "streams20k"\nmax_tokens = {a.max_tokens}\n'
        '[[sources]]\nkind = "inline"\n'
        f"prompts = [{', '.join(repr(f'stream prompt {i}') for i in range(200))}]\n"
        f'[load]\nmode = "closed"\nconcurrency = {a.streams}\n'
        f"ramp_up_s = {a.ramp_s}\nwarmup_s = {a.warmup_s}\nduration_s = {a.duration_s}\n"
        f"grace_s = {a.grace_s}\n"
        "[timeouts]\nfirst_byte_s = 120\nbetween_chunks_s = 180\ntotal_s = 3600\n"
    )


def _pct(values: list[float]) -> dict[str, float]:
    if not values:
        return {}
    arr = np.asarray(values)
    q = np.percentile(arr, [50, 99, 99.9])
    return {
        "p50": round(float(q[0]), 3),
        "p99": round(float(q[1]), 3),
        "p999": round(float(q[2]), 3),
        "max": round(float(arr.max()), 3),
    }


def _sockets_by_address(port: int) -> dict[str, int]:
    """Established loopback connections to ``port``, by local address (/proc/net/tcp:
    one read, where psutil would walk every descriptor of every worker)."""
    counts: dict[str, int] = {}
    with open("/proc/net/tcp") as f:
        next(f)
        for line in f:
            parts = line.split()
            local, remote, state = parts[1], parts[2], parts[3]
            if state != "01" or int(remote.split(":")[1], 16) != port:
                continue
            raw = bytes.fromhex(local.split(":")[0])
            ip = ".".join(str(b) for b in reversed(raw))  # little-endian on x86
            counts[ip] = counts.get(ip, 0) + 1
    return dict(sorted(counts.items()))


def bench(a: argparse.Namespace) -> dict[str, object]:
    """One run; the figures."""
    sim_cfg = SimConfig(
        procs=a.sim_procs,
        step_token_share=0.0,
        ttft_ms=30.0,
        ttft_sigma=0.2,
        itl_ms=a.itl_ms,
        itl_sigma=0.4,
        min_output_fraction=1.0,
    )
    addresses = [f"127.0.0.{i + 1}" for i in range(a.addresses)]
    load_before = os.getloadavg()
    with SimProcess(sim_cfg) as sim, tempfile.TemporaryDirectory() as tmp:
        assert sim.pid is not None
        sim_procs = _tree(sim.pid)
        sim_pids = {p.pid for p in sim_procs}
        port = int(sim.url.rsplit(":", 1)[1])
        sc = Path(tmp) / "streams20k.toml"
        _scenario(sc, a)
        out = Path(tmp) / "out"
        cmd = [sys.executable, "-m", "loadtest", "run", str(sc), "--endpoint", sim.url]
        cmd += ["--no-tui", "-q", "--workers", str(a.workers), "--out", str(out)]
        cmd += ["--seed", "1"]
        if addresses:  # --addresses 0: none given, the kernel's choice (the control)
            cmd += ["--source-address", ",".join(addresses)]
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        t0 = time.monotonic()
        driver = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True)
        samples: list[Sample] = []
        sockets: dict[str, int] = {}
        plateau_from = a.ramp_s + 10.0
        while driver.poll() is None:
            time.sleep(1.0)
            procs = _tree(driver.pid)
            workers = [w for w in procs[1:] if _is_worker(w)]
            running = _health(sim.url, sim_pids)
            if running.keys() != sim_pids:
                continue  # a process did not answer in time: no count rather than half
            held = sum(running.values())
            cpu = {}
            for w in [*workers, *sim_procs]:
                try:
                    ct = w.cpu_times()
                    cpu[w.pid] = ct.user + ct.system
                except psutil.NoSuchProcess:
                    pass
            now = time.monotonic() - t0
            samples.append(Sample(now, held, _rss(procs), _rss(sim_procs), cpu))
            if not sockets and now > plateau_from + 5:
                sockets = _sockets_by_address(port)
        wall = time.monotonic() - t0
        stdout = driver.stdout.read() if driver.stdout else ""
        (run_dir,) = out.iterdir()
        summary = orjson.loads((run_dir / "summary.json").read_bytes())
        rows = [orjson.loads(x) for x in (run_dir / "requests.jsonl").read_bytes().splitlines()]
        truth = asyncio.run(_truth(sim.url, sim_pids))
    load_after = os.getloadavg()
    # The plateau: after the ramp and the first wave, before the end's cancellations.
    end_t = a.warmup_s + a.duration_s
    plateau = [s for s in samples if plateau_from <= s.t <= end_t]
    # The baseline: the last look before the simulator held any stream (the workers are
    # up and loaded by then, waiting for their common start).
    first = [s for s in samples if s.held == 0 and s.t < plateau_from][-1]
    hold = max(plateau or samples, key=lambda s: s.held)
    opened = max(hold.held - first.held, 1)
    # And the slope over the ramp (RSS against streams open): no baseline needed.
    ramp = [s for s in samples if s.held > 0 and s.t < plateau_from]
    slopes = {}
    if len(ramp) >= 3:
        held_arr = np.asarray([s.held for s in ramp], dtype=float)
        for name in ("driver_rss", "sim_rss"):
            rss = np.asarray([getattr(s, name) for s in ramp], dtype=float)
            slopes[name] = round(float(np.polyfit(held_arr, rss, 1)[0]) / 1024, 1)
    cpu_share = {}
    # The CPU over the plateau, between the looks nearest its ends (a loaded machine
    # makes the looks themselves late).
    inside = plateau if len(plateau) >= 2 else samples
    p0, p1 = inside[0], inside[-1]
    for pid in p0.worker_cpu.keys() & p1.worker_cpu.keys():
        if p1.t > p0.t:
            share = 100 * (p1.worker_cpu[pid] - p0.worker_cpu[pid]) / (p1.t - p0.t)
            cpu_share[pid] = round(share)
    cpu_window = [round(p0.t), round(p1.t)]
    ramp_share = {}
    r0 = first
    r1 = next((s for s in samples if s.t >= plateau_from), samples[-1])
    for pid in r0.worker_cpu.keys() & r1.worker_cpu.keys():
        if r1.t > r0.t:
            ramp_share[pid] = round(100 * (r1.worker_cpu[pid] - r0.worker_cpu[pid]) / (r1.t - r0.t))
    sim_share = sorted(v for pid, v in cpu_share.items() if pid in sim_pids)
    driver_share = sorted(v for pid, v in cpu_share.items() if pid not in sim_pids)
    errors, delivery, write, rest = [], [], [], []
    for r in rows:
        t = truth.get(r.get("response_id") or "")
        if r["warmup"] or r["outcome"] != "ok" or t is None or r["ttft_ms"] is None:
            continue
        server_ms = (t["first_token_written_ns"] - t["received_ns"]) / 1e6
        errors.append(r["ttft_ms"] - server_ms)
        delivery.append(r["client_lag_ms"] or 0.0)
        if r["write_ms"] is not None:
            # The error split: send start -> request written (the driver's send: pool,
            # connect, write), and the rest (the simulator's queue before its stamp,
            # its write -> the driver's arrival stamp).
            write.append(r["write_ms"])
            rest.append(r["ttft_ms"] - server_ms - r["write_ms"])
    # When the late reads happened: each measured request's longest client lag, by the
    # 10 s window its stream ended in (a few stalls, or a steady backlog).
    windows: dict[int, list[float]] = {}
    for r in rows:
        if not r["warmup"] and r["outcome"] == "ok" and r["client_lag_ms"] is not None:
            windows.setdefault(int(r["end_ms"] // 10_000) * 10, []).append(r["client_lag_ms"])
    lag_by_window = {
        f"{w}s": round(float(np.percentile(v, 99)), 1) for w, v in sorted(windows.items())
    }
    req = summary["requests"]
    return {
        "streams": a.streams,
        "workers": a.workers,
        "source_addresses": addresses,
        "sim_procs": a.sim_procs,
        "itl_ms": a.itl_ms,
        "wall_s": round(wall, 1),
        "exit": driver.returncode,
        "stdout_tail": stdout[-600:],
        "held_at_plateau_min": min((s.held for s in plateau), default=0),
        "held_peak": max(s.held for s in samples),
        "driver_sockets_by_address": sockets,
        "driver_rss_mib": [round(first.driver_rss / 2**20, 1), round(hold.driver_rss / 2**20, 1)],
        "sim_rss_mib": [round(first.sim_rss / 2**20, 1), round(hold.sim_rss / 2**20, 1)],
        "driver_kib_per_stream": round((hold.driver_rss - first.driver_rss) / 1024 / opened, 1),
        "sim_kib_per_stream": round((hold.sim_rss - first.sim_rss) / 1024 / opened, 1),
        "kib_per_stream_ramp_slope": slopes,
        "baseline_at_s": round(first.t),
        "ttft_error_ms": _pct(errors),
        "ttft_error_n": len(errors),
        "ttft_error_split_ms": {"write": _pct(write), "rest": _pct(rest)},
        "client_lag_ms": _pct(delivery),
        "client_lag_p99_by_end_window": lag_by_window,
        "worker_cpu_pct_of_core": driver_share,
        "sim_cpu_pct_of_core": sim_share,
        "cpu_window_s": cpu_window,
        "ramp_cpu_pct_of_core": {
            "workers": sorted(v for p, v in ramp_share.items() if p not in sim_pids),
            "sim": sorted(v for p, v in ramp_share.items() if p in sim_pids),
        },
        "driver_verdict": summary["driver"],
        "dispatch_lag_ms": summary["metrics"]["dispatch_lag_ms"],
        "requests": {k: req[k] for k in ("sent", "ok", "failed", "cancelled", "errors")},
        "accounted": req["sent"] == req["ok"] + req["failed"] + req["cancelled"] == len(rows),
        "jsonl_lines": len(rows),
        "load_avg_before": [round(x, 2) for x in load_before],
        "load_avg_after": [round(x, 2) for x in load_after],
        "cores": os.cpu_count(),
        "samples": [
            (round(s.t), s.held, round(s.driver_rss / 2**20), round(s.sim_rss / 2**20))
            for s in itertools.islice(samples, 0, None, 3)
        ],
    }


def main() -> None:
    """Run once and print the figures."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--streams", type=int, default=20_000)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--addresses", type=int, default=4)
    ap.add_argument("--sim-procs", type=int, default=2)
    ap.add_argument("--itl-ms", type=float, default=2500.0)
    ap.add_argument("--max-tokens", type=int, default=16)
    ap.add_argument("--ramp-s", type=float, default=20.0)
    ap.add_argument("--warmup-s", type=float, default=45.0)
    ap.add_argument("--duration-s", type=float, default=60.0)
    ap.add_argument("--json", type=Path)
    a = ap.parse_args()
    # Streams begun near the end finish (not cut off): a stream lasts max_tokens gaps.
    a.grace_s = round(2.5 * a.max_tokens * a.itl_ms / 1000)
    result = bench(a)
    text = json.dumps(result, indent=1)
    print(text)
    if a.json:
        a.json.write_text(text)


if __name__ == "__main__":
    main()
