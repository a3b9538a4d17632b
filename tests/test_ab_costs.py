"""What a paired sweep costs: the memory budget, the time budget, requests per cell."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from loadtest.app.ab.costs import (
    memory_budget,
    parse_duration,
    parse_memory,
    requests_per_cell,
    side_memory,
    trim_repeats,
)
from loadtest.cli.main import main
from loadtest.errors import UsageError
from loadtest.model.comparison import DeploymentRun


def test_sizes_and_times_parse() -> None:
    assert parse_memory("2GiB") == 2048
    assert parse_memory("512 MiB") == 512
    assert parse_memory("1GB") == pytest.approx(953.67, abs=0.01)
    assert parse_duration("15m") == 900 and parse_duration("90s") == 90
    assert parse_duration("1.5h") == 5400 and parse_duration("30") == 30
    for bad in ("two", "-1GiB", "2 parsecs"):
        with pytest.raises(UsageError, match="--memory-budget"):
            parse_memory(bad)
    with pytest.raises(UsageError, match="--budget"):
        parse_duration("soon")


def _run(peak: float, steady: float) -> DeploymentRun:
    return {
        "deployment": "llama:ngram",
        "ready_s": 1.0,
        "first_token_s": 1.1,
        "first_token_error": None,
        "rss_steady_mib": steady,
        "rss_peak_mib": peak,
        "rss_samples": 20,
        "energy_j": None,
        "energy_source": None,
        "energy_reason": "none",
        "measured_s": 5.0,
    }


def test_a_side_fits_with_headroom_or_does_not_or_cannot_tell() -> None:
    fits = side_memory(1, "candidate", "llama:ngram", [_run(600, 550), _run(640, 560)], 2048)
    assert fits["fits"] is True and fits["peak_mib"] == 640 and fits["headroom_mib"] == 1408
    assert fits["note"] == "fits: peak 640 MiB, 1408 MiB (69%) to spare"
    over = side_memory(1, "candidate", "llama:draft", [_run(2500, 2400)], 2048)
    assert over["fits"] is False and over["note"].startswith("does NOT fit")
    url = side_memory(1, "baseline", "http://127.0.0.1:8000", [None, None], 2048)
    assert url["fits"] is None and url["note"].startswith("cannot tell")
    assert memory_budget("2GiB", 2048, [fits])["fits"] is True
    assert memory_budget("2GiB", 2048, [fits, url])["fits"] is None
    assert memory_budget("2GiB", 2048, [fits, url, over])["fits"] is False


def test_the_budget_trims_repeats_never_steps() -> None:
    # 4 steps x 2 sides x 3 repeats of 60 s = 24 min; 15 min holds 1 repeat (8 min).
    kept, said = trim_repeats(900, 4, 2, 3, 60.0)
    assert kept == 1 and said.startswith("--budget: repeats trimmed 3 -> 1 to fit 15 min")
    assert "4 steps kept" in said
    assert trim_repeats(3600, 4, 2, 3, 60.0)[0] == 3
    kept, said = trim_repeats(60, 4, 2, 3, 60.0)
    assert kept == 1 and "even one repeat is over the budget" in said
    kept, said = trim_repeats(900, 4, 2, 3, None)
    assert kept == 3 and "cannot tell how long a run takes" in said


def test_requests_per_cell_grow_with_the_family_and_stop_at_the_run_spread() -> None:
    one, why = requests_per_cell(2, 1, difference=0.3)
    many, _ = requests_per_cell(2, 40, difference=0.3)
    assert one is not None and many is not None and many > one
    assert "bench_power" in why
    # It said "(run-to-run sd of a run's median beyond its requests' 5.6%, per request 28%)".
    assert "a run's median moves 5.6% from one run to the next" in why
    assert "one request's e2e varies 28% within a run" in why
    # bench_power measured 30% called 19 times in 20 at 20 requests a run (2 a side):
    # the formula, from the spreads it measured, asks about as many.
    assert 10 <= one <= 60
    # A spread between runs as large as the difference: no request count suffices.
    none, why = requests_per_cell(2, 1, run_spread=0.1)
    assert none is None and "too large" in why
    # ... and what would reach it is said: the fewest repeats that leave room, and twice.
    fewest = int(why.split("--repeat ")[1].split()[0])
    assert requests_per_cell(fewest - 1, 1, run_spread=0.1)[0] is None
    assert requests_per_cell(fewest, 1, run_spread=0.1)[0] is not None
    assert f"--repeat {2 * fewest} with" in why
    # One run a side: the practical bar is 15%, above the 10% asked.
    none, why = requests_per_cell(1, 1, min_effect=0.15)
    assert none is None and "below the practical bar" in why


def test_check_prints_the_trimmed_plan_and_the_requests_per_cell(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "s.toml"
    path.write_text(
        'name = "s"\n[[sources]]\nkind = "inline"\nprompts = ["a"]\n'
        "[load]\nconcurrency = 1\nduration_s = 60\nwarmup_s = 0\n"
    )
    argv = ["ab", str(path), "--sweep", "concurrency=1,2,4,8", "--repeat", "3"]
    assert main([*argv, "--budget", "15m", "--check"]) == 0
    text = capsys.readouterr().out
    assert "ab sweep: 4 concurrency steps (1, 2, 4, 8) x 2 sides x 1 repeat = 8 runs" in text
    # Built-in simulator sides: no URL endpoint, no llama.cpp cold start to speak of.
    assert "endpoint: the sides below" in text and "llama.cpp" not in text
    assert "--budget: repeats trimmed 3 -> 1 to fit 15 min (4 steps kept" in text
    # One repeat: the one-run bar (15%) is above 10%: said, not a number.
    assert "to see a 10% difference" in text and "below the practical bar" in text
    assert main([*argv, "--check"]) == 0
    text = capsys.readouterr().out
    # With the spreads measured on this machine 10% needs more than 3 repeats: said so.
    assert "to see a 10% difference" in text and "bench_power.py" in text
    said = " ".join(text.split())
    # Beyond 3 repeats: said so, and what would reach it (it said "cannot be reached").
    assert "Holm over 12+ tests): not with 3 repeats" in said
    assert re.search(r"--repeat \d+ with \d+ requests a run or --repeat \d+ with", said)
    # Without --sweep, one load: not an "ab sweep: 1 concurrency steps".
    assert main(["ab", str(path), "--check"]) == 0
    text = capsys.readouterr().out
    assert "ab: concurrency 1 x 2 sides x 2 repeats = 4 runs, interleaved A B B A\n" in text
    assert main(["ab", str(path), "--memory-budget", "2GiB", "--check"]) == 2
    assert "give --sweep too" in capsys.readouterr().err


def test_check_says_a_draft_fault_is_skipped_where_the_sides_are_urls(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each run of a URL side skips a draft fault (no proxy in front of its draft): the
    check said nothing of it, and each run then warned once it had started."""
    path = tmp_path / "s.toml"
    path.write_text(
        'name = "s"\n[[sources]]\nkind = "inline"\nprompts = ["a"]\n'
        "[load]\nconcurrency = 1\nduration_s = 20\nwarmup_s = 0\n"
        '[[faults.events]]\nkind = "draft_down"\nat_s = 5\nduration_s = 3\n'
    )
    urls = ["--baseline", "http://127.0.0.1:9", "--candidate", "http://127.0.0.1:10"]
    assert main(["ab", str(path), *urls, "--check"]) == 0
    said = " ".join(capsys.readouterr().out.split())
    assert "(draft_down) will be skipped: no fault proxy in front of a draft" in said
    # The simulator's own sides have its draft behind loadtest's proxy: nothing skipped.
    sims = ["--baseline", "sim:none", "--candidate", "sim:spec"]
    path.write_text(path.read_text() + "[sim]\nspeculative = true\n")
    assert main(["ab", str(path), *sims, "--check"]) == 0
    assert "will be skipped" not in capsys.readouterr().out
