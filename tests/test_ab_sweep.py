"""``loadtest ab --sweep`` against real simulators: the decision, its file, its gate."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import orjson
import pytest
from jsonschema import Draft202012Validator

from loadtest.cli.main import main
from loadtest.model.decision import Decision
from loadtest.model.io import decision_schema_bytes, load_decision
from loadtest.sim import SimConfig
from loadtest.sim.load import crossover_batch, tokens_per_verify_step
from loadtest.sim.process import SimProcess, SpecDeployment

TWIN = SimConfig(ttft_ms=8.0, itl_ms=2.0, ttft_sigma=0.1, itl_sigma=0.1)


def scenario(tmp_path: Path, bound: str = "requests = 30", max_tokens: int = 16) -> Path:
    """One category of short chat prompts, with an SLO so that goodput is counted."""
    prompts = ", ".join(f'"prompt {i}"' for i in range(12))
    path = tmp_path / "sweep.toml"
    path.write_text(
        f'name = "sweep"\nmax_tokens = {max_tokens}\n'
        f'[[sources]]\nkind = "inline"\ncategory = "chat"\nprompts = [{prompts}]\n'
        f"[load]\nconcurrency = 1\n{bound}\nwarmup_s = 0\n"
        "[slo]\ne2e_ms.p99 = 10000\n"
    )
    return path


def only_decision(out: Path) -> Decision:
    (folder,) = out.iterdir()
    decision = load_decision(folder)  # through the model: the file is what it types
    Draft202012Validator(orjson.loads(decision_schema_bytes())).validate(
        orjson.loads((folder / "decision.json").read_bytes())
    )
    return decision


@pytest.fixture(scope="module")
def twins() -> Iterator[tuple[str, str]]:
    a, b = SimProcess(TWIN), SimProcess(TWIN)
    try:
        yield a.start(), b.start()
    finally:
        a.stop()
        b.stop()


def test_identical_sides_show_no_difference_at_every_step(
    twins: tuple[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    argv = ["ab", str(scenario(tmp_path)), "--baseline", twins[0], "--candidate", twins[1]]
    argv += ["--sweep", "concurrency=1,4", "--repeat", "2", "--out", str(out)]
    # Judged at a 50% bar. Both sides plan the same times (one seed, same bodies), so
    # what differs is the machine: whole-run shifts of a median have sd ~7.5%
    # (bench_compare_fpr: 95th percentile 14.6%, largest 23% in 100 pairs), and the
    # median of two runs a side moves less. A call at 50% is ~6.7 sd away per cell, and
    # with the 6 cells of this sweep (2 steps x e2e, TPOT, goodput) still far below
    # 1e-4. At the 2% bar the sweep's family-wise rate is the statistics' own 5%
    # (checked seeded in test_decision.py), too often for a live assertion.
    code = main([*argv, "--min-effect", "50", "--fail-on", "slower"])
    printed = capsys.readouterr().out
    assert code == 0, printed
    d = only_decision(out)
    assert d["loads"] == [1, 4] and d["repeat"] == 2 and d["min_effect"] == 0.5
    chat, mix = d["rows"]
    assert chat["category"] == "chat" and chat["deciding"] == ["e2e_ms", "tpot_ms"]
    assert [s["verdict"] for s in chat["steps"]] == ["no difference", "no difference"]
    assert chat["bracket"]["text"] == "no difference across the range"
    # Goodput: two runs a side, each run's own value, Welch's test.
    assert [s["verdict"] for s in mix["steps"]] == ["no difference", "no difference"]
    assert all(s["cells"][0]["p_value"] is not None for s in mix["steps"])
    gate = d.get("gate")
    assert gate is not None and gate["failed"] is False
    # The table as printed: both steps, both rows, the brackets.
    assert "c=1" in printed and "c=4" in printed and "no difference across the range" in printed
    # The folder's HTML report opens with the decision, its plot embedded.
    (folder,) = out.iterdir()
    assert main(["report", str(folder)]) == 0
    page = (folder / "report.html").read_text()
    assert "The decision, per category and concurrency" in page
    assert "no difference across the range" in page and "data:image/png;base64," in page
    assert (folder / "plots" / "decision.svg").exists()
    # Every step is an ab of its own: comparison.json and both sides' runs.
    for step in d["steps"]:
        folder = Path(step["folder"])
        assert (folder / "comparison.json").exists()
        assert len(list((folder / "baseline").iterdir())) == 2


def test_check_prints_the_plan_and_runs_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    path = scenario(tmp_path, "duration_s = 10")
    argv = ["ab", str(path), "--sweep", "concurrency=1,2,4", "--repeat", "3"]
    assert main([*argv, "--check", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "3 concurrency steps (1, 2, 4) x 2 sides x 3 repeats = 18 runs" in text
    assert "18 runs x 10 s (0 s warm-up + 10 s) = 3.0 min" in text
    assert not out.exists()


def test_the_gate_flags_are_checked(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = str(scenario(tmp_path))
    assert main(["ab", path, "--fail-on", "slower", "--check"]) == 2
    assert "--fail-on slower judges a sweep's decision" in capsys.readouterr().err
    argv = ["ab", path, "--sweep", "concurrency=1,2", "--fail-on", "slower"]
    assert main([*argv, "--operating-point", "concurrency=8", "--check"]) == 2
    assert "one of the sweep's steps (1,2)" in capsys.readouterr().err
    assert main(["ab", path, "--sweep", "load=1,2", "--check"]) == 2
    assert main(["run", path, "--fail-on", "slower", "--check"]) == 2  # ab's word only


# The designed crossover: a verify step carries spec_k + 1 tokens a sequence, and every
# token a step carries costs step_token_share of itl_ms (the simulator's load model), so
# the speculative side pays more per step as the batch grows.
SHARE, ACCEPT, K, VERIFY = 0.27, 0.9, 8, 1.15
LOADED = SimConfig(
    ttft_ms=5.0,
    itl_ms=8.0,
    ttft_sigma=0.1,
    itl_sigma=0.1,
    min_output_fraction=1.0,
    step_token_share=SHARE,
    accept_chat=ACCEPT,
    spec_k=K,
    verify_factor=VERIFY,
    draft_token_ms=0.1,
)


@contextmanager
def designed_crossover() -> Iterator[tuple[str, str]]:
    """A plain simulator and a speculative deployment of the designed crossover's
    settings: (baseline URL, candidate URL)."""
    plain, spec = SimProcess(LOADED), SpecDeployment(LOADED)
    try:
        baseline = plain.start()
        candidate, _ = spec.start()
        yield baseline, candidate
    finally:
        plain.stop()
        spec.stop()


def test_a_designed_crossover_lies_inside_the_reported_bracket(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Per token, a verify step of B sequences costs (VERIFY + s (B (K + 1) - 1)) / m and
    # plain decoding 1 + s (B - 1), m = 1 + p + ... + p^K tokens a verify step: equal at
    # B* = (m - VERIFY + s (1 - m)) / (s (K + 1 - m)).
    m = sum(ACCEPT**i for i in range(K + 1))
    designed = (m - VERIFY + SHARE * (1 - m)) / (SHARE * (K + 1 - m))
    assert m == pytest.approx(tokens_per_verify_step(ACCEPT, K))
    assert designed == pytest.approx(crossover_batch(ACCEPT, K, VERIFY, SHARE))
    assert 4 < designed < 5  # 4.6: the model says 0.54x plain at 1, 1.15x at 8
    out = tmp_path / "out"
    with designed_crossover() as (baseline, candidate):
        argv = ["ab", str(scenario(tmp_path, "duration_s = 2.5", 32)), "--out", str(out)]
        argv += ["--baseline", baseline, "--candidate", candidate, "--repeat", "2"]
        code = main([*argv, "--sweep", "concurrency=1,8", "--fail-on", "slower"])
    captured = capsys.readouterr()
    print(captured.out[captured.out.index("decision:") :])  # the table, for -s
    d = only_decision(out)
    chat = d["rows"][0]
    b = chat["bracket"]
    # Steps well either side of B*: the draft's own round trip per step (not in the
    # formula, ~5 ms here on a busy 2-core machine) moves the measured crossover below
    # B* (measured: -28% at 1, +0% at 2, +35% at 8), so a step at 2 or 4 could be
    # called slower on a busier machine and the bracket would then be the round trip's.
    faster_to, slower_from = b["faster_to"], b["slower_from"]
    assert (faster_to, slower_from) == (1, 8), captured.out
    assert faster_to is not None and slower_from is not None
    assert faster_to <= designed <= slower_from
    assert b["text"].startswith("faster up to 1 (e2e -"), b
    # Both ends called: the zero crossing interpolated between them (measured: ~4).
    assert b["crossover"] is not None and 1 < b["crossover"] < 8, b
    # --fail-on slower: the candidate is slower at 8, said on the closing line.
    assert code == 1
    assert "exit 1: concurrency 8: chat slower (e2e +" in captured.err
