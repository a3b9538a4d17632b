"""Running the simulator: in this event loop (tests) or as a child process (runs, benches)."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from dataclasses import asdict, fields

from aiohttp import web

from loadtest.errors import EndpointError
from loadtest.sim.model import SimConfig
from loadtest.sim.server import SIM_KEY, SimServer, build_app

__all__ = ["InProcessSim", "SimProcess", "serve", "sim_args"]

READY_PREFIX = "loadtest sim listening on "


class InProcessSim:
    """The simulator on a free loopback port of the running event loop."""

    def __init__(self, config: SimConfig | None = None, host: str = "127.0.0.1") -> None:
        self.config = config or SimConfig()
        self.host = host
        self.url = ""
        self._runner: web.AppRunner | None = None
        self.server: SimServer | None = None

    async def __aenter__(self) -> InProcessSim:
        app = build_app(self.config)
        self.server = app[SIM_KEY]
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.5)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, 0)
        await site.start()
        port = self._runner.addresses[0][1]
        self.url = f"http://{self.host}:{port}"
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._runner is not None:
            await self._runner.cleanup()


def sim_args(config: SimConfig) -> list[str]:
    """Command-line flags that reproduce ``config`` for ``loadtest sim``."""
    out = []
    for f in fields(SimConfig):
        out += [f"--{f.name.replace('_', '-')}", str(asdict(config)[f.name])]
    return out


class SimProcess:
    """``loadtest sim`` as a child process on a free port; stopped on exit."""

    def __init__(self, config: SimConfig | None = None, host: str = "127.0.0.1") -> None:
        self.config = config or SimConfig()
        self.host = host
        self.url = ""
        self._proc: subprocess.Popen[str] | None = None

    def start(self, timeout_s: float = 20.0) -> str:
        """Start the child and wait until it listens; returns its base URL."""
        cmd = [sys.executable, "-m", "loadtest.sim", "--host", self.host, "--port", "0"]
        cmd += sim_args(self.config)
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        self._proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
        )
        assert self._proc.stdout is not None
        line = self._proc.stdout.readline()
        if not line.startswith(READY_PREFIX):
            err = self._proc.stderr.read() if self._proc.stderr else ""
            self.stop()
            raise EndpointError(f"the built-in simulator did not start: {line}{err[-2000:]}")
        self.url = line[len(READY_PREFIX) :].strip()
        return self.url

    def stop(self) -> None:
        """Stop the child (SIGTERM, then SIGKILL after 5 s)."""
        proc = self._proc
        if proc is None:
            return
        self._proc = None
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()

    def __enter__(self) -> SimProcess:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


async def serve(config: SimConfig, host: str, port: int) -> None:
    """Serve until SIGINT/SIGTERM; prints the ready line with the bound address."""
    app = build_app(config)
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.5)
    await runner.setup()
    site = web.TCPSite(runner, host, port, backlog=4096)
    await site.start()
    bound = runner.addresses[0][1]
    print(f"{READY_PREFIX}http://{host}:{bound}", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
    finally:
        await runner.cleanup()
