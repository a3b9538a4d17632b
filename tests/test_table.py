"""The table printed at the end of a run, as an 80-column terminal shows it.

One real run against the simulator (BFCL tool calls and chat, a cancel window, a missed
SLO) gives the summary; its variations (a real model's endpoint, hour-long latencies, an
agent's many errors) are rendered from that summary.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import cast

import orjson
import pytest

from loadtest.engine.block_text import WIDTH
from loadtest.features.agent.block import render_agent
from loadtest.features.faults.block import render_faults
from loadtest.model.summary import AgentBlock, MetricStats, Summary
from loadtest.report.run_notes import corrected_counts_note
from loadtest.report.table import render_table
from tests.conftest import read_jsonl
from tests.test_cli import loadtest

_WIDE = """
name = "wide"
max_tokens = 16
seed = 3

[[sources]]
kind = "bfcl"
category = "tool-calls"
subsets = ["simple_python"]

[[sources]]
kind = "inline"
category = "chat"
prompts = ["a", "b", "c"]

[load]
concurrency = 4
duration_s = 2.5
warmup_s = 0

[slo]
ttft_ms.p95 = 1

[[faults.events]]
name = "cancel a third of the streams after two tokens"
kind = "cancel"
at_s = 0.5
duration_s = 1.0
fraction = 0.3
after_tokens = 2
settle_s = 0.3
"""


@pytest.fixture(scope="module")
def wide_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str, Path]:
    """stdout, stderr and the folder of one run of ``_WIDE`` against the simulator."""
    cwd = tmp_path_factory.mktemp("wide")
    (cwd / "wide.toml").write_text(_WIDE)
    # Relative paths, as a user types them: the results line is then short too.
    res = loadtest("run", "wide.toml", "--out", "out", "--no-tui", cwd=cwd)
    assert res.returncode == 1, res.stderr  # the SLO of 1 ms is missed
    (run_dir,) = (cwd / "out").iterdir()
    return res.stdout, res.stderr, run_dir


def _summary(run_dir: Path) -> Summary:
    return cast(Summary, orjson.loads((run_dir / "summary.json").read_bytes()))


def _too_wide(text: str) -> list[str]:
    return [line for line in text.splitlines() if len(line) > WIDTH]


def test_every_line_of_a_real_runs_results_fits_80_columns(
    wide_run: tuple[str, str, Path],
) -> None:
    out, _, _ = wide_run
    assert _too_wide(out) == []
    # What the width test stands on: every block was printed, categories and faults too.
    assert "latency (ms)" in out and "time to valid tool call" in out
    assert "\nfaults\n  cancel a third of the streams after two tokens" in out
    assert "SLO ttft_ms.p95 <= 1: " in out and "MISSED" in out
    assert "results: out/" in out


def test_hour_long_latencies_and_long_names_still_fit(wide_run: tuple[str, str, Path]) -> None:
    summary = _summary(wide_run[2])
    for stats in summary["metrics"].values():
        for stat in ("min", "mean", "p50", "p90", "p95", "p99", "p999", "max"):
            if stat in stats:
                stats[stat] = 98_765_432.1  # 27 hours, in ms
        stats["count"] = 12_345_678
    # A URL is never cut (it is copied from the terminal): 70 columns of one here.
    summary["run"]["endpoint"] = "https://" + "long-host-name." * 3 + "example.com:8443/v1"
    summary["requests"]["errors"] = {f"error_class_{i}": 1000 + i for i in range(8)}
    fault = summary["faults"][0]
    fault["name"] = "x" * 50
    fault["before"]["ttft_p95_ms"] = fault["during"]["ttft_p95_ms"] = 1_234_567.8
    fault["reason"] = "a reason " * 20
    text = render_table(summary) + render_faults(summary["faults"])
    assert _too_wide(text) == []
    assert "98765432" in text and "12345678" in text
    # A name-value group stays on one line when the line wraps.
    assert all(f"error_class_{i} {1000 + i}" in " ".join(text.split()) for i in range(8))


def test_against_the_simulator_the_tool_call_match_share_is_left_out_and_why(
    wide_run: tuple[str, str, Path],
) -> None:
    out, _, run_dir = wide_run
    summary = _summary(run_dir)
    tc = summary["tool_calls"]
    assert summary["run"].get("simulated") is True and tc["judged"] > 0
    line = next(line for line in out.splitlines() if line.startswith("tool calls:"))
    assert line == (
        f"tool calls: {tc['valid']}/{tc['responses_with_calls']} valid "
        "(no answer match: the simulator calls tools at random)"
    )
    # Against a real model's endpoint the share means something, and is shown.
    real = copy.deepcopy(summary)
    del real["run"]["simulated"]
    # Its /metrics page still names the simulator (a loadtest sim behind --endpoint).
    assert "match the expected answer" not in render_table(real)
    assert real["server"] is not None
    real["server"]["engine"] = "vllm"
    assert f"{tc['correct']}/{tc['judged']} match the expected answer" in render_table(real)
    # Prompts without expected answers: no share at all (it printed "0/0 match").
    real["tool_calls"]["judged"] = real["tool_calls"]["correct"] = 0
    assert "match" not in render_table(real)


def test_tokens_per_chunk_under_1_says_why_and_the_simulator_shows_the_cause(
    wide_run: tuple[str, str, Path],
) -> None:
    out, _, run_dir = wide_run
    summary = _summary(run_dir)
    assert summary["tokens_per_chunk"]["mean"] < 1
    assert "(under 1: some chunks held no token of the server's count" in out
    # The cause: the simulator sends a tool call's name in a chunk of its own, which its
    # usage does not count; chat answers have one token per counted chunk. The role,
    # finish and usage chunks carry no output and are not counted (chunks - token_chunks).
    by_category: dict[str, set[tuple[int, int]]] = {}
    for r in read_jsonl(run_dir / "requests.jsonl"):
        if r["outcome"] == "ok":
            gaps = (r["token_chunks"] - r["output_tokens"], r["chunks"] - r["token_chunks"])
            by_category.setdefault(r["category"], set()).add(gaps)
    assert by_category == {"tool-calls": {(1, 2)}, "chat": {(0, 2)}}
    # A figure of 1 or more has nothing to explain.
    summary["tokens_per_chunk"]["mean"] = 1.0
    assert "under 1" not in render_table(summary)


def test_the_run_ends_with_a_line_naming_why_it_exits_1(wide_run: tuple[str, str, Path]) -> None:
    _, err, run_dir = wide_run
    [check] = _summary(run_dir)["slo"]["checks"]
    assert check["value"] is not None
    assert err.splitlines()[-1] == (
        f"exit 1: SLO ttft_ms.p95 missed ({check['value']:.1f} ms > 1 ms)"
    )


def test_an_agents_block_fits_80_columns_with_many_errors() -> None:
    stats = {"count": 3, "mean": 12.5, "max": 24.0}
    agent = {
        "tasks": 12_345,
        "completed": 12_000,
        "completion_rate": 0.972,
        "failed": 300,
        "step_limit": 40,
        "cancelled": 5,
        "errors": {f"invalid_tool_call_kind_{i}": i for i in range(10)},
        "steps": stats,
        "retries": stats,
        "validity_rate": 0.95,
        "expected_match_rate": 0.42,
        "time_shares": {
            p: {"p50": 0.123, "p95": 0.456}
            for p in ("queue", "network", "reasoning", "generation", "validation", "retry", "tool")
        },
    }
    block = cast(AgentBlock, agent)
    text = render_agent(block)
    assert _too_wide(text) == []
    assert "calls matching the expected function: 42.0%" in text
    simulated = render_agent(block, simulated=True)
    assert "calls matching the expected function: not shown, the simulator calls at random" in (
        " ".join(simulated.split())
    )


def test_a_window_nothing_was_tried_in_shows_its_reason_and_no_figures(
    wide_run: tuple[str, str, Path],
) -> None:
    # "draft connections reset ... NOT_EXERCISED (nothing measured)" was printed with
    # "draft acceptance 0.62 / 0.62 / -" and "fallbacks 1" under it, figures that fell
    # in by chance (the next run of the seed said 0.48).
    out, _, run_dir = wide_run
    (window,) = _summary(run_dir)["faults"]
    assert window["verdict"] != "not_exercised" and "before/during/after" in out
    for word in ("not_exercised", "skipped"):
        untried = copy.deepcopy(window)
        untried["verdict"] = word
        untried["reason"] = "nothing measured: no request started in the window"
        text = render_faults([untried])
        assert f"{word.upper()}\n    nothing measured: no request started" in text
        # The heading, the window's line and its reason: nothing under them.
        assert "before/during/after" not in text and len(text.strip("\n").splitlines()) == 3


def test_a_corrected_figure_with_more_values_says_why() -> None:
    # tool_call_ms 89 beside tool_call_ms_corrected 90 was printed unexplained.
    same: dict[str, MetricStats] = {"ttft_ms": {"count": 5}, "ttft_ms_corrected": {"count": 5}}
    assert corrected_counts_note(same) is None
    more = same | {"e2e_ms": {"count": 197}, "e2e_ms_corrected": {"count": 365}}
    note = corrected_counts_note(more) or ""
    assert "365 against 197 for e2e_ms" in note and "closed loop" in note
    # The one that added none is named, beside it ("TTFT (corrected) 197" read as a
    # correction left out).
    assert "; ttft_ms adds none, no value of its being longer than a session's interval)" in note, (
        note
    )
    # A metric the table beside it does not print is not named (``ttfa_ms adds none``
    # stood under a table with no TTFA row).
    hidden = more | {"ttfa_ms": {"count": 197}, "ttfa_ms_corrected": {"count": 197}}
    assert "ttfa_ms" in (corrected_counts_note(hidden) or "")
    assert corrected_counts_note(hidden, shown=set(more)) == note
