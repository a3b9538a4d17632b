"""A managed target: the endpoint's process, started, stopped and restarted by loadtest.

Readiness is an HTTP GET on the target's ready URL answering 200, whatever its body
(``transport.side.not_ready``); time to ready runs from the spawn to that answer, and a
target not ready in time is one error naming the URL and what it last answered. The
process's output goes to a log file in the run folder, so a target that fails to start
can be diagnosed.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import time
from pathlib import Path
from typing import IO

from loadtest._compat.orphans import die_with_parent
from loadtest.errors import EndpointError
from loadtest.features.faults.plan import TargetSpec
from loadtest.transport.side import SideHttp, not_ready

__all__ = ["ManagedTarget"]


class ManagedTarget:
    """The process behind a ``TargetSpec``."""

    def __init__(self, spec: TargetSpec, log_path: Path | None = None) -> None:
        self.spec = spec
        self.log_path = log_path
        self.proc: asyncio.subprocess.Process | None = None
        self.starts = 0
        self._log: IO[bytes] | None = None

    @property
    def pid(self) -> int | None:
        """The running process's id, None while stopped."""
        if self.proc is None or self.proc.returncode is not None:
            return None
        return self.proc.pid

    async def start(self) -> float:
        """Spawn the target and wait until it is ready; returns the time to ready in s."""
        if self._log is None and self.log_path is not None:
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
            self._log = open(self.log_path, "ab")  # noqa: SIM115, ASYNC230
        out = self._log if self._log is not None else asyncio.subprocess.DEVNULL
        t0 = time.perf_counter()
        try:
            # "{python}" in a command is this interpreter: the one loadtest runs in.
            command = [c.replace("{python}", sys.executable) for c in self.spec.command]
            self.proc = await asyncio.create_subprocess_exec(
                *command,
                stdout=out,
                stderr=out,
                env=dict(os.environ, PYTHONUNBUFFERED="1"),
                start_new_session=True,
                preexec_fn=die_with_parent,  # not past a run killed hard
            )
        except OSError as exc:
            raise EndpointError(
                f"cannot start the managed target {self.spec.command[0]!r}: {exc.strerror}"
            ) from exc
        self.starts += 1
        await self._wait_ready(t0)
        return time.perf_counter() - t0

    async def _wait_ready(self, t0: float) -> None:
        deadline = t0 + self.spec.ready_timeout_s
        url = self.spec.ready_url
        # The target is a process this run started, on this machine: default TLS, no key.
        async with SideHttp().session(timeout_s=None) as session:
            while True:
                if self.proc is not None and self.proc.returncode is not None:
                    raise EndpointError(
                        f"the managed target exited with code {self.proc.returncode} before "
                        f"it was ready; see {self.log_path or 'its output'}"
                    )
                left = deadline - time.perf_counter()
                got = await not_ready(session, url, min(2.0, max(0.1, left)))
                if got is None:
                    return
                if time.perf_counter() > deadline:
                    await self.stop()
                    raise EndpointError(
                        f"the managed target was not ready at {url} within "
                        f"{self.spec.ready_timeout_s:g} s (last: {got}); raise "
                        "[target].ready_timeout_s or check its log"
                    )
                await asyncio.sleep(0.05)

    async def stop(self, how: str = "term") -> None:
        """Stop the process group: SIGTERM (then SIGKILL after the stop timeout) or SIGKILL."""
        proc, self.proc = self.proc, None
        if proc is None or proc.returncode is not None:
            return
        sig = signal.SIGKILL if how == "kill" else signal.SIGTERM
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)
        try:
            await asyncio.wait_for(proc.wait(), self.spec.stop_timeout_s)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            await proc.wait()

    async def close(self) -> None:
        """Stop the process and close its log."""
        await self.stop()
        if self._log is not None:
            self._log.close()
            self._log = None
