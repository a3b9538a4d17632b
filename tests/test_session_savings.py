"""What a candidate saved of replayed agent sessions: ``ab`` and ``compare``.

The shipped trace (``fixtures/otel-agent.jsonl``) is replayed by ``ab`` against the
built-in plain deployment and the built-in speculative one (a draft and a target
simulator), three runs a side, so the practical bar is ``--min-effect``'s (and the
saving, carried by the three long calls, has nine pairs of them). Drafts are
accepted more often than by default (0.95 a token, not 0.7): at the default, what
speculation saves on this trace moved with the machine's load (measured -81 to 187 ms a
session on a busy 2-core machine, where the draft's round trip per step is slow), too
near the noise for a test that must pass; the test is of the judgement, not the draft.
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
from tests.test_agent_trace import FIXTURE

LAG_MS = 250.0
"""Generous, as in test_agent_trace: the driver's lag on a shared machine."""


@pytest.fixture(scope="module")
def ab_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("ab")
    scenario = tmp / "replay.toml"
    scenario.write_text(f'name = "replay"\n[[sources]]\nkind = "agent-trace"\npath = "{FIXTURE}"\n')
    config = SimConfig(accept_chat=0.95)
    plain, spec = SimProcess(config), SpecDeployment(config)
    try:
        baseline = plain.start()
        candidate, _ = spec.start()
        argv = ["ab", str(scenario), "--baseline", baseline, "--candidate", candidate]
        code = main([*argv, "--repeat", "3", "--out", str(tmp / "out"), "--no-tui", "-q"])
    finally:
        plain.stop()
        spec.stop()
    assert code == 0
    (folder,) = (tmp / "out").iterdir()
    return folder


def _savings(folder: Path) -> SessionSavings:
    c = orjson.loads((folder / "comparison.json").read_bytes())
    assert "agent_trace" in c
    s: SessionSavings = c["agent_trace"]
    return s


def test_speculation_saves_part_of_decode_and_ab_says_how_much(
    ab_folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = ab_folder
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


def test_two_runs_of_one_deployment_save_nothing_beyond_noise(
    ab_folder: Path,
) -> None:
    folder = ab_folder
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
