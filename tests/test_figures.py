"""The figures of the printed table and the files: units, wording, the counts shown."""

from __future__ import annotations

import re
from typing import cast

import pytest

from loadtest.measure.recorders import Metrics, new_histogram
from loadtest.measure.slo import SLOSpec, Threshold
from loadtest.model.summary import Summary
from loadtest.report import build_summary, render_table
from loadtest.report.export import hgrm
from tests.conftest import make_scenario


def _summary(stale: int | None = None, slo: SLOSpec | None = None) -> Summary:
    sc = make_scenario({"mode": "closed", "concurrency": 1, "requests": 1})
    if slo is not None:
        from dataclasses import replace

        sc = replace(sc, slo=slo)
    return build_summary(
        run_id="r",
        scenario=sc,
        endpoint="http://x",
        model="m",
        metrics=Metrics(closed_loop=True, t0_ns=0),
        started_wall=0.0,
        duration_s=1.0,
        measured_s=1.0,
        interrupted=False,
        prompts={},
        stale_retries=stale,
    )


def test_an_slo_with_no_data_says_so_instead_of_none() -> None:
    spec = SLOSpec((Threshold("ttft_ms", "p99", 2000.0), Threshold("error_rate", None, 0.01)))
    text = render_table(_summary(slo=spec))
    assert "None" not in text
    assert "SLO ttft_ms.p99 <= 2000: no data (0 measured requests ok), not exercised" in text
    # Nothing sent: no error rate to tell (it read "0 met", a gate passed on nothing).
    assert "SLO error_rate <= 0.01: no data (0 measured requests ok), not exercised" in text


def test_resent_stale_connections_are_shown_when_there_were_any() -> None:
    assert "stale" not in render_table(_summary(stale=0))
    assert "stale" not in render_table(_summary(stale=None))
    assert "resent on a stale connection 3" in render_table(_summary(stale=3))


def test_the_hgrm_footer_gives_mean_and_deviation_in_the_same_unit() -> None:
    h = new_histogram()
    for us in (18_000, 20_000, 22_000, 30_000):  # ms: 18, 20, 22, 30 -> sd ~4.6 ms
        h.record_value(us)
    text = hgrm(h, 1000.0).decode()
    m = re.search(r"Mean\s*=\s*([\d.]+), StdDeviation\s*=\s*([\d.]+)", text)
    assert m is not None
    mean, sd = float(m.group(1)), float(m.group(2))
    assert abs(mean - 22.5) < 0.1
    assert 4.0 < sd < 5.5, sd  # ms, like the mean (hdrh alone writes ~4580 µs)
    assert text.count("#[Mean") == 1 and "#[Max" in text


def test_an_interrupted_run_says_so_on_the_first_line() -> None:
    summary = _summary()
    # A run that completed something (one that did not opens with STOP: test_evidence).
    summary["requests"]["ok"] = summary["requests"]["measured_ok"] = 1
    assert render_table(summary).startswith("run r ")
    summary["run"]["interrupted"] = True
    first = render_table(summary).splitlines()[0]
    assert first.startswith("INTERRUPTED") and "1.0 s" in first


def test_plots_stop_where_the_sample_does_draw_limits_and_keep_legends_off_the_data() -> None:
    from loadtest.model.sweep import CapacityResult, SweepStep
    from loadtest.report.plots import capacity_figure, percentile_curve, percentile_figure

    h = new_histogram()
    for i in range(100):
        h.record_value(1000 + 100 * i)
    xs, _ = percentile_curve(h)
    # 100 values support percentiles up to 99 % (x = 100), not 99.999 %.
    assert max(xs) == pytest.approx(100.0) and len(xs) == 6
    h.record_value(20_000)  # 101 values: up to 1 - 1/101, past the 99 % point
    assert max(percentile_curve(h)[0]) == pytest.approx(101.0)
    fig = percentile_figure({"run": h}, "ttft_ms", {"ttft_ms.p95": 9.0, "e2e_ms.p99": 1.0})
    (ax,) = fig.axes
    limit_lines = [ln for ln in ax.get_lines() if str(ln.get_label()).startswith("SLO")]
    assert [ln.get_label() for ln in limit_lines] == ["SLO p95 9 ms"]

    def step(load: float, rps: float) -> SweepStep:
        row: dict[str, object] = {k: None for k in SweepStep.__annotations__}
        row.update(load=load, requests_per_s=rps, e2e_ms_p50=10 * load, ttft_ms_p50=load)
        row.update(ttft_ms_p95=2 * load, slo_met=True)
        return cast(SweepStep, row)

    result: CapacityResult = {
        "kind": "concurrency",
        "steps": [step(c, c * 0.9) for c in (1, 2, 4, 8)],
        "best_load": 8,
        "knee": None,
        "knee_tolerance": 0.5,
        "interrupted": False,
    }
    fig = capacity_figure(result, limits={"ttft_ms.p95": 12.0})
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()  # type: ignore[attr-defined]
    for ax in fig.axes:
        legend = ax.get_legend()
        assert legend is not None
        box, area = legend.get_window_extent(renderer), ax.get_window_extent(renderer)
        assert box.x0 >= area.x1  # beside the axes, over no point
        labels = [t.get_text() for t in ax.texts]
        assert labels == ["1", "2", "4", "8"]
        assert all(float(t.get_fontsize()) >= 9 for t in ax.texts)
    assert any(ln.get_label() == "SLO p95 12 ms" for ln in fig.axes[0].get_lines())


def test_an_slo_far_above_the_data_is_marked_at_the_edge_not_drawn() -> None:
    from loadtest.report.plots import slo_place

    assert slo_place(2000.0, 20.0, 50.0) == "above"
    assert slo_place(60.0, 20.0, 50.0) == "line"  # the data still fill most of the axis
    assert slo_place(30.0, 20.0, 50.0) == "line"
    assert slo_place(500.0, 2000.0, 5000.0) == "line"
    assert slo_place(5.0, 1000.0, 1100.0) == "below"


def test_ttft_plots_scale_to_their_data_and_say_where_an_off_scale_slo_is() -> None:
    from loadtest.model.sweep import CapacityResult, SweepStep
    from loadtest.report.plots import capacity_figure, percentile_figure

    h = new_histogram()
    for i in range(200):
        h.record_value(20_000 + 150 * i)  # 20-50 ms
    fig = percentile_figure({"run": h}, "ttft_ms", {"ttft_ms.p99": 2000.0})
    (ax,) = fig.axes
    assert ax.get_ylim()[1] < 100  # the curve fills the axis, not its bottom 2.5 %
    assert not [ln for ln in ax.get_lines() if str(ln.get_label()).startswith("SLO")]
    assert [t.get_text() for t in ax.texts] == ["SLO p99 2000 ms ↑"]
    near = percentile_figure({"run": h}, "ttft_ms", {"ttft_ms.p99": 60.0})
    (ax,) = near.axes
    assert ax.get_ylim()[1] >= 60 and not ax.texts
    assert [ln.get_label() for ln in ax.get_lines() if ln.get_label() == "SLO p99 60 ms"]

    def step(load: float) -> SweepStep:
        row: dict[str, object] = {k: None for k in SweepStep.__annotations__}
        row.update(load=load, requests_per_s=load, ttft_ms_p50=20 + load, ttft_ms_p95=25 + load)
        row.update(e2e_ms_p50=100 * load, slo_met=True)
        return cast(SweepStep, row)

    result: CapacityResult = {
        "kind": "concurrency",
        "steps": [step(c) for c in (1, 2, 4, 8)],
        "best_load": 8,
        "knee": None,
        "knee_tolerance": 0.5,
        "interrupted": False,
    }
    ttft, _ = capacity_figure(result, limits={"ttft_ms.p95": 500.0}).axes
    assert ttft.get_ylim()[1] < 50
    assert "SLO p95 500 ms ↑" in [t.get_text() for t in ttft.texts]
