"""Comparisons of real runs against simulators: statistics, figures, equivalence, ab."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import cast

import orjson
import pytest

from loadtest.app.ab.runs import ab_order
from loadtest.app.ab.sides import Side, parse_side
from loadtest.app.engines.llama import LlamaOptions
from loadtest.app.engines.vllm import VllmOptions
from loadtest.cli.main import main
from loadtest.errors import ResultFileError, UsageError
from loadtest.model.comparison import Comparison
from loadtest.model.json import JsonObject
from loadtest.report.compare import compare_runs, load_run, render_comparison
from loadtest.report.compare_render import decision_line
from loadtest.sim import SimConfig
from loadtest.sim.process import SimProcess
from tests.test_cli import inline_scenario

BASE = SimConfig(ttft_ms=8.0, itl_ms=4.0, ttft_sigma=0.1, itl_sigma=0.1)


@pytest.fixture(scope="module")
def sims() -> Iterator[dict[str, str]]:
    """A baseline, a faster candidate, a candidate that changes 30% of answers, and a
    pair whose first tokens are slower, the second slower between tokens too."""
    procs = {
        "base": SimProcess(BASE),
        "fast": SimProcess(SimConfig(ttft_ms=8.0, itl_ms=2.0, ttft_sigma=0.1, itl_sigma=0.1)),
        "twin": SimProcess(BASE),
        # 50% slower between tokens than "steady", far beyond how far one run moves as a
        # whole (see test_a_fifty_percent_slower_candidate_is_called_slower_with_one_run_a_side).
        # Their first tokens come after 40 ms, not 8: a busy machine moved a run's 8 ms
        # TTFT p50 by 17% (1.4 ms), past the 15% bar, and called the slower side faster.
        "steady": SimProcess(SimConfig(ttft_ms=40.0, itl_ms=4.0, ttft_sigma=0.1, itl_sigma=0.1)),
        "slow": SimProcess(SimConfig(ttft_ms=40.0, itl_ms=6.0, ttft_sigma=0.1, itl_sigma=0.1)),
        "buggy": SimProcess(
            SimConfig(ttft_ms=8.0, itl_ms=4.0, ttft_sigma=0.1, itl_sigma=0.1, diverge_rate=0.3)
        ),
    }
    try:
        yield {name: p.start() for name, p in procs.items()}
    finally:
        for p in procs.values():
            p.stop()


def _ab(
    tmp_path: Path, baseline: str, candidate: str, repeat: int = 1, *extra: str
) -> tuple[int, JsonObject]:
    scenario = inline_scenario(tmp_path, "requests = 40\n")
    (tmp_path / "quick.toml").write_text(
        scenario.read_text()
        .replace(
            'prompts = ["a", "b", "c"]',
            "prompts = " + str([f"prompt {i}" for i in range(12)]).replace("'", '"'),
        )
        .replace("max_tokens = 8", "max_tokens = 24")
    )
    out = tmp_path / "out"
    argv = ["ab", str(scenario), "--baseline", baseline, "--candidate", candidate]
    code = main([*argv, "--repeat", str(repeat), "--out", str(out), *extra])
    (folder,) = out.iterdir()
    return code, orjson.loads((folder / "comparison.json").read_bytes())


@pytest.fixture(scope="module")
def fast_ab(
    sims: dict[str, str], tmp_path_factory: pytest.TempPathFactory
) -> tuple[int, JsonObject, Path]:
    """One ``ab`` of the baseline against the faster candidate, read by three tests."""
    tmp = tmp_path_factory.mktemp("fast-ab")
    code, c = _ab(tmp, sims["base"], sims["fast"])
    (folder,) = (tmp / "out").iterdir()
    return code, c, folder


@pytest.mark.quiet  # the parallel pass once moved one side's TTFT p50 by 5.6 ms (11 -> 17)
def test_a_faster_candidate_is_called_faster_and_answers_the_same(
    fast_ab: tuple[int, JsonObject, Path],
) -> None:
    code, c, _ = fast_ab
    assert code == 0
    assert c["metrics"]["tpot_ms"]["verdict"] == "faster"
    assert c["metrics"]["tpot_ms"]["percentiles"]["p50"]["significant"] is True
    # Both sides plan the same TTFTs (one seed, same bodies), so any TTFT difference is
    # the machine's. Whether one run a side calls it is a 5%-level test (about 2 in 100
    # comparisons of identical runs, benchmarks/bench_compare_fpr.py), so no verdict is
    # asserted here: the false-positive rate of the statistics is checked seeded in
    # test_stats.py. What must hold every time: the one-run bar of 15% of A, and a
    # difference under half of A. Whole-run TTFT shifts measured by that bench: 95th
    # percentile 14.6%, so sd ~7.5%, largest 23% in 100 pairs; 50% is ~6.7 sd, far
    # below 1e-4 even with heavier tails. A bug that doubled TTFT on one side still fails.
    p50 = c["metrics"]["ttft_ms"]["percentiles"]["p50"]
    assert abs(p50["diff"]) < 0.5 * p50["a"], p50
    assert p50["threshold"] == pytest.approx(0.15 * p50["a"], rel=1e-3), p50
    eq = c["equivalence"]
    assert eq["match_rate"] == 1.0 and eq["prompts_compared"] >= 8 and eq["divergent"] == []
    assert c["a"]["completion_rate"] == c["b"]["completion_rate"] == 1.0
    # URLs: ab started nothing, so it says so instead of printing costs or a 0.
    for side in ("a", "b"):
        cost = c[side]["deployment_cost"]
        assert cost["note"] == "not measured: not a managed deployment"
        assert cost["rss_steady_mib"] is None and cost["energy_j_per_run"] is None
        assert c[side]["acceptance"] == []  # the simulator reports no draft counters
    assert c["memory_added"] is None


def test_a_managed_side_is_parsed_and_a_bad_one_named() -> None:
    assert parse_side(None, "--baseline") == Side(None)
    assert parse_side("http://127.0.0.1:1", "--baseline").url == "http://127.0.0.1:1"
    draft = parse_side("llama:draft:6", "--candidate")
    assert draft.url is None and draft.llama is not None
    assert (draft.llama.spec, draft.llama.draft_layers) == ("draft", 6)
    assert parse_side("llama:self", "--candidate").llama == LlamaOptions(spec="self")
    for bad in ("llama:eagle", "llama:self:6", "llama:draft:x", "llama:draft:0"):
        with pytest.raises(UsageError, match=r"--candidate|draft-layers"):
            parse_side(bad, "--candidate")
    assert main(["ab", "--candidate", "llama:eagle"]) == 2
    ngram = parse_side("vllm:ngram:5", "--candidate")
    assert ngram.url is None and ngram.llama is None and ngram.vllm is not None
    assert (ngram.vllm.spec, ngram.vllm.num_speculative_tokens) == ("ngram", 5)
    assert parse_side("vllm:none", "--baseline").vllm == VllmOptions()
    for bad in ("vllm:eagle", "vllm:none:3", "vllm:ngram:x", "vllm:ngram:0"):
        with pytest.raises(UsageError, match=r"--candidate|speculative-tokens"):
            parse_side(bad, "--candidate")


def test_a_fifty_percent_slower_candidate_is_called_slower_with_one_run_a_side(
    sims: dict[str, str], tmp_path: Path
) -> None:
    # Same seed, same bodies: every planned gap is exactly 1.5x the baseline's (6 vs 4 ms).
    # With a per-token client overhead d of 0.05-0.5 ms the measured TPOT ratio is
    # 2/(4+d) >= 44%. A pair's whole-run TPOT shift moved at most 8% in 100 bench pairs
    # (LONE_RUN_EFFECT's docstring), sd ~3%: 44% is ~10 sd above the 15% bar, so the call
    # fails far less than 1 in 10,000 runs. (At 20% slower the margin was ~1 sd: 1-5%.)
    _, c = _ab(tmp_path, sims["steady"], sims["slow"])
    assert c["min_effect"] == 0.15 and c["min_effect_asked"] == 0.02
    assert c["metrics"]["tpot_ms"]["verdict"] == "slower", c["metrics"]["tpot_ms"]
    text = render_comparison(cast(Comparison, c))
    assert "so a line needs |B-A| >= 15% of A" in text
    # The decision comes first, in one line, with the lines called and by how much.
    first = text.splitlines()[0]
    assert first.startswith("decision: B slower on ") and "tpot_ms p50 +" in first
    assert "faster" not in decision_line(cast(Comparison, c))


def test_identical_deployments_repeated_show_no_difference_and_their_spread(
    sims: dict[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, c = _ab(tmp_path, sims["base"], sims["twin"], 2)
    printed = capsys.readouterr().out
    # Each run's line gives its TTFT p50 as the comparison's "run by run" takes it: the
    # run's own HDR p50 (the lower middle value) was printed 0.5 ms off that figure.
    for side, letter in (("a", "A"), ("b", "B")):
        for i, v in enumerate(c["spread"][side]["ttft_ms"]["p50"]["runs"], 1):
            shown = re.search(rf"^{letter} {i}/2 \S+ +ok \d+  TTFT p50 ([\d.]+) ms", printed, re.M)
            assert shown is not None and shown.group(1) == f"{v:.1f}", (side, i, v, printed)
    assert code == 0  # verdicts do not set the exit code; blocking findings do
    assert len(c["a"]["runs"]) == len(c["b"]["runs"]) == 2
    assert (c["a"]["endpoint"], c["b"]["endpoint"]) == (sims["base"], sims["twin"])  # one each
    # Two runs a side: the bar is --min-effect as asked (2%), not the one-run floor.
    assert c["min_effect"] == c["min_effect_asked"] == 0.02
    spread = c["spread"]["a"]["tpot_ms"]["p50"]
    assert len(spread["runs"]) == 2 and spread["stdev"] >= 0
    # Said as a sentence: "run-to-run a tpot_ms p50" was printed before.
    runs = ", ".join(f"{v:.2f}" for v in spread["runs"])
    line = f"A's tpot_ms p50 run by run: {runs} (stdev {spread['stdev']:.2f})"
    assert line in render_comparison(cast(Comparison, c)).splitlines()
    # Identical sides differ only by the machine's timing, and at the 2% bar two runs a
    # side flag a line about 4% of the time (bench_compare_fpr: 2 of 50): a statistical
    # outcome, checked seeded in test_stats.py, so no verdict at 2% is asserted here.
    # Judged again at a 50% bar (same runs): whole-run shifts have sd ~7.5% (95th
    # percentile 14.6%, largest 23% in 100 bench pairs), so a call on identical sides is
    # ~6.7 sd away (< 1e-4). That bar only catches gross asymmetries (one side's figures
    # from another clock, unit or metric); the 50%-slower test shows a real one is called.
    (folder,) = (tmp_path / "out").iterdir()
    wide = compare_runs(
        [load_run(p) for p in sorted((folder / "baseline").iterdir())],
        [load_run(p) for p in sorted((folder / "candidate").iterdir())],
        min_effect=0.5,
    )
    for m in ("ttft_ms", "tpot_ms", "e2e_ms"):
        assert wide["metrics"][m]["verdict"] == "no detectable difference", (m, wide["metrics"][m])
    assert decision_line(wide).startswith("decision: no detectable difference: no line's B-A")


def test_divergent_answers_are_listed_and_fail_the_check(
    sims: dict[str, str], tmp_path: Path
) -> None:
    code, c = _ab(tmp_path, sims["base"], sims["buggy"])
    assert code == 1
    eq = c["equivalence"]
    assert 0 < len(eq["divergent"]) < eq["prompts_compared"]
    assert eq["match_rate"] < 1.0
    assert all("diverged" in d["b"] and "diverged" not in d["a"] for d in eq["divergent"])


def test_compare_reads_folders_of_runs(
    fast_ab: tuple[int, JsonObject, Path], tmp_path: Path
) -> None:
    _, c, folder = fast_ab
    again = compare_runs(
        [load_run(p) for p in (folder / "baseline").iterdir()],
        [load_run(p) for p in (folder / "candidate").iterdir()],
    )
    assert again["metrics"]["tpot_ms"]["verdict"] == c["metrics"]["tpot_ms"]["verdict"]
    text = render_comparison(again)
    n = c["equivalence"]["prompts_compared"]
    assert "tpot_ms" in text and "faster" in text and f"output equivalence: {n}/{n}" in text
    report = tmp_path / "c.json"
    code = main(
        ["compare", str(folder / "baseline"), str(folder / "candidate"), "--json", str(report)]
    )
    assert code == 0 and orjson.loads(report.read_bytes())["metrics"]


def test_ab_order_interleaves() -> None:
    assert ab_order(3) == [
        "baseline",
        "candidate",
        "candidate",
        "baseline",
        "baseline",
        "candidate",
    ]


def test_a_folder_without_a_summary_is_named(tmp_path: Path) -> None:
    with pytest.raises(ResultFileError, match=re.escape(f"{tmp_path}: no summary.json")):
        load_run(tmp_path)
    assert main(["compare", str(tmp_path), str(tmp_path)]) == 2


def test_the_html_report_gives_each_line_its_own_verdict_and_p_values_their_magnitude(
    fast_ab: tuple[int, JsonObject, Path],
) -> None:
    from loadtest.report.html import write_report

    _, c, folder = fast_ab
    page = write_report(folder).read_text()
    rows = [
        re.findall(r"<td>(.*?)</td>", row)
        for row in re.findall(r"<tr>(<td>[a-z0-9_]+_ms</td>.*?)</tr>", page)
    ]
    by_line = {(r[0], r[1]): r[7] for r in rows}
    for m, mc in c["metrics"].items():
        for p, d in mc["percentiles"].items():
            assert by_line[(m, p)] == d["verdict"], (m, p)
    # The rank test of a twice-as-fast decode is far below 0.0001: not printed as 0.
    assert c["metrics"]["tpot_ms"]["p_value"] < 1e-4
    assert {r[8] for r in rows if r[0] == "tpot_ms"} == {"&lt; 0.0001"}
