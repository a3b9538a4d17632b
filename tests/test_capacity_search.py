"""``sweep --search`` against the simulator with a designed capacity.

The simulator serves ``max_running = 3`` requests at once; a fourth waits for a slot,
about a whole request (32 tokens at 5 ms), so from concurrency 4 on some request's TTFT
is over 150 ms, while up to 3 none waits (TTFT ~5 ms). With ``ttft_ms.max = 80`` the
designed boundary is 3: the search must say "up to 3; fails from 4".
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.conftest import loadtest_here

SCENARIO = """
name = "cap"
max_tokens = 32
[[sources]]
kind = "inline"
prompts = ["a", "b", "c"]
[load]
concurrency = 1
duration_s = 1.5
warmup_s = 0.5
[slo]
ttft_ms.max = 80
[sim]
ttft_ms = 5.0
ttft_sigma = 0.05
itl_ms = 5.0
itl_sigma = 0.05
min_output_fraction = 1.0
max_running = 3
"""


def _search(tmp: Path, *flags: str) -> tuple[int, str, Any, Path]:
    scenario = tmp / "cap.toml"
    scenario.write_text(SCENARIO)
    argv = ["sweep", str(scenario), "--search", "concurrency=1..8", "--no-tui"]
    done = loadtest_here(*argv, "--out", str(tmp / "out"), *flags)
    folders = sorted((tmp / "out").iterdir())
    folder = folders[-1]
    result = json.loads((folder / "capacity.json").read_text())
    return done.returncode, done.stdout, result, folder


def test_the_search_finds_the_designed_capacity_and_confirms_its_edges(tmp_path: Path) -> None:
    code, out, result, folder = _search(tmp_path)
    assert code == 0, out
    assert result["bracket"] == {"passes": 3, "fails": 4, "low": 3, "high": 4, "closed": True}
    loads = [p["load"] for p in result["points"]]
    assert loads == [1, 2, 4, 3, 3, 4]  # probe, bisect, confirm both edges
    assert [p["plan"].split(":")[0].split(" ")[0] for p in result["points"]] == [
        "start",
        "probing",
        "probing",
        "bisecting",
        "confirming",
        "confirming",
    ]
    assert "meets the SLOs up to concurrency 3; fails from 4 (every run agrees)" in out
    (fit,) = result["fit"]
    assert fit["slo"] == "ttft_ms.max" and fit["crosses_at"] is not None
    # Every point is a whole run in its own folder.
    for p in result["points"]:
        assert (folder / p["run"] / "summary.json").exists()
    # The report draws it: the answer, a row per point, the margins' plot.
    done = loadtest_here("report", str(folder))
    assert done.returncode == 0, done.stderr
    page = (folder / "report.html").read_text()
    assert "Capacity search" in page and "fails from 4" in page
    assert page.count("confirming the bracket") == 2 and "data:image/png;base64" in page


def test_a_search_cut_short_resumes_to_the_same_answer(tmp_path: Path) -> None:
    code, out, first, folder = _search(tmp_path, "--budget", "3")
    assert code == 1  # no answer yet: a gate must not pass on it
    assert first["runs"] == 3 and not first["bracket"]["closed"]
    assert "cannot tell between concurrency 2 (met) and 4 (missed)" in out
    code, out, resumed, again = _search(tmp_path, "--resume", str(folder))
    assert code == 0 and again == folder
    assert resumed["bracket"]["passes"] == 3 and resumed["bracket"]["fails"] == 4
    assert [p["load"] for p in resumed["points"]] == [1, 2, 4, 3, 3, 4]


def test_a_search_needs_an_slo_and_says_so(tmp_path: Path) -> None:
    scenario = tmp_path / "none.toml"
    scenario.write_text(SCENARIO.replace("[slo]\nttft_ms.max = 80\n", ""))
    argv = ["sweep", str(scenario), "--search", "concurrency=1..2", "--no-tui"]
    done = loadtest_here(*argv, "--out", str(tmp_path / "out"))
    assert done.returncode == 2 and "--search looks for the largest load" in done.stderr
    done = loadtest_here("sweep", str(scenario), "--concurrency", "1", "--resume", "x")
    assert done.returncode == 2 and "--resume goes on with a --search" in done.stderr
