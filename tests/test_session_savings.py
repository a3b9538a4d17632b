"""What a candidate saved of replayed agent sessions: ``ab`` and ``compare``.

The shipped trace (``fixtures/otel-agent.jsonl``) is replayed by ``ab`` against the
built-in plain deployment and the built-in speculative one (a draft and a target
simulator), three runs a side, so the practical bar is ``--min-effect``'s (and the
saving, carried by the three long calls, has nine pairs of them). Drafts are
accepted more often than by default (0.95 a token, not 0.7): at the default, what
speculation saves on this trace moved with the machine's load (measured -81 to 187 ms a
session on a busy 2-core machine, where the draft's round trip per step is slow), too
near the noise for a test that must pass; the test is of the judgement, not the draft.
The same ``ab`` with ``--workers 2`` (each run's sessions split over two processes,
merged) must say the same, and its runs set against the one-process runs too.
"""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from loadtest.cli.main import main
from loadtest.model.comparison import SessionSavings
from loadtest.report.compare import compare_runs, load_run, render_comparison
from loadtest.report.compare_sessions import session_savings
from loadtest.sim import SimConfig
from loadtest.sim.process import SimProcess, SpecDeployment
from tests.conftest import read_jsonl
from tests.test_agent_trace import FIXTURE

LAG_MS = 250.0
"""Generous, as in test_agent_trace: the driver's lag on a shared machine."""


def _ab(tmp: Path, *flags: str) -> Path:
    scenario = tmp / "replay.toml"
    scenario.write_text(f'name = "replay"\n[[sources]]\nkind = "agent-trace"\npath = "{FIXTURE}"\n')
    config = SimConfig(accept_chat=0.95)
    plain, spec = SimProcess(config), SpecDeployment(config)
    try:
        baseline = plain.start()
        candidate, _ = spec.start()
        argv = ["ab", str(scenario), "--baseline", baseline, "--candidate", candidate]
        code = main([*argv, "--repeat", "3", "--out", str(tmp / "out"), "--no-tui", "-q", *flags])
    finally:
        plain.stop()
        spec.stop()
    assert code == 0
    (folder,) = (tmp / "out").iterdir()
    return folder


@pytest.fixture(scope="module")
def ab_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _ab(tmp_path_factory.mktemp("ab"))


@pytest.fixture(scope="module")
def ab_workers(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The same ab, each run with two workers (sessions 0 and 2 on one, 1 on the other)."""
    folder = _ab(tmp_path_factory.mktemp("ab-workers"), "--workers", "2")
    for run in (*(folder / "baseline").iterdir(), *(folder / "candidate").iterdir()):
        assert {r["worker"] for r in read_jsonl(run / "requests.jsonl")} == {0, 1}
    return folder


def _savings(folder: Path) -> SessionSavings:
    c = orjson.loads((folder / "comparison.json").read_bytes())
    assert "agent_trace" in c
    s: SessionSavings = c["agent_trace"]
    return s


@pytest.mark.parametrize("side", ["ab_folder", "ab_workers"])
def test_speculation_saves_part_of_decode_and_ab_says_how_much(
    side: str, request: pytest.FixtureRequest, capsys: pytest.CaptureFixture[str]
) -> None:
    folder: Path = request.getfixturevalue(side)
    s = _savings(folder)
    a, b = s["a"], s["b"]
    # 12 calls, each replayed in the three runs of a side: 36 pairs.
    assert (s["paired"], s["paired_calls"], a["runs"], b["runs"]) == (3, 36, 3, 3)
    assert a["session_ms"] is not None and a["decode_ms"] is not None and a["ttft_ms"] is not None
    assert b["decode_ms"] is not None and b["session_ms"] is not None
    # Decode is what speculation shortens; the tools are replayed as recorded.
    assert b["decode_ms"] < a["decode_ms"]
    assert a["tools_ms"] == b["tools_ms"]
    assert s["possible_share"] == pytest.approx(a["decode_ms"] / a["session_ms"], abs=1e-3)
    assert s["possible_share"] is not None and 0 < s["possible_share"] < 1
    saved = s["saved_ms"]
    assert saved is not None and s["saved_share"] is not None and s["saved_of_possible"] is not None
    assert saved == pytest.approx(a["session_ms"] - b["session_ms"], abs=0.01)
    # No more than the model time: a faster model cannot shorten a tool.
    assert 0 < saved <= a["ttft_ms"] + a["decode_ms"] + LAG_MS
    assert s["saved_of_possible"] == pytest.approx(saved / a["decode_ms"], abs=1e-3)
    assert s["verdict"] == "saved", s
    assert s["ci_low_ms"] is not None and s["ci_low_ms"] > 0
    assert s["p_value"] is not None and s["p_value"] < 0.05
    main(["compare", str(folder / "baseline"), str(folder / "candidate")])
    text = capsys.readouterr().out
    assert "decode holds" in text and "of the possible): saved" in text


def test_one_process_runs_against_two_worker_runs_say_what_was_saved(
    ab_folder: Path, ab_workers: Path
) -> None:
    """compare pairs each session's calls however the runs split them: the plain
    deployment's one-process runs against the speculative one's two-worker runs, and the
    two-worker plain runs against the one-process plain runs."""
    runs = {
        (name, side): [load_run(p) for p in sorted((f / side).iterdir())]
        for name, f in (("one", ab_folder), ("two", ab_workers))
        for side in ("baseline", "candidate")
    }
    s = compare_runs(runs["one", "baseline"], runs["two", "candidate"]).get("agent_trace")
    assert s is not None and (s["paired"], s["paired_calls"]) == (3, 36)
    assert s["verdict"] == "saved", s
    assert s["a"]["tools_ms"] == s["b"]["tools_ms"]
    same = compare_runs(runs["two", "baseline"], runs["one", "baseline"]).get("agent_trace")
    assert same is not None and same["verdict"] == "within noise", same


@pytest.mark.parametrize("side", ["ab_folder", "ab_workers"])
def test_two_runs_of_one_deployment_save_nothing_beyond_noise(
    side: str, request: pytest.FixtureRequest
) -> None:
    folder: Path = request.getfixturevalue(side)
    first, second, _ = sorted((folder / "baseline").iterdir())
    c = compare_runs([load_run(first)], [load_run(second)])
    s = c.get("agent_trace")
    assert s is not None
    assert s["verdict"] == "within noise", s
    assert s["saved_ms"] is not None and s["threshold_ms"] is not None
    assert abs(s["saved_ms"]) < s["threshold_ms"]
    assert "within noise" in render_comparison(c)


def test_sessions_on_one_side_only_or_too_few_calls_cannot_be_told(
    ab_folder: Path,
) -> None:
    folder = ab_folder
    run = load_run(sorted((folder / "baseline").iterdir())[0])
    block = run.summary.get("agent_trace")
    assert block is not None
    only = session_savings([block], [None], run.trace_calls, {}, 0.02)
    assert only is not None and only["verdict"] == "cannot tell"
    assert "only A replayed" in only["reason"]
    few = dict(list(run.trace_calls.items())[:4])
    s = session_savings([block], [block], few, few, 0.02)
    assert s is not None and s["verdict"] == "cannot tell" and s["saved_ms"] == 0
    assert "fewer than 10" in s["reason"]
    assert session_savings([None], [None], {}, {}, 0.02) is None


def test_a_saving_within_noise_says_only_what_its_figures_show(ab_folder: Path) -> None:
    """It printed ``95% CI [4.7, 228.7], p 0.1045`` then "(p >= 0.05, the interval holds
    0 or the difference is under the threshold ...)" of an interval that held no 0.
    Calls whose differences put the interval above 0 at a p over 0.05 (10 pairs, one
    the other way), on the sessions of two runs of the plain deployment."""
    first, second, _ = sorted((ab_folder / "baseline").iterdir())
    a, b = (load_run(run).summary.get("agent_trace") for run in (first, second))
    diffs = (5.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, -2.0)
    calls_a = {f"t{i}#0": [100.0 + d] for i, d in enumerate(diffs)}
    calls_b = {f"t{i}#0": [100.0] for i in range(len(diffs))}
    s = session_savings([a], [b], calls_a, calls_b, min_effect=0.02)
    assert s is not None and s["verdict"] == "within noise", s
    low, high, p = s["ci_low_ms"], s["ci_high_ms"], s["p_value"]
    assert low is not None and high is not None and p is not None
    assert low > 0 and p >= 0.05  # the case of the report
    reason = s["reason"]
    assert ("interval holds 0" in reason) == (low <= 0 <= high), reason
    assert ("not under 0.05" in reason) == (p >= 0.05), reason
    assert s["saved_ms"] is not None and s["threshold_ms"] is not None
    under = abs(s["saved_ms"]) < s["threshold_ms"]
    assert ("under the threshold" in reason) == under, reason
