"""Hook actions: a shell command or an HTTP request at a point of the timeline.

They serve users whose draft server (or anything else) is managed elsewhere: kubectl,
docker, systemd, a feature flag service. A hook that fails is reported, not fatal: the
run goes on and the window's entry says what the hook returned.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import aiohttp

from loadtest.transport.side import SideHttp

__all__ = ["run_command", "run_request"]


async def run_command(command: str, timeout_s: float = 60.0) -> dict[str, Any]:
    """Run ``command`` in a shell; returns its exit code, duration and output tail."""
    t0 = time.perf_counter()
    proc = await asyncio.create_subprocess_shell(
        command, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
    )
    try:
        out, _ = await asyncio.wait_for(proc.communicate(), timeout_s)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        return {"command": command, "exit": None, "error": f"timed out after {timeout_s:g} s"}
    return {
        "command": command,
        "exit": proc.returncode,
        "seconds": round(time.perf_counter() - t0, 3),
        "output": out.decode("utf-8", "replace")[-500:],
    }


async def run_request(
    url: str,
    method: str = "POST",
    body: str = "",
    timeout_s: float = 30.0,
    http: SideHttp | None = None,
) -> dict[str, Any]:
    """Send one HTTP request; returns its status and duration (or the error)."""
    t0 = time.perf_counter()
    http = http or SideHttp()
    headers = {"Content-Type": "application/json"} if body else {}
    headers.update(http.headers(url))
    try:
        async with (
            http.session(timeout_s=timeout_s) as session,
            session.request(method, url, data=body.encode() or None, headers=headers) as resp,
        ):
            await resp.read()
            status = resp.status
    except (aiohttp.ClientError, TimeoutError, OSError) as exc:
        return {"url": url, "status": None, "error": f"{type(exc).__name__}: {exc}"}
    return {"url": url, "status": status, "seconds": round(time.perf_counter() - t0, 3)}
