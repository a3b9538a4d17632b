"""Real vLLM servers for the tests: ``loadtest serve-vllm`` on a free port.

vLLM's CPU threads spin and a server holds ~6.5 GB: a test module starts at most one
(module scope), the ``ab`` test one at a time, and each is stopped with its module.
"""

from __future__ import annotations

import os
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from loadtest._compat.orphans import die_with_parent
from loadtest.app.ab_sides import stop_process
from loadtest.app.deployment import free_port
from loadtest.app.vllm import VllmOptions, vllm_available, vllm_command

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
    """A ``serve-vllm`` process (1 GB of KV cache, 4 sequences): its URL once healthy."""
    opts = VllmOptions(port=free_port(), spec=spec, kv_cache_gb=1.0, max_num_seqs=4)
    proc = subprocess.Popen(
        vllm_command(opts),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        preexec_fn=die_with_parent,
    )
    url = f"http://127.0.0.1:{opts.port}"
    try:
        deadline = time.monotonic() + READY_S
        while True:
            assert proc.poll() is None, f"serve-vllm exited with {proc.returncode}"
            try:
                with urllib.request.urlopen(url + "/health", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            assert time.monotonic() < deadline, f"vLLM not ready within {READY_S} s"
            time.sleep(0.5)
        yield url
    finally:
        stop_process(proc, 60.0)
