"""Client overhead on a real engine: loadtest beside bare probes, against llama.cpp, in one run.

    flock /tmp/bench.lock python -m benchmarks.bench_llama_overhead        # 3 x 12 prompts
    python -m benchmarks.bench_llama_overhead --rounds 1 --prompts 8 --cache warm

One llama.cpp server (Gemma 3 270M, one slot, 2 threads, started as ``serve-llama``
starts it) answers four clients, the HumanEval prompts of ``scenarios/code.toml``, at
concurrency 1, one request at a time:

    a  loadtest: its request builder (``prompt_body``) and its transport (``Client``),
       one session kept for the whole run, as a run keeps it
    b  a raw-socket probe, minimal body (model, messages, stream, max_tokens), fresh connection
    c  the probe with loadtest's exact body, fresh connection
    d  the probe with loadtest's exact body on one kept-alive connection

b against c is the body; c against d is keep-alive; d against a is the client. Every
client's TTFT runs from the start of its send (the connect, for a fresh connection) to
the kernel's receive stamp of the first chunk that carries content; the figure is TTFT
minus the server's own ``timings.prompt_ms`` (prefill), so prefill's noise cancels, and
``prompt_ms`` itself is printed too (a server doing more work for one body shows there).
``head`` is the response headers' arrival: llama.cpp sends them as it launches the task,
before prefill, so it splits the overhead into before and after the server took it.

llama.cpp's prompt cache decides prefill: the slot keeps the last prompt (a repeat costs
one token) and, by default, a RAM cache keeps earlier ones. ``--cache cold`` (default)
starts the server with the RAM cache off and never sends one prompt twice in a row (pass
j gives prompt p to client (p + j) mod 4, so each client sends each prompt once per
round), so that every request prefills its whole prompt: ``cache_n`` is printed to show
it. ``--cache warm`` keeps the RAM cache and sends every prompt once first, untimed: each
timed request then finds its prompt cached. Either way every client meets the same
state. Every timed request follows the same short spacer request, sent by the same
client the same way, so a kept connection has just served one (as between back-to-back
requests) and the slot holds the spacer.

Then (``--run N``, default 12) loadtest's own run: the ``Runner``, closed loop at
concurrency 1, N requests back to back, with its stale-connection resends (llama.cpp
closes each streamed connection as the stream ends; a request sent straight after one
went into the closing socket and was resent, every other request before the client
learnt to close them itself).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import os
import re
import select
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import orjson
import psutil

from benchmarks.llama_overhead_report import CLIENTS, Sample, report
from loadtest._compat import kernel_stamps
from loadtest.app.engines.llama import MODEL_ALIAS, LlamaOptions, _params, ensure_model
from loadtest.config.scenario import Scenario, TimeoutSpec, load_scenario
from loadtest.datasets import build_pool
from loadtest.engine.request_unit import prompt_body
from loadtest.engine.runner import RunConfig, Runner
from loadtest.model.prompt import Prompt
from loadtest.transport.client import Client, ClientConfig

_CONTENT = re.compile(rb'"content":"(?!")')
_perf = time.perf_counter_ns
SPACER = Prompt(
    id="spacer",
    source="bench",
    category="spacer",
    messages=({"role": "user", "content": "Say hello."},),
)
"""A short request sent before each timed one, by the same client (see ``_timed``)."""


# -- the server ------------------------------------------------------------------------------
def _serve(port: int, cache_ram_mib: int) -> None:
    """In the child process: ``serve-llama``'s server, with the RAM prompt cache as asked."""
    import xllamacpp

    params = _params(LlamaOptions(port=port, parallel=1, threads=2), ensure_model(), None)
    params.cache_ram_mib = cache_ram_mib
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
    server = xllamacpp.Server(params)
    print("ready", flush=True)
    signal.sigwait({signal.SIGINT, signal.SIGTERM})
    del server


def _start_server(port: int, cache_ram_mib: int) -> subprocess.Popen[bytes]:
    cmd = [sys.executable, "-m", "benchmarks.bench_llama_overhead", "--serve", str(port)]
    cmd += ["--cache-ram", str(cache_ram_mib)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert proc.stdout is not None
    if proc.stdout.readline().strip() != b"ready":
        raise SystemExit("the llama.cpp server did not start")
    for _ in range(300):
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
                s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                if b" 200 " in s.recv(4096):
                    return proc
        except OSError:
            pass
        time.sleep(0.2)
    proc.terminate()
    raise SystemExit("the llama.cpp server never became healthy")


# -- the probe ---------------------------------------------------------------------------------
class Probe:
    """A bare HTTP/1.1 client on a blocking socket: one write, kernel-stamped reads."""

    def __init__(self, port: int, keepalive: bool) -> None:
        self.port = port
        self.keepalive = keepalive
        self.sock: socket.socket | None = None
        self.reconnects = 0
        self.stale = 0
        """Requests resent because the kept connection closed as they went in."""

    def _connect(self) -> socket.socket:
        s = socket.create_connection(("127.0.0.1", self.port))
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        s.setsockopt(socket.SOL_SOCKET, kernel_stamps.SO_TIMESTAMPNS, 1)
        return s

    def _alive(self) -> bool:
        # A kept connection the server closed reads as ready with no bytes: checked
        # before the clock starts (loadtest's pool checks the server's Keep-Alive too).
        assert self.sock is not None
        ready, _, _ = select.select([self.sock], [], [], 0)
        return not ready or bool(self.sock.recv(1, socket.MSG_PEEK))

    def send(self, body: bytes, client: str, prompt: int) -> Sample:
        reused = self.keepalive and self.sock is not None and self._alive()
        if self.keepalive and self.sock is not None and not reused:
            self.sock.close()
            self.sock = None
            self.reconnects += 1
        if self.keepalive and self.sock is None:
            self.sock = self._connect()
        head = (
            f"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:{self.port}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
        ).encode()
        t0 = _perf()
        s = self.sock if self.sock is not None else self._connect()
        try:
            written, got = self._exchange(s, head + body)
        except OSError:
            if not reused:
                raise
            # The server closed the kept connection as the request went in: resend once
            # on a fresh one, the clock running (loadtest's client does the same).
            self.stale += 1
            s.close()
            s = self.sock = self._connect()
            written, got = self._exchange(s, head + body)
        first, got_head, buf = got
        if not self.keepalive:
            s.close()
        return _sample(client, prompt, (first - t0, got_head - t0, written - t0), buf, reused)

    def _exchange(self, s: socket.socket, request: bytes) -> tuple[int, tuple[int, int, bytes]]:
        """Write ``request``, read the whole response: (written, (first content, head, body))."""
        s.sendall(request)
        written = _perf()
        buf = b""
        first = got_head = 0
        space = socket.CMSG_SPACE(16)
        while not buf.endswith(b"\r\n0\r\n\r\n"):
            data, anc, _, _ = s.recvmsg(1 << 16, space)
            if not data:
                raise ConnectionResetError("the server closed the connection")
            at = kernel_stamps.kernel_stamp(anc)
            got_head = got_head or at
            buf += data
            if not first and _CONTENT.search(buf):
                first = at
        return written, (first, got_head, buf)


def _sample(
    client: str, prompt: int, times: tuple[int, int, int], body: bytes, reused: bool
) -> Sample:
    """A sample from a whole response ``body`` and (TTFT, head, write) in ns."""
    ttft, head, write = times
    m = re.search(rb'"timings":(\{[^}]*\})', body)
    if m is None or not ttft:
        raise RuntimeError(f"client {client}: no timings or no content in the stream")
    t = orjson.loads(m.group(1))
    return Sample(
        client,
        prompt,
        ttft / 1e6,
        head / 1e6,
        float(t["prompt_ms"]),
        int(t["prompt_n"]),
        int(t.get("cache_n", 0)),
        reused,
        write / 1e6,
    )


# -- loadtest's own path -----------------------------------------------------------------------
async def _loadtest(client: Client, body: bytes, prompt: Prompt, index: int, port: int) -> Sample:
    before = _ports(port)
    rec = await client.send(
        index=index, prompt=prompt, body=body, intended_ns=_perf(), warmup=False
    )
    if rec.outcome != "ok" or rec.ttft_ns is None or not rec.server_timings:
        raise RuntimeError(f"loadtest request failed: {rec.outcome} {rec.error}")
    t = rec.server_timings
    head = (rec.first_byte_ns or rec.sent_ns) - rec.sent_ns
    write = (rec.written_ns or rec.sent_ns) - rec.sent_ns
    return Sample(
        "a",
        index,
        rec.ttft_ns / 1e6,
        head / 1e6,
        float(t["prompt_ms"]),
        int(t["prompt_n"]),
        int(t.get("cache_n", 0)),
        _ports(port) <= before,  # no new local port: the pooled connection served it
        write / 1e6,
    )


def _ports(port: int) -> set[int]:
    """Local ports of this process's open connections to the server."""
    conns = psutil.Process().net_connections(kind="tcp")
    return {c.laddr.port for c in conns if c.raddr and c.raddr.port == port}


# -- the run -----------------------------------------------------------------------------------
def _minimal(prompt: Prompt, max_tokens: int) -> bytes:
    body = {"model": MODEL_ALIAS, "messages": list(prompt.messages), "stream": True}
    return orjson.dumps({**body, "max_tokens": max_tokens})


async def _bench(args: argparse.Namespace, port: int) -> list[Sample]:
    sc: Scenario = load_scenario(Path(__file__).parent.parent / "scenarios" / "code.toml")
    sc = dataclasses.replace(sc, max_tokens=args.max_tokens)
    pool, _ = build_pool(sc)
    prompts = pool.prompts()[: args.prompts]
    bodies = [prompt_body(sc, MODEL_ALIAS, p) for p in prompts]
    minimal = [_minimal(p, args.max_tokens) for p in prompts]
    fresh, kept = Probe(port, keepalive=False), Probe(port, keepalive=True)
    cfg = ClientConfig(
        base_url=f"http://127.0.0.1:{port}", concurrency=1, timeouts=TimeoutSpec(first_byte_s=300)
    )
    samples: list[Sample] = []
    spacer = _minimal(SPACER, 2)
    async with Client(cfg) as client:
        fresh.send(spacer, "warm", -1)  # untimed: the server's first request
        if args.cache == "warm":
            for i in range(len(prompts)):  # untimed: every prompt once, into the RAM cache
                fresh.send(minimal[i], "warm", i)
        for r in range(args.rounds):
            for j in range(len(CLIENTS)):
                for i in range(len(prompts)):
                    who = CLIENTS[(i + j) % len(CLIENTS)]
                    samples.append(
                        await _timed(
                            who,
                            i,
                            client,
                            fresh,
                            kept,
                            args.gap_ms,
                            spacer,
                            bodies[i],
                            minimal[i],
                            prompts[i],
                        )
                    )
            print(f"  round {r + 1}/{args.rounds} done, load {_load()}", flush=True)
        print(
            f"  kept-alive probe: {kept.reconnects} reconnects before a send, {kept.stale}"
            " resends; "
            f"loadtest stale resends: {client.stale_retries}"
        )
    return samples


async def _timed(
    who: str,
    i: int,
    client: Client,
    fresh: Probe,
    kept: Probe,
    gap_ms: float,
    spacer: bytes,
    body: bytes,
    minimal: bytes,
    prompt: Prompt,
) -> Sample:
    """The spacer, then prompt ``i`` from client ``who``, each after ``gap_ms`` idle.

    Every timed request follows the same short spacer request, sent by the same client
    the same way (a kept connection is used by it, so it is as fresh as between
    back-to-back requests): the server's slot then holds the spacer, whoever asks next.
    """
    probe = kept if who == "d" else fresh
    await asyncio.sleep(gap_ms / 1000)
    port = kept.port
    if who == "a":
        await _loadtest(client, spacer, SPACER, -1, port)
    else:
        probe.send(spacer, "spacer", -1)
    await asyncio.sleep(gap_ms / 1000)
    if who == "a":
        return await _loadtest(client, body, prompt, i, port)
    return probe.send(minimal if who == "b" else body, who, i)


async def _run(args: argparse.Namespace, port: int) -> None:
    """loadtest's own run of code.toml, closed loop at concurrency 1, back to back."""
    sc: Scenario = load_scenario(Path(__file__).parent.parent / "scenarios" / "code.toml")
    load = dataclasses.replace(
        sc.load, mode="closed", concurrency=1, requests=args.run, duration_s=None, warmup_s=0
    )
    sc = dataclasses.replace(sc, max_tokens=args.max_tokens, load=load)
    pool, _ = build_pool(sc)
    with tempfile.TemporaryDirectory() as tmp:
        url = f"http://127.0.0.1:{port}"
        runner = Runner(
            RunConfig(scenario=sc, endpoint=url, model=MODEL_ALIAS, run_dir=Path(tmp)), pool
        )
        await runner.run()
        rows = [orjson.loads(line) for line in (Path(tmp) / "requests.jsonl").open("rb")]
    timed = [r for r in rows if r.get("server_timings") and r.get("ttft_ms") is not None]
    ovh = [r["ttft_ms"] - r["server_timings"]["prompt_ms"] for r in timed]
    send = [r["write_ms"] for r in timed if r.get("write_ms") is not None]
    print(
        f"loadtest run (Runner, {len(rows)} requests back to back): stale resends "
        f"{runner.stale_retries}; overhead p50 {np.median(ovh):.2f} p90 "
        f"{np.percentile(ovh, 90):.2f}; send p50 {np.median(send):.2f} p90 "
        f"{np.percentile(send, 90):.2f} max {max(send):.2f}"
    )


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument(
        "--rounds", type=int, default=3, help="each client sends each prompt once a round"
    )
    ap.add_argument("--prompts", type=int, default=12)
    ap.add_argument("--max-tokens", type=int, default=8, help="per answer (code.toml: 384)")
    ap.add_argument("--cache", choices=("cold", "warm"), default="cold")
    ap.add_argument("--gap-ms", type=float, default=50.0, help="idle before each request")
    ap.add_argument(
        "--run", type=int, default=12, help="then a loadtest run of this many requests (0: none)"
    )
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--json", type=Path, help="also write the figures here")
    ap.add_argument("--serve", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--cache-ram", type=int, default=8192, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.serve is not None:
        _serve(args.serve, args.cache_ram)
        return
    port = args.port or _free_port()
    print(f"load average at start: {_load()}")
    proc = _start_server(port, 0 if args.cache == "cold" else 8192)
    try:
        samples = asyncio.run(_bench(args, port)) if args.rounds else []
        if args.run:
            asyncio.run(_run(args, port))
    finally:
        proc.terminate()
        proc.wait(30)
    print(
        f"{args.rounds} rounds x {args.prompts} prompts, max_tokens {args.max_tokens}, "
        f"cache {args.cache}; ms; overhead = client TTFT - timings.prompt_ms "
        "= send + to_launch + after (launch)"
    )
    figures = report(samples) if samples else {}
    print(f"load average at end: {_load()}")
    if args.json:
        rows = [dataclasses.asdict(s) for s in samples]
        args.json.write_text(json.dumps({"figures": figures, "samples": rows}, indent=1))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


if __name__ == "__main__":
    main()
