"""Acceptance by draft position and over the run, against the speculative simulator:
the position figures derived from the stream agree with the server's own counters, a
steady run is not flagged, and a run whose acceptance collapses mid-run is."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from loadtest.cli.main import main
from loadtest.model.decision import AcceptanceInterval
from loadtest.report.acceptance_time import (
    PLAIN_STEPS,
    StepRecords,
    collapse,
    derived_positions,
    positions_said,
    side_acceptance,
)
from loadtest.report.compare import load_run
from loadtest.transport.outcome import step_tally
from tests.test_ab_sweep import only_decision

ACCEPT, K = 0.7, 4


def scenario(tmp_path: Path, extra: str = "", duration: float = 3.0) -> Path:
    prompts = ", ".join(f'"prompt {i}"' for i in range(8))
    path = tmp_path / "acc.toml"
    path.write_text(
        'name = "acc"\nmax_tokens = 48\n'
        f'[[sources]]\nkind = "inline"\ncategory = "chat"\nprompts = [{prompts}]\n'
        f"[load]\nconcurrency = 2\nduration_s = {duration}\nwarmup_s = 0\n"
        f"[sim]\nspeculative = true\nspec_k = {K}\naccept_chat = {ACCEPT}\nitl_ms = 10.0\n"
        "itl_sigma = 0.1\nmin_output_fraction = 1.0\n" + extra
    )
    return path


def test_a_steady_run_shows_positions_that_agree_with_the_server(tmp_path: Path) -> None:
    out = tmp_path / "out"
    # One chunk a token, as llama.cpp streams: the size of each step is on the stream.
    path = scenario(tmp_path, 'step_chunks = "burst"\n')
    assert main(["run", str(path), "--no-tui", "--out", str(out)]) == 0
    (folder,) = out.iterdir()
    run = load_run(folder)
    server = run.summary.get("server")
    assert server is not None
    counted = server.get("accepted_per_position")
    assert counted is not None and len(counted) == K
    derived = derived_positions(run.steps.tallies, K)
    # The same steps seen two ways: the server's counters and the stream's bursts.
    # The stream can split a burst on a busy machine (a pause over 1 ms), so allow 0.1.
    assert derived == pytest.approx(counted, abs=0.1), (derived, counted)
    # And both near the model's P(accepted at k) = p^k.
    assert derived == pytest.approx([ACCEPT**k for k in range(1, K + 1)], abs=0.12)
    a = side_acceptance(1, None, [(str(folder), run.steps, counted)])
    assert a["position_source"].startswith("server")
    assert len(a["runs"][0]["intervals"]) == 10
    assert a["collapsed"] is False and a["runs"][0]["collapse"] is None
    tps = a["tokens_per_step"]
    assert tps is not None and 2.0 < tps < 3.2  # model: 1 + .7 + .49 + .34 + .24 = 2.77


def test_a_collapse_mid_run_is_flagged_in_the_decision(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = scenario(tmp_path, "accept_collapse_after_s = 1.5\n", duration=3.5)
    out = tmp_path / "out"
    argv = ["ab", str(path), "--baseline", "sim:none", "--candidate", "sim:spec"]
    code = main([*argv, "--sweep", "concurrency=2", "--repeat", "1", "--out", str(out)])
    printed = capsys.readouterr().out
    assert code == 0, printed
    d = only_decision(out)
    acc = d.get("acceptance")
    assert acc is not None
    (cand,) = acc  # the candidate's, at the one load
    assert cand["collapsed"] is True and cand["load"] == 2
    said = cand["runs"][0]["collapse"]
    # Flagged where requests that straddle the collapse end (measured: 2.44 -> 1.31);
    # the requests wholly after it show the 1.0 token a step of no accepted draft.
    assert said is not None and said.startswith("acceptance collapsed at "), said
    # (An interval where no request ended has no figure; on a busy machine a read that
    # caught up merges two steps, so "about 1.0" is below 1.2, and reached.)
    tail = cand["runs"][0]["intervals"][-4:]
    late = [v for v in (i["tokens_per_step"] for i in tail) if v is not None]
    assert late and max(late) < 1.2 and min(late) < 1.05, late
    flat = " ".join(printed.split())  # the table wraps its lines where they run long
    assert "COLLAPSE: acceptance" in flat and "collapsed at" in flat
    # And at the top of the folder's HTML report, under the decision.
    (folder,) = out.iterdir()
    assert main(["report", str(folder)]) == 0
    page = (folder / "report.html").read_text()
    assert "Acceptance and memory of the candidate" in page and "COLLAPSE" in page
    # Positions: the server's counters (the simulator counts them as vLLM does).
    assert cand["position_source"].startswith("server") and len(cand["per_position"]) == K


def _interval(i: int, tps: float, steps: int = 50) -> AcceptanceInterval:
    return {"start_s": i * 0.5, "end_s": (i + 1) * 0.5, "steps": steps, "tokens_per_step": tps}


def test_the_collapse_rule() -> None:
    steady = [_interval(i, 2.6 + 0.1 * (i % 2)) for i in range(10)]
    assert collapse(steady) is None
    fell = [_interval(i, 2.6 if i < 5 else 1.02) for i in range(10)]
    assert collapse(fell) == "acceptance collapsed at 2.5-3.0 s: 2.60 -> 1.02 tokens a verify step"
    # Never paying is no collapse, and too few steps are not judged.
    assert collapse([_interval(i, 1.05) for i in range(10)]) is None
    assert collapse([_interval(i, 2.6 if i < 5 else 1.0, steps=5) for i in range(10)]) is None


def test_the_step_tally_leaves_the_prefill_token_out() -> None:
    ms = 1_000_000
    # prefill token at 0; steps of 3, 1 and 2 chunks (bursts 0.1 ms apart)
    chunks = [0, 20 * ms, 20 * ms + 100_000, 20 * ms + 200_000, 40 * ms, 60 * ms, 60 * ms + 1]
    assert step_tally(chunks) == (1, 1, 1)
    assert derived_positions([step_tally(chunks)], 2) == [0.6667, 0.3333]


def test_positions_not_measured_are_said_once_with_why() -> None:
    # With no streamed verify steps the source was itself "not measured (...)", and
    # both renderings wrapped it again: "not measured (not measured (...))".
    none = side_acceptance(4, K, [])
    assert positions_said(none) == "not measured (no streamed verify steps)"
    served = side_acceptance(4, K, [("run", StepRecords(), [0.7, 0.5])])
    # Nor "(from server (accepted per position over drafts))" and "(from derived: ... from
    # the tokens per verify step ...)": one phrase, no parenthesis inside another.
    said = "0.70 0.50 (server's counts: accepted at each position over drafts)"
    assert positions_said(served) == said
    steps = StepRecords(tallies=[(1, 1, 1)])  # verify steps of 1, 2 and 3 tokens
    derived = side_acceptance(4, 2, [("run", steps, None)])
    assert positions_said(derived) == (
        "0.67 0.33 (derived from the stream's tokens per verify step: P(step >= k + 1))"
    )


def test_a_side_that_drafts_nothing_gets_no_acceptance_by_position(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The side without speculation read "A by draft position: 0.01 0.01 0.01 0.01 0.00
    # (derived ...)": two one-token chunks read together, taken for an accepted draft.
    out = tmp_path / "out"
    argv = ["ab", str(scenario(tmp_path)), "--baseline", "sim:none", "--candidate", "sim:spec"]
    code = main([*argv, "--repeat", "1", "--out", str(out)])
    printed = capsys.readouterr().out
    assert code in (0, 1), printed  # 1: a verdict of ab's, never a crash
    (folder,) = out.iterdir()
    c = orjson.loads((folder / "comparison.json").read_bytes())
    plain, spec = c["a"]["acceptance_time"], c["b"]["acceptance_time"]
    assert plain is not None and spec is not None
    assert plain["per_position"] == [] and (plain["tokens_per_step"] or 1.0) < PLAIN_STEPS
    assert "tokens a verify step" in plain["position_source"]
    assert len(spec["per_position"]) == K and spec["position_source"].startswith("server")
    assert "A by draft position" not in printed and "B by draft position: " in printed


def test_a_known_draft_that_accepts_nothing_is_shown_and_an_unknown_side_is_not() -> None:
    # llama.cpp's n-gram draft on a short prompt: 1.00 tokens a verify step. That side
    # speculates (llama:ngram), so its near-zero acceptance is the finding; a side that
    # may draft nothing (a URL) is given no acceptance below PLAIN_STEPS.
    steps = StepRecords(tokens=[60], steps=[60], tallies=[(60,)])
    known = side_acceptance(1, 2, [("run", steps, None)], drafts=True)
    assert known["per_position"] == [0.0, 0.0] and known["position_source"].startswith("derived")
    unknown = side_acceptance(1, 2, [("run", steps, None)])
    assert unknown["per_position"] == [] and "cannot be told" in unknown["position_source"]
    plain = side_acceptance(1, None, [("run", steps, None)], drafts=False)
    assert plain["per_position"] == [] and plain["position_source"] == "the side does not speculate"
