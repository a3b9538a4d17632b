"""What a run says while it goes: progress lines with no made-up zeros, labelled by run."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from loadtest.app.process.console import Progress
from loadtest.cli.main import main

_NOTHING_DONE = Progress(
    sent=16,
    ok=4,
    failed=0,
    in_flight=12,
    requests_per_s=0.0,
    output_tokens_per_s=0.0,
    elapsed_s=5.0,
)
"""Five seconds in, the last interval completed nothing (the 4 ok were before)."""


def test_an_interval_with_nothing_completed_says_no_data_not_zero() -> None:
    line = replace(_NOTHING_DONE, ttft_known=True).line()
    assert line == (
        "[   5.0s] sent 16 ok 4 failed 0 in flight 12  "
        "req/s no data (none completed in the last second)  TTFT no data"
    )
    assert "0.0" not in line.removeprefix("[   5.0s]")
    measured = replace(
        _NOTHING_DONE,
        requests_per_s=8.0,
        output_tokens_per_s=1393.4,
        ttft_known=True,
        ttft_ms=(21.5, 37.0),
    )
    # The rates are the last second's, and say so (23.0 req/s read as the run's 12.6).
    assert measured.line().endswith("8.0 req/s 1393 tok/s (last 1 s)  TTFT p50 21.5 ms p99 37.0 ms")
    # Workers report counts only: their line says nothing of TTFT rather than "no data".
    workers = replace(_NOTHING_DONE, elapsed_s=None, workers=3).line()
    assert workers.startswith("[3 workers] ") and "TTFT" not in workers
    assert "req/s no data" in workers


def test_warm_up_says_so_instead_of_rates() -> None:
    line = replace(_NOTHING_DONE, warmup=True, ttft_known=True).line()
    assert line.endswith("in flight 12  warming up, not measured yet")


def test_ab_prints_a_line_per_run_and_labels_each_runs_progress_lines(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # TTFT 5.5 s: the first progress line (at 5 s) comes before anything completed.
    scenario = tmp_path / "slow.toml"
    scenario.write_text(
        'name = "slow"\nmax_tokens = 2\n[[sources]]\nkind = "inline"\nprompts = ["a"]\n'
        "[load]\nconcurrency = 1\nwarmup_s = 0\n"
        "[sim]\nttft_ms = 5500.0\nttft_sigma = 0.0\nitl_ms = 1.0\n"
    )
    argv = ["ab", str(scenario), "--requests", "1", "--repeat", "1", "--no-tui"]
    code = main([*argv, "--out", str(tmp_path / "out")])
    captured = capsys.readouterr()
    # One value a side is too few for any verdict: ab exits 1 and says why, last.
    assert code == 1
    assert captured.err.splitlines()[-1] == "exit 1: comparison: too few samples"
    runs = captured.out.splitlines()[:2]
    assert runs[0].startswith("A 1/1 baseline   ok 1  TTFT p50 55"), captured.out
    assert runs[1].startswith("B 1/1 candidate  ok 1  TTFT p50 55"), captured.out
    assert f"-> {tmp_path / 'out'}" in runs[0] and "/baseline/" in runs[0]
    # No run prints its own table: the comparison's is the only one.
    assert "requests: sent" not in captured.out and "results:" not in captured.out
    progress = [line for line in captured.err.splitlines() if "] sent " in line]
    assert [line[:16] for line in progress] == ["A 1/1 [   5.0s] ", "B 1/1 [   5.0s] "]
    assert all(
        line.endswith("req/s no data (none completed in the last second)  TTFT no data")
        for line in progress
    ), progress
    notes = [line for line in captured.err.splitlines() if "built-in simulator" in line]
    assert [n[:6] for n in notes] == ["A 1/1 ", "B 1/1 "]
