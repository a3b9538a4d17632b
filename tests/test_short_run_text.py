"""What a short run with a warm-up prints, read as a user reads it: the SLO lines count
the measured requests, the report's CANNOT TELL cell is markup, not text, and a server
figure the next words call unknown is not printed as a number.

One run against the built-in simulator: 12 measured requests after a 1 s warm-up that
sends several times as many, too few for a p99 or an error rate, with a server TTFT of
50 ms, which vLLM's buckets (40-60 ms) hold too coarsely to subtract from the client's.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from subprocess import CompletedProcess

import orjson
import pytest

from tests.conftest import loadtest_here

MEASURED = 12
_SCENARIO = f"""
name = "short"
max_tokens = 8
[[sources]]
kind = "inline"
category = "chat"
prompts = ["tell me a story about a cat", "what is the weather like", "say hello"]
[load]
mode = "closed"
concurrency = 4
requests = {MEASURED}
warmup_s = 1.0
[sim]
ttft_ms = 50.0
itl_ms = 2.0
[slo]
ttft_ms.p99 = 5000
error_rate = 0.01
"""


@pytest.fixture(scope="module")
def short_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[CompletedProcess[str], Path]:
    tmp = tmp_path_factory.mktemp("short")
    (tmp / "short.toml").write_text(_SCENARIO)
    done = loadtest_here("run", str(tmp / "short.toml"), "--no-tui", "--out", str(tmp / "out"))
    assert done.returncode == 1, done.stdout + done.stderr  # CANNOT TELL exits 1
    (folder,) = (tmp / "out").iterdir()
    return done, folder


def test_a_cannot_tell_slo_cell_of_the_report_is_markup(
    short_run: tuple[CompletedProcess[str], Path],
) -> None:
    _, folder = short_run
    assert loadtest_here("report", str(folder)).returncode == 0
    page = (folder / "report.html").read_text()
    slo = page.split("<h2>SLOs</h2>", 1)[1].split("</table>", 1)[0]
    assert '<span class="bad">CANNOT TELL</span> (12 values; a p99 needs 100)' in slo
    assert "&lt;span" not in slo


def test_a_server_p50_its_line_calls_unknown_is_printed_as_its_bucket(
    short_run: tuple[CompletedProcess[str], Path],
) -> None:
    """It read ``server TTFT ms p50 52.5 ...; network and client share: cannot tell
    (client p50 57.6, the server's p50 only known to be 40-60 ms)``."""
    done, _ = short_run
    text = " ".join(done.stdout.split())  # the table wraps at the terminal's width
    said = re.search(r"server TTFT ms (.*?); network and client share: cannot tell", text)
    if said is None:  # a driver so busy that the client's p50 left the server's bucket
        assert "client p50 minus server p50" in text, text
        pytest.skip("the client p50 was more than the bucket's width over the server's")
    assert "40-60" in said[1]  # 50 ms in a 20 ms wide bucket: the difference is the bucket's
    # The p50 is not the interpolation's figure (a p95 in a narrow bucket still may be).
    assert not re.search(r"p50 \d+\.\d", said[1]), said[0]


def _said(stdout: str) -> str:
    return " ".join(stdout.split())  # the table wraps at the terminal's width


def test_an_slo_line_says_which_of_its_requests_were_warm_up(
    short_run: tuple[CompletedProcess[str], Path],
) -> None:
    """It read ``SLO error_rate <= 0.01: 0 CANNOT TELL (44 requests; ...)`` where 39 of
    the 44 were warm-up: the error rate's requests are all that were sent, and now say
    how many of them were not measured."""
    done, folder = short_run
    requests = orjson.loads((folder / "summary.json").read_bytes())["requests"]
    sent, warmup = requests["sent"], requests["warmup"]
    assert warmup > MEASURED  # a warm-up of 1 s sends more than the 12 measured
    said = f"SLO error_rate <= 0.01: 0 CANNOT TELL ({sent} requests, {warmup} of them warm-up;"
    assert said in _said(done.stdout)
    exit_line = f"SLO error_rate cannot tell ({sent} requests, {warmup} of them warm-up;"
    assert exit_line in _said(done.stderr)  # the exit line


def test_a_run_killed_in_its_warm_up_counts_no_measured_request_ok(
    short_run: tuple[CompletedProcess[str], Path], tmp_path: Path
) -> None:
    """A run killed before its measured load has only warm-up lines: it said
    ``SLO ttft_ms.p99 <= 2000: no data (26 requests ok)`` of 26 warm-up requests."""
    _, folder = short_run
    killed = tmp_path / "killed"
    shutil.copytree(folder, killed)
    (killed / "summary.json").unlink()
    lines = (killed / "requests.jsonl").read_bytes().splitlines()
    warm = [line for line in lines if orjson.loads(line)["warmup"]]
    (killed / "requests.jsonl").write_bytes(b"\n".join(warm) + b"\n")
    done = loadtest_here("summarize", str(killed))
    text = _said(done.stdout)
    n = len(warm)
    assert f"SLO ttft_ms.p99 <= 5000: no data (0 measured requests ok; {n} warm-up," in text
    assert f"({n} requests, {n} of them warm-up; an error rate needs 100)" in text
