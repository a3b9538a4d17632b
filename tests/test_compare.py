"""Comparisons of real runs against simulators: statistics, figures, equivalence, ab."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import cast

import orjson
import pytest

from loadtest.app.ab import ab_order
from loadtest.app.ab_sides import Side, parse_side
from loadtest.app.llama import LlamaOptions
from loadtest.cli.main import main
from loadtest.errors import UsageError
from loadtest.model.comparison import Comparison
from loadtest.model.json import JsonObject
from loadtest.report.compare import compare_runs, load_run, load_summary, render_comparison
from loadtest.sim import SimConfig
from loadtest.sim.process import SimProcess
from tests.test_cli import inline_scenario

BASE = SimConfig(ttft_ms=8.0, itl_ms=4.0, ttft_sigma=0.1, itl_sigma=0.1)


@pytest.fixture(scope="module")
def sims() -> Iterator[dict[str, str]]:
    """A baseline, a faster candidate, and a candidate that changes 30% of answers."""
    procs = {
        "base": SimProcess(BASE),
        "fast": SimProcess(SimConfig(ttft_ms=8.0, itl_ms=2.0, ttft_sigma=0.1, itl_sigma=0.1)),
        "twin": SimProcess(BASE),
        # 20% slower between tokens: beyond how far one run moves as a whole.
        "slow": SimProcess(SimConfig(ttft_ms=8.0, itl_ms=4.8, ttft_sigma=0.1, itl_sigma=0.1)),
        "buggy": SimProcess(
            SimConfig(ttft_ms=8.0, itl_ms=4.0, ttft_sigma=0.1, itl_sigma=0.1, diverge_rate=0.3)
        ),
    }
    try:
        yield {name: p.start() for name, p in procs.items()}
    finally:
        for p in procs.values():
            p.stop()


def _ab(tmp_path: Path, baseline: str, candidate: str, repeat: int = 1) -> tuple[int, JsonObject]:
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
    code = main([*argv, "--repeat", str(repeat), "--out", str(out)])
    (folder,) = out.iterdir()
    return code, orjson.loads((folder / "comparison.json").read_bytes())


def test_a_faster_candidate_is_called_faster_and_answers_the_same(
    sims: dict[str, str], tmp_path: Path
) -> None:
    code, c = _ab(tmp_path, sims["base"], sims["fast"])
    assert code == 0
    assert c["metrics"]["tpot_ms"]["verdict"] == "faster"
    assert c["metrics"]["tpot_ms"]["percentiles"]["p50"]["significant"] is True
    assert c["metrics"]["ttft_ms"]["verdict"] == "no detectable difference"
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


def test_a_twenty_percent_slower_candidate_is_called_slower_with_one_run_a_side(
    sims: dict[str, str], tmp_path: Path
) -> None:
    _, c = _ab(tmp_path, sims["base"], sims["slow"])
    assert c["min_effect"] == 0.15 and c["min_effect_asked"] == 0.02
    assert c["metrics"]["tpot_ms"]["verdict"] == "slower", c["metrics"]["tpot_ms"]
    assert "so a line needs |B-A| >= 15% of A" in render_comparison(cast(Comparison, c))


def test_identical_deployments_repeated_show_no_difference_and_their_spread(
    sims: dict[str, str], tmp_path: Path
) -> None:
    code, c = _ab(tmp_path, sims["base"], sims["twin"], repeat=2)
    assert code == 0
    assert len(c["a"]["runs"]) == len(c["b"]["runs"]) == 2
    for m in ("ttft_ms", "tpot_ms", "e2e_ms"):
        assert c["metrics"][m]["verdict"] == "no detectable difference", (m, c["metrics"][m])
    assert c["min_effect"] == 0.02  # two runs a side: --min-effect as asked
    spread = c["spread"]["a"]["tpot_ms"]["p50"]
    assert len(spread["runs"]) == 2 and spread["stdev"] >= 0


def test_divergent_answers_are_listed_and_fail_the_check(
    sims: dict[str, str], tmp_path: Path
) -> None:
    code, c = _ab(tmp_path, sims["base"], sims["buggy"])
    assert code == 1
    eq = c["equivalence"]
    assert 0 < len(eq["divergent"]) < eq["prompts_compared"]
    assert eq["match_rate"] < 1.0
    assert all("diverged" in d["b"] and "diverged" not in d["a"] for d in eq["divergent"])


def test_compare_reads_folders_of_runs(sims: dict[str, str], tmp_path: Path) -> None:
    _, c = _ab(tmp_path, sims["base"], sims["fast"])
    (folder,) = (tmp_path / "out").iterdir()
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
    with pytest.raises(UsageError, match=str(tmp_path / "summary.json")):
        load_summary(tmp_path)
    assert main(["compare", str(tmp_path), str(tmp_path)]) == 2


def test_the_html_report_gives_each_line_its_own_verdict_and_p_values_their_magnitude(
    sims: dict[str, str], tmp_path: Path
) -> None:
    from loadtest.report.html import write_report

    _, c = _ab(tmp_path, sims["base"], sims["fast"])
    (folder,) = (tmp_path / "out").iterdir()
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
