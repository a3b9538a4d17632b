"""Output files as plugins: loadtest's own written through the registry, in order, and
what an output may not do (name a folder, be made from what a run has not)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from loadtest.errors import UsageError
from loadtest.measure.recorders import Metrics
from loadtest.model.io import dump_summary
from loadtest.model.summary import Summary
from loadtest.report import build_summary, write_results
from loadtest.report.export import CSV, HGRM, SUMMARY, hgrm
from loadtest.report.outputs import (
    OutputFile,
    RunResults,
    check_output,
    rendered,
    write_outputs,
)
from tests.conftest import make_scenario


def _results() -> tuple[Summary, Metrics]:
    metrics = Metrics(closed_loop=True, t0_ns=0)
    for us in (18_000, 20_000, 30_000):
        metrics.total.hists["ttft_ms"].record_value(us)
    summary = build_summary(
        run_id="r",
        scenario=make_scenario({"mode": "closed", "concurrency": 1, "requests": 1}),
        endpoint="http://x",
        model="m",
        metrics=metrics,
        started_wall=0.0,
        duration_s=1.0,
        measured_s=1.0,
        interrupted=False,
        prompts={},
    )
    return summary, metrics


def test_the_runs_own_outputs_are_written_through_the_registry_summary_last(
    tmp_path: Path,
) -> None:
    summary, metrics = _results()
    written = write_results(tmp_path, summary, metrics)
    names = [p.name for p in written]
    assert names[-1] == "summary.json" and "summary.csv" in names
    # Only the metric that recorded a value has its table; the others are empty.
    assert [n for n in names if n.endswith(".hgrm")] == ["ttft_ms.hgrm"]
    assert (tmp_path / "ttft_ms.hgrm").read_bytes() == hgrm(metrics.total.hists["ttft_ms"], 1000.0)
    assert (tmp_path / "summary.json").read_bytes() == dump_summary(summary)
    csv = (tmp_path / "summary.csv").read_text().splitlines()
    assert csv[0].startswith("category,metric,count,min,mean,p50")
    assert any(row.startswith("all,ttft_ms,3,") for row in csv), csv
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(names)  # no temporary left


class _Output:
    made_from = frozenset({"summary"})

    def __init__(self, *files: str, name: str = "x.csv") -> None:
        self.files = files
        self.name = name

    def render(self, results: RunResults) -> Iterator[tuple[str, str]]:
        for f in self.files:
            yield f, results.summary["run"]["id"]


def test_an_output_writes_only_plain_names_in_the_run_folder(tmp_path: Path) -> None:
    summary, metrics = _results()
    results = RunResults(summary=summary, metrics=metrics)
    assert rendered("x", _Output("x.csv"), results, tmp_path) == [(tmp_path / "x.csv", "r")]
    for bad in ("../x.csv", "sub/x.csv", "", "..", str(tmp_path / "x.csv")):
        with pytest.raises(UsageError, match=r"the output 'x' names the file"):
            rendered("x", _Output("x.csv", bad), results, tmp_path)
    # What it writes is what it declares (a pattern for a family of files).
    with pytest.raises(UsageError, match=r"names the file 'y.csv', not what it declares"):
        rendered("x", _Output("y.csv"), results, tmp_path)
    family = _Output("a.part", "b.part", name="*.part")
    assert [p.name for p, _ in rendered("x", family, results, tmp_path)] == ["a.part", "b.part"]


def test_an_output_that_declares_no_output_or_an_unknown_part_is_refused() -> None:
    assert isinstance(check_output("x", _Output()), _Output)
    with pytest.raises(UsageError, match="declares no name, made_from and render"):
        check_output("'pkg:X' (x)", object())
    odd = _Output()
    odd.made_from = frozenset({"summary", "outcome"})
    with pytest.raises(
        UsageError, match=r"made from outcome: a run's results are blocks, metrics, summary"
    ):
        check_output("'pkg:X' (x)", odd)


class _Broken:
    name = "broken.txt"
    made_from = frozenset({"metrics"})

    def render(self, results: RunResults) -> Iterator[tuple[str, str]]:
        yield self.name, "half"
        raise KeyError("its own bug")


def test_an_output_that_fails_or_clashes_writes_nothing_and_the_folder_is_not_complete(
    tmp_path: Path,
) -> None:
    summary, metrics = _results()
    own: dict[str, OutputFile] = {"hgrm": HGRM, "summary_csv": CSV, "summary": SUMMARY}
    outputs: dict[str, OutputFile] = {
        **own,
        "broken": _Broken(),
        "claims": _Output("summary.csv", name="*.csv"),
    }
    with pytest.raises(UsageError) as err:
        write_outputs(tmp_path, summary, metrics, outputs)
    message = str(err.value)
    assert "summary.json not written" in message
    assert "the output 'broken' failed: KeyError: 'its own bug'" in message
    assert "summary.csv is named by the outputs 'claims', 'summary_csv'" in message
    assert "loadtest summarize" in message
    # The broken one wrote none of what it rendered; neither of the two naming
    # summary.csv wrote it; the rest did; summary.json, the mark of completeness, not.
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ttft_ms.hgrm"]
    # With the failing ones gone, the same call writes the folder whole.
    assert [p.name for p in write_outputs(tmp_path, summary, metrics, own)][-1] == "summary.json"
