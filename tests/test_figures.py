"""The figures of the printed table and the files: units, wording, the counts shown."""

from __future__ import annotations

import re

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
    assert "SLO ttft_ms.p99 <= 2000: no data (0 requests ok), not exercised" in text
    assert "SLO error_rate <= 0.01: 0 met" in text


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
    assert render_table(summary).startswith("run r ")
    summary["run"]["interrupted"] = True
    first = render_table(summary).splitlines()[0]
    assert first.startswith("INTERRUPTED") and "1.0 s" in first
