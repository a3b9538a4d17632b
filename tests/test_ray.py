"""``--ray``: a run through a local Ray head on loopback is complete and merged.

Needs the ``ray`` extra; CI installs it and sets ``LOADTEST_REQUIRE_RAY=1`` so that the
test runs there instead of skipping. Ray's token auth is disabled for the test and its
temporary folder is the test's own, removed with it.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from tests.conftest import read_jsonl

ROOT = Path(__file__).resolve().parent.parent

try:
    import ray  # noqa: F401

    HAVE_RAY = True
except ImportError:
    HAVE_RAY = False

pytestmark = pytest.mark.skipif(
    not HAVE_RAY and os.environ.get("LOADTEST_REQUIRE_RAY") != "1",
    reason="the ray extra is not installed",
)


def _env() -> dict[str, str]:
    return dict(os.environ, RAY_AUTH_MODE="disabled", PYTHONPATH=str(ROOT))


def _ray(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ray.scripts.scripts", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=_env(),
    )


@pytest.fixture
def ray_head() -> Iterator[str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    # Short: Ray's unix sockets live under it, and their paths may not exceed 107 bytes.
    temp = Path(tempfile.mkdtemp(prefix="lt-ray-", dir="/tmp"))
    started = _ray(
        "start",
        "--head",
        "--node-ip-address=127.0.0.1",
        f"--port={port}",
        "--num-cpus=2",
        "--include-dashboard=false",
        "--disable-usage-stats",
        f"--temp-dir={temp}",
    )
    assert started.returncode == 0, started.stderr[-2000:]
    try:
        yield f"127.0.0.1:{port}"
    finally:
        _ray("stop", "--force")
        shutil.rmtree(temp, ignore_errors=True)


def test_a_run_through_ray_is_complete_and_merged(ray_head: str, tmp_path: Path) -> None:
    scenario = tmp_path / "r.toml"
    scenario.write_text(
        'name = "r"\nmax_tokens = 16\n[[sources]]\nkind = "inline"\nprompts = ["a", "b"]\n'
        "[load]\nconcurrency = 4\nrequests = 120\n[sim]\nttft_ms = 5.0\nitl_ms = 1.0\n"
    )
    out = tmp_path / "out"
    argv = ["run", str(scenario), "--no-tui", "--workers", "2", "--ray", ray_head]
    res = subprocess.run(
        [sys.executable, "-m", "loadtest", *argv, "--out", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=240,
        env=_env(),
    )
    assert res.returncode == 0, res.stderr[-3000:]
    assert "Ray tasks at" in res.stderr
    (run_dir,) = out.iterdir()
    s = orjson.loads((run_dir / "summary.json").read_bytes())
    assert s["run"]["workers"] == 2
    assert s["requests"]["sent"] == s["requests"]["ok"] == 120
    rows = read_jsonl(run_dir / "requests.jsonl")
    assert len(rows) == 120 and {r["worker"] for r in rows} == {0, 1}
    assert s["metrics"]["ttft_ms"]["count"] == 120
