"""The built-in simulator as a child process: the first a fresh interpreter, the ones
after it forked from the fork server (``SimProcess.spawn``), which has imported them
once. A forked one serves, stops, says why it could not start, and does not outlive its
parent.
"""

from __future__ import annotations

import multiprocessing
import subprocess
import sys
import textwrap
import time
import urllib.request
from pathlib import Path

import orjson
import pytest

from loadtest.errors import EndpointError
from loadtest.sim import SimConfig, SimProcess

FORK_SERVER = "forkserver" in multiprocessing.get_all_start_methods()


def _models(url: str) -> list[str]:
    with urllib.request.urlopen(f"{url}/v1/models", timeout=10) as resp:
        return [m["id"] for m in orjson.loads(resp.read())["data"]]


@pytest.mark.skipif(not FORK_SERVER, reason="this platform has no fork server")
def test_simulators_after_the_first_are_forked_serve_and_stop() -> None:
    with SimProcess(SimConfig()) as first, SimProcess(SimConfig(model="forked-llm")) as second:
        assert type(second._proc).__name__ == "_Forked"  # the process's second at least
        assert _models(first.url) == ["sim-llm"]
        assert _models(second.url) == ["forked-llm"]  # its own configuration
        pid = second.pid
        assert pid is not None
        second.stop()
        assert not Path(f"/proc/{pid}").exists() or _state(pid) == "Z"


def _state(pid: int) -> str:
    return Path(f"/proc/{pid}/stat").read_text().split()[2]


@pytest.mark.skipif(not FORK_SERVER, reason="this platform has no fork server")
def test_a_forked_simulator_that_cannot_listen_says_why() -> None:
    with SimProcess(SimConfig()) as taken:
        port = int(taken.url.rsplit(":", 1)[1])
        clash = SimProcess(SimConfig(), port=port)
        with pytest.raises(EndpointError, match=f"cannot listen on 127.0.0.1:{port}"):
            clash.start()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_forked_simulators_end_with_a_parent_killed_by_sigkill(tmp_path: Path) -> None:
    script = tmp_path / "parent.py"
    script.write_text(
        textwrap.dedent(
            """
            import os, sys, time
            from loadtest.sim import SimConfig, SimProcess
            if __name__ == "__main__":
                sims = [SimProcess(SimConfig()) for _ in range(3)]
                for s in sims:
                    s.start()
                print(" ".join(str(s.pid) for s in sims), flush=True)
                time.sleep(60)
            """
        )
    )
    parent = subprocess.Popen(
        [sys.executable, str(script)], stdout=subprocess.PIPE, text=True, cwd=tmp_path
    )
    try:
        assert parent.stdout is not None
        pids = [int(p) for p in parent.stdout.readline().split()]
        assert len(pids) == 3 and all(Path(f"/proc/{p}").exists() for p in pids)
    finally:
        parent.kill()
        parent.wait()
    for _ in range(100):  # up to 5 s
        if not any(_alive(p) for p in pids):
            break
        time.sleep(0.05)
    assert not any(_alive(p) for p in pids), pids


def _alive(pid: int) -> bool:
    try:
        return _state(pid) != "Z"
    except FileNotFoundError:
        return False
