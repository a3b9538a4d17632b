"""Start-up stays cheap: the commands that parse flags import nothing heavy.

Measured with ``python -X importtime`` in a fresh interpreter, whose stderr lists every
module imported; wall time is benchmarks/bench_startup.py's business, never a test's.
"""

from __future__ import annotations

import socket
import subprocess
import sys

import pytest

HEAVY = (
    "aiohttp",
    "hdrh",
    "matplotlib",
    "msgspec",
    "numpy",
    "ray",
    "scipy",
    "textual",
    "loadtest.datasets",
    "loadtest.engine",
    "loadtest.sim",
)
"""Modules only the commands that need them may import (their sub-modules too)."""


def imported_by(code: str) -> set[str]:
    """Every module a fresh interpreter imports to run ``code``."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", code],
        capture_output=True,
        text=True,
        check=True,
    )
    names = set()
    for line in done.stderr.splitlines():
        # "import time:  self [us] | cumulative | imported package", indented by depth.
        if line.startswith("import time:") and "|" in line:
            name = line.rsplit("|", 1)[1].strip()
            if name != "imported package":
                names.add(name)
    return names


def heavy_in(names: set[str]) -> list[str]:
    return sorted(n for n in names if any(n == h or n.startswith(h + ".") for h in HEAVY))


@pytest.mark.parametrize("code", ["import loadtest.cli", "import loadtest"])
def test_import_pulls_nothing_heavy(code: str) -> None:
    names = imported_by(code)
    assert code.split()[-1] in names  # the parse saw the module itself
    assert heavy_in(names) == []


def test_help_and_usage_errors_pull_nothing_heavy() -> None:
    code = (
        "import sys\n"
        "from loadtest.cli.main import main\n"
        "assert main(['run', '--bogus']) == 2\n"
        "try:\n"
        "    main(['--help'])\n"
        "except SystemExit as exc:\n"
        "    assert exc.code == 0\n"
    )
    assert heavy_in(imported_by(code)) == []


def test_the_parse_would_see_a_heavy_import() -> None:
    # The guard above is only worth something if a heavy import does show up.
    assert "aiohttp" in heavy_in(imported_by("import aiohttp"))


def test_spawned_simulators_start_together_and_report_ready() -> None:
    # The built-in deployment's processes are spawned first and waited for after, so
    # their start-ups overlap; the URL of the draft is known before it listens.
    import urllib.request

    from loadtest.sim import SimConfig, SimProcess
    from loadtest.sim.process import SpecDeployment

    spec = SpecDeployment(SimConfig())
    sim = SimProcess(SimConfig())
    try:
        with socket_port() as s:
            port = int(s.getsockname()[1])
        draft_url = spec.spawn_draft(port)
        sim.spawn()
        assert draft_url == f"http://127.0.0.1:{port}"
        assert spec.draft.wait_ready() == draft_url
        url = sim.wait_ready()
        assert sim.wait_ready() == url  # a second wait is free
        for base in (url, draft_url):
            with urllib.request.urlopen(f"{base}/health", timeout=10) as resp:
                assert resp.status == 200
    finally:
        sim.stop()
        spec.stop()


def socket_port() -> socket.socket:
    """A socket bound to a free loopback port (its number: ``getsockname()[1]``)."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    return s
