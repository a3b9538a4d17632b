"""A run that measured nothing says so first and exits non-zero (a CI gate must not pass
on nothing); one whose requests were mostly cut off by the grace period says the load
was beyond the endpoint."""

from __future__ import annotations

from pathlib import Path

import pytest

from loadtest.cli import main
from tests.hostile import HostileServer

_SCENARIO = """
name = "nothing"
max_tokens = 8

[[sources]]
kind = "inline"
category = "chat"
prompts = ["hello", "there"]

[load]
mode = "closed"
concurrency = 2
warmup_s = 0
grace_s = 0.5
"""


def _run(tmp_path: Path, mode: str, bound: list[str]) -> int:
    scenario = tmp_path / "nothing.toml"
    scenario.write_text(_SCENARIO)
    with HostileServer() as hostile:
        return main(
            [
                "run",
                str(scenario),
                "--endpoint",
                hostile.url(mode),
                *bound,
                "--no-tui",
                "--out",
                str(tmp_path / "out"),
                "-q",
            ]
        )


def test_a_run_whose_requests_all_failed_says_stop_first_and_exits_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A count-bound run waits for its measured requests (each bounded by its timeout).
    code = _run(tmp_path, "stall", ["--requests", "2", "--timeout", "1"])
    captured = capsys.readouterr()
    out = captured.out.splitlines()
    assert code == 1
    assert out[0].startswith("STOP: no measured request completed (2 sent, 2 failed")
    assert not any("beyond the endpoint" in line for line in out)
    # The last word says why it exits 1, even with -q.
    assert (
        captured.err.splitlines()[-1] == "exit 1: nothing measured (no measured request completed)"
    )


def test_a_run_cut_off_by_the_grace_period_says_the_load_was_beyond_the_endpoint(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = _run(tmp_path, "stall", ["--duration", "1"])
    captured = capsys.readouterr()
    # Each STOP line wrapped to 80 columns: its next lines are indented.
    stops = [line for line in captured.out.split("\nSTOP: ") if line]
    assert code == 1
    assert stops[0].startswith("STOP: no measured request completed")
    assert stops[1].startswith("2 of 2 measured requests were still running")
    assert "beyond the endpoint" in " ".join(stops[1].split())
    assert captured.err.splitlines()[-1] == (
        "exit 1: nothing measured (no measured request completed); "
        "load beyond the endpoint (2 of 2 measured requests cut off)"
    )


def test_a_run_that_completed_has_no_stop_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _run(tmp_path, "ok", ["--requests", "4"]) == 0
    assert "STOP" not in capsys.readouterr().out
