"""A side's deployment cost over its runs (report/compare_figures.py): pure, no engine.

The llama.cpp ``ab`` test starts each side once; how several managed starts of a side
add up is checked here on written-down runs."""

from __future__ import annotations

import pytest

from loadtest.model.comparison import DeploymentRun
from loadtest.report.compare_figures import NOT_MANAGED, deployment_side, memory_added


def _run(ready: float, rss: float, peak: float, energy: float | None) -> DeploymentRun:
    return {
        "deployment": "llama:self",
        "ready_s": ready,
        "first_token_s": ready + 0.5,
        "first_token_error": None,
        "rss_steady_mib": rss,
        "rss_peak_mib": peak,
        "rss_samples": 20,
        "energy_j": energy,
        "energy_source": None if energy is None else "rapl",
        "energy_reason": "no RAPL counters" if energy is None else None,
        "measured_s": 10.0,
    }


def test_two_starts_of_a_side_add_up_to_means_a_median_and_the_peak() -> None:
    side = deployment_side([_run(2.0, 300, 350, 40.0), _run(4.0, 320, 420, 60.0)], [100, 100])
    assert side["deployment"] == "llama:self" and side["note"] is None
    assert side["starts"] == 2
    assert side["ready_s"] == pytest.approx(3.0) and side["first_token_s"] == pytest.approx(3.5)
    assert side["rss_steady_mib"] == pytest.approx(310)  # the median of the runs
    assert side["rss_peak_mib"] == 420  # the highest any run reached
    assert side["energy_j_per_run"] == pytest.approx(50.0)
    assert side["energy_j_per_output_token"] == pytest.approx(0.5)  # 100 J over 200 tokens


def test_energy_known_for_only_some_runs_is_not_averaged() -> None:
    side = deployment_side([_run(2.0, 300, 350, 40.0), _run(2.0, 300, 350, None)], [50, 50])
    assert side["energy_j_per_run"] is None and side["energy_j_per_output_token"] is None
    assert side["energy"] == "no RAPL counters (read in 1 of 2 runs: not averaged)"


def test_a_side_with_no_managed_run_says_so_and_adds_no_memory() -> None:
    side = deployment_side([None, None], [10, 10])
    assert side["starts"] == 0 and side["note"] == NOT_MANAGED
    managed = deployment_side([_run(2.0, 300, 350, None)], [10])
    assert memory_added(side, managed) is None
    assert memory_added(managed, deployment_side([_run(2.0, 450, 500, None)], [10])) == 0.5
