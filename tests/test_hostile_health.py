"""Every reader of ``/health``, fed each broken answer of the hostile server.

Two readers wait on ``/health`` for a process loadtest started: the managed target
(``[target]``, the speculative simulator, and each ``restart`` fault window) and the cold
start of an ``ab`` side it deploys (``features.deployment_cost``). Both take the status
alone: 200 is ready whatever the body (vLLM answers an empty 200, llama.cpp JSON, so a
body test would refuse real servers); anything else is not ready yet, polled until the
deadline, and then one error naming the URL and what came back last. ``--endpoint`` reads
no ``/health``: a server loadtest does not manage is asked ``/v1/models`` instead
(``test_hostile``).
"""

from __future__ import annotations

import asyncio
import re
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from loadtest.app.run.job import RunOptions, run_job
from loadtest.errors import EndpointError
from loadtest.features.deployment_cost import measure_cold_start
from loadtest.features.faults.plan import TargetSpec
from loadtest.features.faults.target import ManagedTarget
from tests.conftest import loadtest_here
from tests.hostile import HEALTH_ANSWERS, HEALTH_BROKEN, HostileServer

pytestmark = pytest.mark.timeout(120)

READY = ("ok", "health-html", "health-empty", "health-text", "health-truncated")
"""Modes whose /health answers 200: ready, whatever (if anything) the body holds."""
NOT_READY = {
    "health-loading": re.escape('HTTP 503 (\'{"error": {"message": "Loading model"'),
    "health-404": re.escape("HTTP 404 ('<html><body>404 Not Found"),
    "health-500": re.escape("HTTP 500 (an empty body)"),
    "health-reset": "Connection reset by peer|ServerDisconnected",  # as the kernel tells
    "health-garbage": "Bad status line",
    "health-stall": "no answer within",
}
"""What the error names as the last answer of each mode that never gets ready (a regex)."""
SLEEPER = ("{python}", "-c", "import time; time.sleep(60)")
"""A process that stays up while the hostile server answers for it."""
WAIT_S = 1.0
BOUND_S = WAIT_S + 2.0 + 10.0
"""The wait, one GET bounded at 2 s past it, and room for a busy machine."""


def test_every_mode_is_covered() -> None:
    assert set(READY) | set(NOT_READY) == {"ok", *HEALTH_ANSWERS, *HEALTH_BROKEN}


@pytest.fixture(scope="module")
def hostile() -> Iterator[HostileServer]:
    with HostileServer() as server:
        yield server


def _target(url: str, tmp: Path) -> ManagedTarget:
    spec = TargetSpec(SLEEPER, f"{url}/health", url, ready_timeout_s=WAIT_S, stop_timeout_s=5.0)
    return ManagedTarget(spec, tmp / "target.log")


@pytest.mark.parametrize("mode", READY)
async def test_a_managed_target_answering_200_is_ready(
    hostile: HostileServer, mode: str, tmp_path: Path
) -> None:
    target = _target(hostile.url(mode), tmp_path)
    try:
        assert await target.start() < BOUND_S
        assert target.pid is not None
    finally:
        await target.close()


@pytest.mark.parametrize("mode", sorted(NOT_READY))
async def test_a_managed_target_never_ready_is_one_error_naming_url_and_answer(
    hostile: HostileServer, mode: str, tmp_path: Path
) -> None:
    url = hostile.url(mode)
    target = _target(url, tmp_path)
    t0 = time.monotonic()
    with pytest.raises(EndpointError) as caught:
        await target.start()
    assert time.monotonic() - t0 < BOUND_S
    text = str(caught.value)
    assert f"not ready at {url}/health within 1 s (last: " in text
    assert re.search(NOT_READY[mode], text), text
    assert "\n" not in text
    assert target.pid is None  # stopped, not left running


@pytest.mark.parametrize("mode", READY)
async def test_a_cold_start_answering_200_is_ready(hostile: HostileServer, mode: str) -> None:
    cmd = [sys.executable, *SLEEPER[1:]]
    cold, proc = await measure_cold_start(cmd, hostile.url(mode), "m", timeout_s=WAIT_S)
    proc.kill()
    proc.wait()
    assert cold.ready_s < BOUND_S
    if mode == "ok":
        assert cold.first_token_error is None and cold.first_token_s is not None
    else:  # the hostile server has no such chat mode: a reason, not an exception
        assert cold.first_token_error == "HTTP 404"


@pytest.mark.parametrize("mode", sorted(NOT_READY))
async def test_a_cold_start_never_ready_is_one_error_naming_url_and_answer(
    hostile: HostileServer, mode: str
) -> None:
    """Before, a /health that never answered held the wait forever (no bound per GET)
    and the error named neither the URL nor what came back."""
    cmd = [sys.executable, *SLEEPER[1:]]
    url = hostile.url(mode)
    t0 = time.monotonic()
    with pytest.raises(EndpointError) as caught:
        await asyncio.wait_for(measure_cold_start(cmd, url, "m", timeout_s=WAIT_S), 60)
    assert time.monotonic() - t0 < BOUND_S
    text = str(caught.value)
    assert f"not ready at {url}/health within 1 s (last: " in text
    assert re.search(NOT_READY[mode], text), text


# The first token of a cold start is read by the load's own parser: a broken stream is
# the first token's error, never an exception out of ``ab``.
FIRST_TOKEN = {
    "not-object": "chunk is not a JSON object",  # an AttributeError out of ab before
    "html-as-sse": "the stream ended without a token",
    "empty-stream": "the stream ended without a token",
    "http-503": "HTTP 503",
    "slowloris": "no token within 1 s",  # unbounded before: 31 s to a first token
}
TOKEN_FIRST = ("error-event", "invalid-json", "truncated")
"""Streams that break after their first token: the token came, and is timed."""


@pytest.mark.parametrize("mode", [*sorted(FIRST_TOKEN), *TOKEN_FIRST])
async def test_a_cold_starts_broken_first_stream_is_its_reason(
    hostile: HostileServer, mode: str
) -> None:
    cmd = [sys.executable, *SLEEPER[1:]]
    cold, proc = await measure_cold_start(cmd, hostile.url(mode), "m", timeout_s=WAIT_S)
    proc.kill()
    proc.wait()
    if mode in TOKEN_FIRST:
        assert cold.first_token_error is None and cold.first_token_s is not None
        return
    assert cold.first_token_s is None
    assert cold.first_token_error is not None
    assert FIRST_TOKEN[mode] in cold.first_token_error


SCENARIO = """
name = "health"
max_tokens = 8
[[sources]]
kind = "inline"
prompts = ["one", "two"]
[load]
concurrency = 2
{load}
[target]
command = "{python} -c 'import time; time.sleep(60)'"
ready_url = "{ready}"
endpoint = "{endpoint}"
ready_timeout_s = 1
{faults}
"""


def _scenario(path: Path, load: str, ready: str, endpoint: str, faults: str = "") -> str:
    """A scenario whose ``[target]`` is a process that only sleeps, its readiness and
    its endpoint answered by the hostile server."""
    text = SCENARIO.format(
        load=load, python=sys.executable, ready=ready, endpoint=endpoint, faults=faults
    )
    path.write_text(text)
    return str(path)


def test_a_run_whose_target_never_gets_ready_is_one_line_naming_the_url(
    hostile: HostileServer, tmp_path: Path
) -> None:
    ready = hostile.url("health-loading") + "/health"
    scenario = _scenario(tmp_path / "health.toml", "requests = 4", ready, hostile.url("ok"))
    res = loadtest_here("run", scenario, "--no-tui", "--out", str(tmp_path / "out"))
    assert res.returncode == 1, res.stderr
    assert "Traceback" not in res.stderr
    # The note that names the target, then the error: one line, the last.
    *_, line = res.stderr.strip().splitlines()
    assert [x for x in res.stderr.splitlines() if x.startswith("loadtest:")] == [line]
    assert line.startswith(f"loadtest: the managed target was not ready at {ready} within 1 s")
    assert "HTTP 503" in line and "Loading model" in line


def test_a_restart_that_never_gets_ready_fails_its_window_saying_why(tmp_path: Path) -> None:
    """The target is ready once, then its /health answers 503: the restart window fails,
    its reason names the URL and the answer. Before, the readiness error died with the
    window's task and the window read as if the restart had been applied."""
    with HostileServer() as server:  # its own: "health-first-only" counts its GETs
        ready = server.url("health-first-only") + "/health"
        faults = '[[faults.events]]\nkind = "restart"\nat_s = 0.5\nduration_s = 1\n'
        load = "duration_s = 3\ngrace_s = 2"
        scenario = _scenario(tmp_path / "restart.toml", load, ready, server.url("ok"), faults)
        options = RunOptions(scenario=scenario, out=str(tmp_path / "out"), tui=False)
        summary, _, interrupted = run_job(options)
    assert not interrupted
    (window,) = summary["faults"]
    assert window["verdict"] == "failed", window
    said = f"not ready at {ready} within 1 s (last: HTTP 503 ('Loading model'))"
    assert said in window["reason"], window
