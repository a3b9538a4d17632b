"""The decision of ``ab --sweep`` from seeded draws (``report.decision``): pure, no runs."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import orjson
import pytest
from jsonschema import Draft202012Validator

from loadtest.app.ab.sweep import AbSweepPlan, gate, parse_operating_point, parse_sweep
from loadtest.engine.block_text import WIDTH
from loadtest.errors import UsageError
from loadtest.measure.stats import holm
from loadtest.model.io import decision_schema_bytes
from loadtest.report.decision import MIX, RunSamples, Step, decide, resamples_for
from loadtest.report.decision_render import render_decision


def _run(
    rng: np.random.Generator,
    median: float,
    n: int = 60,
    category: str = "chat",
    goodput: float | None = None,
    tool: bool = False,
) -> RunSamples:
    e2e = rng.lognormal(np.log(median), 0.1, n)
    values = {"e2e_ms": e2e, "tpot_ms": e2e / 20}
    if tool:
        values["tool_call_ms"] = e2e * 0.8
    return RunSamples({category: values}, {category: n}, goodput)


def _sweep(
    rng: np.random.Generator,
    effects: Sequence[float],
    *,
    runs: int = 2,
    loads: Sequence[float] = (1, 2, 4, 8),
    n: int = 60,
) -> list[Step]:
    steps = []
    for load, effect in zip(loads, effects, strict=True):
        base = 100.0 * (1 + load / 8)
        steps.append(
            Step(
                load,
                [_run(rng, base, n, goodput=10 + rng.normal(0, 0.2)) for _ in range(runs)],
                [
                    _run(rng, base * (1 + effect), n, goodput=10 + rng.normal(0, 0.2))
                    for _ in range(runs)
                ],
            )
        )
    return steps


def test_a_designed_crossover_is_bracketed_where_it_was_put() -> None:
    rng = np.random.default_rng(11)
    d = decide("concurrency", _sweep(rng, (-0.3, -0.15, 0.05, 0.25)), repeat=2, resamples=1000)
    (chat,) = [r for r in d["rows"] if r["category"] == "chat"]
    assert chat["deciding"] == ["e2e_ms", "tpot_ms"] and chat["rule"] == "text"
    assert [c["verdict"] for c in chat["steps"]][:2] == ["faster", "faster"]
    assert chat["steps"][3]["verdict"] == "slower"
    b = chat["bracket"]
    # The true effect crosses zero between 2 (-15%) and 4 (+5%): the bracket holds it.
    assert b["faster_to"] == 2 and b["slower_from"] in (4, 8)
    assert b["text"].startswith("faster up to 2 (e2e -1")
    if b["crossover"] is not None:
        assert 2 < b["crossover"] < 8
    # The family is every step x (e2e, TPOT, goodput), adjusted together: each cell's
    # p_holm is Holm's over all twelve p-values, not over its step's or its row's.
    cells = [c for r in d["rows"] for s in r["steps"] for c in s["cells"]]
    assert d["family_size"] == len(cells) == 4 * 3
    raw = [c["p_value"] for c in cells]
    expected = holm([p for p in raw if p is not None])
    assert len(expected) == len(raw)
    assert [c["p_holm"] for c in cells] == pytest.approx(expected, rel=1e-3)
    Draft202012Validator(orjson.loads(decision_schema_bytes())).validate(d)


def test_identical_sides_rarely_flag_any_cell_of_a_sweep() -> None:
    """The family-wise rate over a whole sweep: 2 steps x (e2e, TPOT, goodput)."""
    rng = np.random.default_rng(2026)
    flagged = 0
    for _ in range(10):
        steps = _sweep(rng, (0.0, 0.0), loads=(1, 8), n=30)
        d = decide("concurrency", steps, repeat=2, resamples=500)
        flagged += any(c["verdict"] in ("faster", "slower") for r in d["rows"] for c in r["steps"])
    # Holm holds the sweep's family-wise rate at 5% (0.5 of 10 expected); the seed fixes
    # the count. Were the streams to change, flagged ~ Binomial(10, 0.05), and P(X >= 5)
    # ~ 6e-5. (500 resamples: the smallest p-value, 2/501, times the 6 tests is 0.024,
    # under 5%, so a call is possible and the test can fail.) Measured over 20 such
    # sweeps: 0 flagged, and 1 unadjusted: two runs a side resampled is conservative,
    # so that the family spans the whole sweep is checked directly, in the
    # designed-crossover test.
    assert flagged <= 4, flagged


def test_tool_categories_decide_on_the_time_to_a_valid_call_and_one_run_cannot_tell_goodput() -> (
    None
):
    rng = np.random.default_rng(3)
    steps = [
        Step(
            load,
            [_run(rng, 100, category="tools", tool=True, goodput=5.0)],
            [_run(rng, 60, category="tools", tool=True, goodput=8.0)],
        )
        for load in (1, 2)
    ]
    d = decide("concurrency", steps, repeat=1)
    tools, mix = d["rows"]
    assert tools["deciding"] == ["tool_call_ms"] and tools["rule"] == "tool calls"
    # One run a side: the bar is the one-run 15%; a 40% faster call clears it.
    assert d["min_effect"] == 0.15
    assert [c["verdict"] for c in tools["steps"]] == ["faster", "faster"]
    assert tools["bracket"]["text"] == "faster across the range"
    assert mix["category"] == MIX
    cell = mix["steps"][0]["cells"][0]
    assert cell["verdict"] == "cannot tell" and "one run a side" in (cell["why"] or "")


def test_a_blocked_step_cannot_tell_and_leaves_the_family() -> None:
    rng = np.random.default_rng(5)
    steps = _sweep(rng, (-0.3, -0.3), loads=(1, 2))
    steps[1] = Step(2, steps[1].baseline, steps[1].candidate, blocked="B: no completed requests")
    d = decide("concurrency", steps, repeat=2, resamples=1000)
    chat = d["rows"][0]
    assert chat["steps"][1]["verdict"] == "cannot tell"
    assert chat["steps"][1]["cells"][0]["why"] == "B: no completed requests"
    assert chat["bracket"]["text"].endswith("cannot tell from 2")
    assert d["family_size"] == 3
    assert "cannot tell: B: no completed requests" in render_decision(d)


def test_the_table_fits_eighty_columns_for_five_steps() -> None:
    rng = np.random.default_rng(8)
    loads = (1, 2, 4, 8, 16)
    steps = _sweep(rng, (-0.6, -0.3, 0.0, 0.3, 1.5), loads=loads)
    long = [
        RunSamples(
            {"multilingual-and-more": dict(r.by_category["chat"])},
            {"multilingual-and-more": 60},
            None,
        )
        for r in steps[0].baseline
    ]
    steps[0] = Step(1, [*steps[0].baseline[:1], *long], steps[0].candidate)
    d = decide("concurrency", steps, repeat=2, resamples=1000)
    text = render_decision(d)
    assert max(len(line) for line in text.splitlines()) <= WIDTH, text
    assert "c=16" in text and "SLOWER" in text and "faster" in text


def test_the_gate_names_each_slower_cell_or_only_the_operating_point() -> None:
    rng = np.random.default_rng(13)
    d = decide("concurrency", _sweep(rng, (-0.3, 0.0, 0.3, 0.6)), repeat=2, resamples=1000)
    everywhere = gate(d, "slower", None)
    assert everywhere["failed"]
    assert any(r.startswith("concurrency 8: chat slower (e2e +") for r in everywhere["reasons"])
    assert not gate(d, "slower", 1)["failed"]
    assert gate(d, "slower", 8)["reasons"] == [
        r for r in everywhere["reasons"] if r.startswith("concurrency 8:")
    ]


def test_sweep_and_operating_point_flags_are_checked_with_their_names() -> None:
    assert parse_sweep("concurrency=1,2,4") == AbSweepPlan("concurrency", (1, 2, 4))
    assert parse_sweep("rate=0.5,2").steps == (0.5, 2)
    for bad, why in (
        ("conc=1,2", "expected concurrency=N"),
        ("concurrency=2,1", "--sweep concurrency=2,1: steps must increase"),
        ("concurrency=1,x", "'x' is not a number"),
    ):
        with pytest.raises(UsageError, match=why):
            parse_sweep(bad)
    plan = AbSweepPlan("concurrency", (1, 2, 4))
    assert parse_operating_point("concurrency=4", plan) == 4
    for bad in ("concurrency=3", "rate=4", "4"):
        with pytest.raises(
            UsageError, match=r"--operating-point .*one of the sweep's steps \(1,2,4\)"
        ):
            parse_operating_point(bad, plan)


def test_enough_resamples_for_the_family() -> None:
    assert resamples_for(12) == 2000
    # 50 tests: 2 / (R + 1) x 50 must stay under 5%.
    r = resamples_for(50)
    assert 2 / (r + 1) * 50 <= 0.025


def test_a_reasoning_category_decides_on_the_first_answer_token_and_the_answer() -> None:
    """Most of the baseline's requests reasoned: TTFA and the answer's own time decide,
    so a candidate that speeds the reasoning up and slows the answer down is said to
    disagree with itself (cannot tell), with both parts on the lines."""
    rng = np.random.default_rng(5)

    def run(think: float, answer: float) -> RunSamples:
        ttfa = rng.lognormal(np.log(think), 0.05, 40)
        ans = rng.lognormal(np.log(answer), 0.05, 40)
        values = {"e2e_ms": ttfa + ans, "tpot_ms": ans / 20, "ttfa_ms": ttfa, "answer_ms": ans}
        return RunSamples({"think": values}, {"think": 40}, None)

    steps = [
        Step(1, [run(100, 200) for _ in range(2)], [run(60, 200) for _ in range(2)]),
        Step(2, [run(100, 200) for _ in range(2)], [run(60, 300) for _ in range(2)]),
    ]
    d = decide("concurrency", steps, repeat=2, resamples=2000)
    (row,) = [r for r in d["rows"] if r["category"] == "think"]
    assert row["rule"] == "reasoning" and row["deciding"] == ["ttfa_ms", "answer_ms"]
    first, second = row["steps"]
    assert [c["verdict"] for c in first["cells"]] == ["faster", "no difference"]
    assert first["verdict"] == "faster"
    assert [c["verdict"] for c in second["cells"]] == ["faster", "slower"]
    assert second["verdict"] == "cannot tell"
    text = render_decision(d)
    assert "  TTFA " in text and "  answer " in text
