"""Running the simulator: in this event loop (tests) or as a child process (runs, benches)."""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import os
import signal
import subprocess
import sys
from dataclasses import asdict, fields, replace
from typing import TYPE_CHECKING, TextIO

from aiohttp import web

from loadtest._compat.open_files import raise_open_files
from loadtest._compat.quiet_gc import quiet_gc
from loadtest.errors import EndpointError
from loadtest.sim.arrivals import stamp_arrivals
from loadtest.sim.draft import DRAFT_KEY, DraftServer, build_draft_app
from loadtest.sim.model import SimConfig
from loadtest.sim.server import SIM_KEY, SimServer, build_app

if TYPE_CHECKING:
    from multiprocessing.process import BaseProcess

__all__ = [
    "InProcessSim",
    "SimProcess",
    "SpecDeployment",
    "build_for",
    "serve",
    "serve_deployment",
    "sim_args",
    "sim_command",
]


def build_for(config: SimConfig) -> web.Application:
    """The application of ``config.role``: the model (or target) or the draft server."""
    return build_draft_app(config) if config.role == "draft" else build_app(config)


async def _runner(app: web.Application) -> web.AppRunner:
    # handler_cancellation: a client that goes away cancels its handler at once, as a
    # real engine aborts the sequence, instead of at the next write.
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.5, handler_cancellation=True)
    await runner.setup()
    if SIM_KEY in app and runner.server is not None:
        stamp_arrivals(runner.server, app[SIM_KEY].arrivals)
    return runner


READY_PREFIX = "loadtest sim listening on "
PARENT_ENV = "LOADTEST_SIM_PARENT"
"""Set for a simulator started by loadtest: the pid it must not outlive."""


def die_with_parent() -> None:
    """A simulator started by loadtest ends when that process does, even by SIGKILL.

    Linux delivers SIGTERM on the parent's death (``PR_SET_PDEATHSIG``); if the parent
    is already gone by the time this runs, the simulator exits at once. Elsewhere the
    parent's ``stop()`` is the only way (there is no portable equivalent).
    """
    parent = os.environ.get(PARENT_ENV)
    if parent is None or not sys.platform.startswith("linux"):
        return
    import ctypes

    pr_set_pdeathsig = 1
    ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGTERM)
    if os.getppid() != int(parent):
        raise SystemExit(0)


class InProcessSim:
    """The simulator on a free loopback port of the running event loop."""

    def __init__(self, config: SimConfig | None = None, host: str = "127.0.0.1") -> None:
        self.config = config or SimConfig()
        self.host = host
        self.url = ""
        self._runner: web.AppRunner | None = None
        self.server: SimServer | None = None
        self.draft: DraftServer | None = None

    async def __aenter__(self) -> InProcessSim:
        app = build_for(self.config)
        if self.config.role == "draft":
            self.draft = app[DRAFT_KEY]
        else:
            self.server = app[SIM_KEY]
        self._runner = await _runner(app)
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


def sim_command(config: SimConfig, host: str = "127.0.0.1", port: int = 0) -> list[str]:
    """The command line of a simulator process serving ``config``."""
    cmd = [sys.executable, "-m", "loadtest", "sim", "--host", host, "--port", str(port)]
    return cmd + sim_args(config)


_spawned = 0
"""Simulators this process has started."""


class _Forked:
    """A simulator forked from the fork server, with ``subprocess.Popen``'s face: its
    pid, its output on pipes, its end."""

    def __init__(self, process: BaseProcess, stdout: TextIO, stderr: TextIO) -> None:
        self._process = process
        self.stdout: TextIO | None = stdout
        self.stderr: TextIO | None = stderr

    @property
    def pid(self) -> int:
        pid = self._process.pid
        assert pid is not None, "started"
        return pid

    def poll(self) -> int | None:
        self._process.join(0)
        return self._process.exitcode

    def send_signal(self, sig: int) -> None:
        # It is the fork server's child: its end may reach us after the server reaped
        # it, so "still running" may already be gone (a clash on the port exits at once).
        if self.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, sig)

    def wait(self, timeout: float | None = None) -> int:
        self._process.join(timeout)
        if self._process.exitcode is None:
            raise subprocess.TimeoutExpired("loadtest.sim (forked)", timeout or 0.0)
        return self._process.exitcode

    def kill(self) -> None:
        self._process.kill()


def _forked(config: SimConfig, host: str, port: int) -> _Forked | None:
    """``loadtest sim`` forked from the fork server; None where there is none, or in a
    daemonic process (which may not have children of its own)."""
    import multiprocessing
    from multiprocessing.connection import Connection

    from loadtest._compat.forkserver import SIM_PRELOAD, fork_server

    if multiprocessing.current_process().daemon:
        return None
    ctx = fork_server(*SIM_PRELOAD)
    if ctx is None:
        return None
    # The launcher imports this module: it is read when a simulator is forked, not before.
    forked = importlib.import_module("loadtest.sim.launch").forked
    (out_r, out_w), (err_r, err_w) = os.pipe(), os.pipe()
    out, err = Connection(out_w, readable=False), Connection(err_w, readable=False)
    # Daemonic: a parent that exits without stopping it does not wait for it.
    process = ctx.Process(
        target=forked, args=(config, host, port, out, err, dict(os.environ)), daemon=True
    )
    try:
        process.start()
    finally:
        out.close()
        err.close()
    return _Forked(process, os.fdopen(out_r, "r"), os.fdopen(err_r, "r"))


class SimProcess:
    """``loadtest sim`` as a child process on a free port; stopped on exit."""

    def __init__(
        self, config: SimConfig | None = None, host: str = "127.0.0.1", port: int = 0
    ) -> None:
        self.config = config or SimConfig()
        self.host = host
        self.port = port
        self.url = ""
        self._proc: subprocess.Popen[str] | _Forked | None = None

    def start(self, timeout_s: float = 20.0) -> str:
        """Start the child and wait until it listens; returns its base URL."""
        self.spawn()
        return self.wait_ready()

    def spawn(self) -> None:
        """Start the child without waiting for it (``wait_ready`` does).

        Starting a simulator is mostly its imports: a caller with other work to do
        (another process to start, data sets to load) does it in the meantime. A
        process's first simulator is a fresh interpreter; the ones after it (a sweep's
        steps, an ab's sides, a test suite's) are forked from the fork server, which
        has imported them once (``_compat.forkserver``).
        """
        global _spawned
        _spawned += 1
        if _spawned > 1 and (forked := _forked(self.config, self.host, self.port)) is not None:
            self._proc = forked
            return
        cmd = sim_command(self.config, self.host, self.port)
        env = dict(os.environ, PYTHONUNBUFFERED="1", **{PARENT_ENV: str(os.getpid())})
        self._proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
        )

    def wait_ready(self) -> str:
        """Block until the spawned child prints its ready line; returns its base URL.

        The ready line is the child's own signal that it listens: no polling, no sleep.
        """
        if self.url:
            return self.url
        if self._proc is None or self._proc.stdout is None:
            raise EndpointError("the built-in simulator was not started")
        line = self._proc.stdout.readline()
        if not line.startswith(READY_PREFIX):
            err = self._proc.stderr.read() if self._proc.stderr else ""
            self.stop()
            raise EndpointError(f"the built-in simulator did not start: {line}{err[-2000:]}")
        self.url = line[len(READY_PREFIX) :].strip()
        return self.url

    @property
    def pid(self) -> int | None:
        """The child's pid while it runs (benchmarks read its CPU time)."""
        return self._proc.pid if self._proc is not None else None

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
    """Serve until SIGINT/SIGTERM; prints the ready line with the bound address.

    ``config.load_s`` passes first, as a real server loads its weights before it
    listens: a restart's time to ready includes it.
    """
    # Each stream held is a socket: the soft descriptor limit goes up to the hard one.
    raise_open_files()
    if config.load_s > 0:
        await asyncio.sleep(config.load_s)
    app = build_for(config)
    runner = await _runner(app)
    shared = config.procs > 1 or config.reuse_port
    site = web.TCPSite(runner, host, port, backlog=4096, reuse_port=shared or None)
    await site.start()
    bound = runner.addresses[0][1]
    # procs > 1: this process leads; the others bind the same port and share it.
    followers = _start_followers(
        replace(config, procs=1, reuse_port=True, load_s=0.0), host, bound, config.procs - 1
    )
    print(f"{READY_PREFIX}http://{host}:{bound}", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        # The simulator is the reference the driver is measured against: its own
        # collector pauses would show up as the driver's error.
        with quiet_gc():
            await stop.wait()
    finally:
        for f in followers:
            f.stop()
        await runner.cleanup()


def _start_followers(config: SimConfig, host: str, port: int, n: int) -> list[SimProcess]:
    followers = []
    try:
        # All spawned first, then waited for: their start-ups overlap.
        for _ in range(n):
            follower = SimProcess(config, host, port)
            followers.append(follower)
            follower.spawn()
        for follower in followers:
            follower.wait_ready()
    except BaseException:
        for f in followers:
            f.stop()
        raise
    return followers


class SpecDeployment:
    """The simulated speculative deployment: a draft process and a target process.

    ``draft_via`` maps the draft's URL to the one the target should use, so that a
    fault proxy can sit between them.
    """

    def __init__(self, config: SimConfig | None = None, host: str = "127.0.0.1") -> None:
        self.config = config or SimConfig()
        self.draft = SimProcess(replace(self.config, role="draft", draft_url=""), host)
        self.target: SimProcess | None = None
        self.host = host

    def start_draft(self) -> str:
        """Start the draft server and wait until it listens; returns its URL."""
        self.draft.spawn()
        return self.draft.wait_ready()

    def spawn_draft(self, port: int) -> str:
        """Start the draft server on ``port`` without waiting; returns its URL at once.

        The URL is known before the draft listens, so the target can be started
        alongside it; ``draft.wait_ready()`` before the load begins.
        """
        self.draft.port = port
        self.draft.spawn()
        return f"http://{self.host}:{port}"

    def target_config(self, draft_url: str) -> SimConfig:
        """The target's configuration, speculating with the draft at ``draft_url``."""
        return replace(self.config, role="model", draft_url=draft_url)

    def start(self) -> tuple[str, str]:
        """Start both processes; returns (target URL, draft URL)."""
        draft_url = self.start_draft()
        self.target = SimProcess(self.target_config(draft_url), self.host)
        return self.target.start(), draft_url

    def stop(self) -> None:
        """Stop both processes."""
        if self.target is not None:
            self.target.stop()
        self.draft.stop()


def serve_deployment(config: SimConfig, host: str, port: int) -> None:
    """``loadtest sim --spec``: run draft and target until SIGINT/SIGTERM."""
    dep = SpecDeployment(config, host)
    draft_url = dep.start_draft()
    try:
        dep.target = SimProcess(dep.target_config(draft_url), host)
        dep.target.port = port
        target_url = dep.target.start()
        print(f"draft server listening on {draft_url}", flush=True)
        print(f"{READY_PREFIX}{target_url}  (target, speculating with the draft)", flush=True)
        signal.sigwait({signal.SIGINT, signal.SIGTERM})
    finally:
        dep.stop()
