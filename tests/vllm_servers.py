"""Real vLLM servers for the tests: ``loadtest serve-vllm`` on a free port.

vLLM's CPU threads spin and a server holds ~6.5 GB: a test module starts at most one
(module scope), the ``ab`` test one at a time, and each is stopped with its module.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from typing import IO

import pytest

from loadtest._compat.orphans import die_with_parent
from loadtest.app.ab.sides import stop_process
from loadtest.app.deployment import free_port
from loadtest.app.engines.vllm import VllmOptions, vllm_available, vllm_command

__all__ = ["READY_S", "require_vllm_extra", "vllm_server"]

READY_S = 600.0
"""Ready in ~50 s on an idle 2-core machine; 130 s was seen beside other tests."""


def require_vllm_extra() -> None:
    """Skip the calling module without the ``vllm`` extra, unless
    ``LOADTEST_REQUIRE_VLLM=1`` (set by scripts/test.sh), where it is a failure."""
    why = vllm_available()
    if why is None:
        return
    if os.environ.get("LOADTEST_REQUIRE_VLLM") == "1":
        raise AssertionError(f"LOADTEST_REQUIRE_VLLM=1, but {why}")
    pytest.skip(f"the vllm extra is missing: {why}", allow_module_level=True)


@contextmanager
def vllm_server(spec: str = "none") -> Iterator[str]:
    """A ``serve-vllm`` process (1 GB of KV cache, 4 sequences): its URL once healthy.

    A server that exits before it is ready skips the module with its last lines (too
    little memory, say), unless ``LOADTEST_REQUIRE_VLLM=1``, where it fails."""
    opts = VllmOptions(port=free_port(), spec=spec, kv_cache_gb=1.0, max_num_seqs=4)
    with tempfile.TemporaryFile() as log:
        proc = subprocess.Popen(
            vllm_command(opts),
            stdout=subprocess.DEVNULL,
            stderr=log,
            preexec_fn=die_with_parent,
        )
        try:
            yield _ready(proc, f"http://127.0.0.1:{opts.port}", log)
        finally:
            stop_process(proc, 60.0)


def _ready(proc: subprocess.Popen[bytes], url: str, log: IO[bytes]) -> str:
    deadline = time.monotonic() + READY_S
    while True:
        if proc.poll() is not None:
            log.seek(0)
            tail = b"\n".join(log.read().splitlines()[-5:]).decode(errors="replace")
            why = f"serve-vllm exited with {proc.returncode} before it was ready:\n{tail}"
            if os.environ.get("LOADTEST_REQUIRE_VLLM") == "1":
                raise AssertionError(why)
            pytest.skip(f"vLLM cannot start on this machine: {why}")
        try:
            with urllib.request.urlopen(url + "/health", timeout=2) as r:
                if r.status == 200:
                    return url
        except OSError:
            pass
        assert time.monotonic() < deadline, f"vLLM not ready within {READY_S} s"
        time.sleep(0.5)
