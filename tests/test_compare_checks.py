"""Comparisons built to break the verdict: nothing measured, unlike loads, unlike caches."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import cast

import numpy as np
import orjson
import pytest

from loadtest.cli.main import main
from loadtest.model.summary import Summary
from loadtest.report.compare import (
    RunData,
    compare_runs,
    line_verdict,
    load_run,
    render_comparison,
)
from loadtest.report.compare_checks import CacheUse, LoadShape, SideCounts, findings
from loadtest.report.equivalence import equivalence, equivalence_failed
from loadtest.sim import SimConfig
from loadtest.sim.process import SimProcess
from tests.test_cli import inline_scenario

# One slot, 2.4 s per answer: twelve requests sent in a quarter second cannot finish.
OVERLOADED = SimConfig(ttft_ms=8.0, itl_ms=100.0, ttft_sigma=0.0, itl_sigma=0.0, max_running=1)


@pytest.fixture(scope="module")
def sims() -> Iterator[dict[str, str]]:
    procs = {
        "base": SimProcess(SimConfig(ttft_ms=8.0, itl_ms=4.0, ttft_sigma=0.1, itl_sigma=0.1)),
        "slot_a": SimProcess(OVERLOADED),
        "slot_b": SimProcess(OVERLOADED),
    }
    try:
        yield {name: p.start() for name, p in procs.items()}
    finally:
        for p in procs.values():
            p.stop()


def test_an_ab_that_measured_nothing_says_so_first_and_fails(
    sims: dict[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    scenario = inline_scenario(
        tmp_path, 'mode = "constant"\nrate = 50\ngrace_s = 0.2\n'
    ).read_text()
    path = tmp_path / "overload.toml"
    path.write_text(
        scenario.replace("concurrency = 4\n", "").replace("max_tokens = 8", "max_tokens = 24")
    )
    out = tmp_path / "out"
    argv = ["ab", str(path), "--baseline", sims["slot_a"], "--candidate", sims["slot_b"]]
    code = main([*argv, "--repeat", "2", "--requests", "12", "--out", str(out)])
    assert code != 0
    captured = capsys.readouterr()
    text = captured.out
    # One line per run, each saying it measured nothing; the comparison opens with what
    # it lacks, and the last line on stderr names why ab exits 1.
    runs = text.splitlines()[:4]
    assert [r[:5] for r in runs] == ["A 1/2", "B 1/2", "B 2/2", "A 2/2"], text
    assert all(" ok 0 " in r and "STOP: nothing measured" in r for r in runs), text
    comparison = text[text.index("STOP: A completed") :]
    assert captured.err.splitlines()[-1].startswith("exit 1: comparison: no completed requests")
    assert comparison.startswith("STOP: A completed no measured request (24 sent)"), text
    assert comparison.index("STOP:") < comparison.index("A (baseline)")
    # Its one-line decision, just before: it cannot tell, and why.
    before = text[: text.index("STOP: A completed")].splitlines()
    assert " ".join(before[4:]).startswith("decision: cannot tell: A completed no measured")
    assert "beyond what the endpoint serves" in text
    (folder,) = out.iterdir()
    c = orjson.loads((folder / "comparison.json").read_bytes())
    assert c["blocking"] is True
    assert {f["kind"] for f in c["findings"]} >= {"no completed requests", "beyond the endpoint"}
    assert all(m["verdict"] == "not exercised" for m in c["metrics"].values())


def test_compare_of_unlike_load_shapes_says_so_and_marks_verdicts_confounded(
    sims: dict[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    scenario = inline_scenario(tmp_path)
    for name, load in (("closed", ["--concurrency", "8"]), ("open", ["--rate", "50"])):
        argv = ["run", str(scenario), "--endpoint", sims["base"], "--requests", "40"]
        assert main([*argv, *load, "--no-tui", "--out", str(tmp_path / name)]) == 0
    capsys.readouterr()
    report = tmp_path / "c.json"
    code = main(
        ["compare", str(tmp_path / "closed"), str(tmp_path / "open"), "--json", str(report)]
    )
    assert code == 1
    text = capsys.readouterr().out
    # The decision in one line first, saying it is confounded; then the finding.
    lines = text.splitlines()
    # The decision wraps where its figures make it long: read as one line.
    flat = " ".join(text.split())
    assert lines[0].startswith("decision: ") and "(confounded: see the NOTE below)" in flat
    note = next(line for line in lines if line.startswith("NOTE: "))
    assert note.startswith("NOTE: load shapes differ (A: closed loop, concurrency 8;")
    assert "arrivals at 50 req/s" in note
    c = orjson.loads(report.read_bytes())
    assert c["confounded"] is True and c["blocking"] is False
    assert line_verdict(c, {"verdict": "slower"}) == "slower (confounded)"
    for line in text.splitlines():
        if line.rstrip().endswith(("faster", "slower")):
            pytest.fail(f"an unconfounded verdict under unlike loads: {line}")


def _side(name: str, cache: CacheUse, shape: LoadShape) -> SideCounts:
    values = {"ttft_ms": 50, "tpot_ms": 50, "e2e_ms": 50, "tool_call_ms": 0}
    return SideCounts(name, 50, 50, 0, values, (shape,), cache)


def test_sides_whose_prompt_caches_differ_are_flagged() -> None:
    shape = LoadShape("closed", 4, None)
    metrics = ("ttft_ms", "tpot_ms", "e2e_ms", "tool_call_ms")
    warm, cold = CacheUse(900, 100), CacheUse(0, 1000)
    (f,) = findings(_side("A", warm, shape), _side("B", cold, shape), metrics)
    assert f.kind == "prompt caches differ" and f.confounds and not f.blocking
    assert "90%" in f.message and "cache_prompt = false" in f.message
    assert findings(_side("A", warm, shape), _side("B", warm, shape), metrics) == []
    # An engine that reports nothing about its cache is not flagged.
    assert findings(_side("A", CacheUse(), shape), _side("B", cold, shape), metrics) == []


def _answers(name: str, answers: dict[str, list[str]]) -> RunData:
    samples = {m: np.asarray([], dtype=float) for m in ("ttft_ms", "tpot_ms", "e2e_ms")}
    return RunData(
        Path(name),
        cast(Summary, {}),  # equivalence reads no summary
        samples,
        outputs={p: set(d) for p, d in answers.items()},
        heads={p: d[0] for p, d in answers.items()},
        answered={p: len(d) for p, d in answers.items()},
    )


def test_divergence_the_baseline_has_itself_is_not_laid_on_the_candidate() -> None:
    # p1 the baseline itself answers two ways: the engine's own, not the candidate's.
    a = _answers("a", {"p0": ["x", "x"], "p1": ["y", "y2"], "p2": ["z", "z"]})
    same = _answers("b", {"p0": ["x"], "p1": ["y2"], "p2": ["z"]})
    eq = equivalence([a], [same])
    assert eq is not None
    assert eq["match_rate"] < 1.0 and eq["attributed"] == 0
    assert eq["own_divergence"]["a"] == {"prompts_repeated": 3, "divergent": 1, "rate": 0.3333}
    assert not equivalence_failed(eq)
    changed = _answers("b", {"p0": ["x"], "p1": ["y"], "p2": ["w"]})
    worse = equivalence([a], [changed])
    assert worse is not None and worse["attributed"] == 1
    # One of three prompts beyond a baseline that diverges on one of three: not beyond.
    assert not equivalence_failed(worse)
    steady = _answers("a", {"p0": ["x", "x"], "p1": ["y", "y"], "p2": ["z", "z"]})
    bad = equivalence([steady], [changed])
    assert bad is not None and bad["attributed"] == 1 and equivalence_failed(bad)


def test_compare_runs_refuses_a_min_effect_out_of_range(tmp_path: Path) -> None:
    from loadtest.errors import UsageError

    run = _answers("a", {})
    with pytest.raises(UsageError, match="min-effect"):
        compare_runs([run], [run], min_effect=1.5)
    assert render_comparison is not None and load_run is not None


def test_ab_says_which_prompt_cache_policy_both_sides_ran_under(
    sims: dict[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    scenario = inline_scenario(tmp_path, "requests = 12\n[sampling]\ncache_prompt = false\n")
    out = tmp_path / "out"
    argv = ["ab", str(scenario), "--baseline", sims["base"], "--candidate", sims["base"]]
    main([*argv, "--repeat", "1", "--out", str(out)])  # the policy is the same every run
    (folder,) = out.iterdir()
    c = orjson.loads((folder / "comparison.json").read_bytes())
    assert c["prompt_cache"] == "cache_prompt = false sent with every request"
    assert "prompt cache: cache_prompt = false" in capsys.readouterr().out


def test_a_sides_json_shape_is_its_figures_fields() -> None:
    # SideFigures is built once and written as SideJson: a field added to one and not the
    # other would drift silently between the computation and comparison.json.
    from dataclasses import fields

    from loadtest.model.comparison import SideJson
    from loadtest.report.compare_figures import SideFigures

    added_by_compare = {"deployment_cost", "acceptance", "acceptance_time"}  # not figures
    assert {f.name for f in fields(SideFigures)} == set(SideJson.__annotations__) - added_by_compare
