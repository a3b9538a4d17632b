"""docs/metrics.md's catalogue defines every figure loadtest writes, and nothing else.

The result files of the whole suite are walked too (``tests/conftest.py``); here the
rows are held against the published schemas (every number or boolean a file may hold),
against the code's metric names and the printed table's labels, and the check itself is
shown to fail on a figure without a row.
"""

from __future__ import annotations

from pathlib import Path
from typing import cast, get_args

import msgspec
import orjson
import pytest

from loadtest.config.slo_table import SLO_METRICS
from loadtest.features.faults.block import fault_figures
from loadtest.model.comparison import Comparison
from loadtest.model.search import SearchResult
from loadtest.model.server_sweep import ServerSweepResult
from loadtest.model.stats import StatKey
from loadtest.model.sweep import CapacityResult
from loadtest.model.verdict import FaultVerdict
from loadtest.report.table import LATENCY_LABELS
from tests.catalogue import (
    FILES,
    METRICS_MD,
    SOURCES,
    catalogue,
    expanded,
    leaves,
    parse,
    pattern,
    schema_leaves,
    undefined,
)
from tests.test_rebuild import SCENARIO as REBUILD_SCENARIO

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "fixtures" / "runs" / "sample" / "summary.json"


def _schema(file: str) -> dict[str, object]:
    # summary.json and decision.json publish theirs; the sweep's and the comparison's
    # are generated from the same kind of typed model.
    published = {"summary.json": "summary.schema.json", "decision.json": "decision.schema.json"}
    if file in published:
        data: dict[str, object] = orjson.loads((ROOT / "docs" / published[file]).read_bytes())
        return data
    if file == "capacity.json":  # a grid's steps, or a search's points (sweep --search)
        (grid, search), defs = msgspec.json.schema_components([CapacityResult, SearchResult])
        return {"anyOf": [grid, search], "$defs": defs}
    if file == "server-sweep.json":
        return msgspec.json.schema(ServerSweepResult)
    return msgspec.json.schema(Comparison)


@pytest.mark.parametrize("file", FILES)
def test_every_figure_a_result_file_may_hold_has_a_row(file: str) -> None:
    paths = schema_leaves(_schema(file))
    # The walk found the file's figures, not an empty schema (server-sweep.json is small).
    assert len(paths) > (5 if file == "server-sweep.json" else 20)
    missing = undefined(file, paths, schema=True)
    assert not missing, f"docs/metrics.md defines no figure {file}: {missing}"


@pytest.mark.parametrize("file", FILES)
def test_no_row_defines_a_figure_that_does_not_exist(file: str) -> None:
    cat = catalogue()
    paths = ["\x1f".join(p) for p in schema_leaves(_schema(file))]
    stale = []
    for row in cat.of(file):
        if "**" in row.path:
            continue  # an open object (a plugin's own figures): the schema lists none
        for one in expanded(row.path):
            rx = pattern(one, cat.metric_names, schema=True)
            if not any(rx.fullmatch(p) for p in paths):
                stale.append(f"{row.path} ({one})")
    assert not stale, f"rows of {file} in docs/metrics.md that match no figure: {stale}"


def test_every_row_says_its_unit_source_window_and_resolution() -> None:
    cat = catalogue()
    assert {r.file for r in cat.rows} == set(FILES)
    for row in (*cat.rows, *cat.metrics):
        for col in ("printed as", "unit", "source", "window", "resolution", "definition"):
            assert row.cells[col], f"{row.file} {row.path}: no {col}"
        if "**" not in row.path:  # a plugin's figures are its plugin's to say
            sources = set(row.cells["source"].split(" or "))
            assert sources <= SOURCES, f"{row.path}: source {row.cells['source']!r}"
    paths = [(r.file, r.path) for r in cat.rows]
    assert len(paths) == len(set(paths)), "a path with two rows: defined twice"


def test_the_metric_names_are_the_ones_loadtest_records() -> None:
    # Every latency metric a summary's ``metrics`` can hold is one an SLO can name.
    assert sorted(catalogue().metric_names) == sorted(SLO_METRICS)


def test_the_statistics_block_lists_its_keys() -> None:
    text = METRICS_MD.read_text()
    section = text.split("### Statistics blocks", 1)[1].split("###", 1)[0]
    table = [line.split("|")[1].strip() for line in section.splitlines() if line.startswith("|")]
    assert [k.strip("`") for k in table[2:]] == list(get_args(StatKey))


def test_the_printed_table_names_each_metric_as_the_catalogue_does() -> None:
    rows = {r.path: r.cells["printed as"] for r in catalogue().metrics}
    for metric, label in LATENCY_LABELS.items():
        assert rows.get(metric) == label, (
            f"{metric}: printed as {label!r}, catalogue {rows.get(metric)!r}"
        )


def test_the_fault_figures_printed_by_name_are_in_the_catalogue() -> None:
    # The table prints a window's own figures as ``name value``: each name is a row.
    window: dict[str, object] = {
        k: 1 for k in ("injected_cancels", "settled_s", "time_to_ready_s", "fallbacks")
    }
    window |= {k: 1.0 for k in ("cancel_close_p50_ms", "time_to_first_token_s", "recovery_s")}
    window["caught_in_flight"] = 1
    names = {line.split()[0] for line in fault_figures(cast(FaultVerdict, window))}
    printed = {r.cells["printed as"] for r in catalogue().of("summary.json")}
    assert names and names <= printed


def test_a_figure_without_a_row_is_found() -> None:
    """The check can fail: a row taken out, or a metric no row names."""
    sample = orjson.loads(SAMPLE.read_bytes())
    paths = set(leaves(sample))
    assert not undefined("summary.json", paths)  # a summary an older loadtest wrote
    text = METRICS_MD.read_text()
    row = next(
        line for line in text.splitlines() if line.startswith("| `throughput.output_tokens` |")
    )
    less = parse(text.replace(row + "\n", ""))
    assert undefined("summary.json", paths, less) == ["throughput.output_tokens"]
    sample["metrics"]["prefill_ms"] = {"count": 1, "p50": 2.0}
    assert undefined("summary.json", set(leaves(sample))) == [
        "metrics.prefill_ms.count",
        "metrics.prefill_ms.p50",
    ]


DATA = ROOT / "loadtest" / "scenarios" / "data"
KINDS = {
    # A plain run with two categories, SLOs and goodput (test_rebuild's): the rebuild
    # reads its folder again.
    "run": REBUILD_SCENARIO,
    "agent": f"""
name = "catalogue-agent"
max_tokens = 16
[agent]
max_steps = 8
tool = "fixed"
tool_ms = 1
[[tasks]]
kind = "agent-jsonl"
path = "{DATA / "agent-sessions.jsonl"}"
category = "recorded"
[load]
concurrency = 2
duration_s = 1.5
[sim]
ttft_ms = 2.0
itl_ms = 0.5
agent_steps = 1
""",
    "agent-trace": f"""
name = "catalogue-agent-trace"
[[sources]]
kind = "agent-trace"
path = "{DATA / "agent-trace.jsonl"}"
[sim]
ttft_ms = 2.0
itl_ms = 0.5
""",
}
BLOCK = {"run": "slo", "agent": "agent", "agent-trace": "agent_trace"}


@pytest.mark.parametrize("kind", [*KINDS, "rebuilt"])
def test_a_summary_of_each_kind_holds_only_catalogued_figures(kind: str, tmp_path: Path) -> None:
    """A run, an agent run, a replay of agent sessions and a summary rebuilt after a
    kill, each made here, cheaply: the suite's other files write sweeps, comparisons and
    decisions under their tests' folders (test_sweep, test_compare, test_ab_sweep), but
    these kinds mostly in shared fixtures, which the per-test walk does not see."""
    from loadtest.cli.main import main

    scenario = tmp_path / "scenario.toml"
    scenario.write_text(KINDS.get(kind, KINDS["run"]))
    out = tmp_path / "out"
    assert main(["run", str(scenario), "--out", str(out), "--no-tui"]) == 0
    (folder,) = out.iterdir()
    if kind == "rebuilt":
        (folder / "summary.json").unlink()
        assert main(["summarize", str(folder)]) == 0
    summary = orjson.loads((folder / "summary.json").read_bytes())
    block = BLOCK.get(kind, "rebuilt")
    assert summary.get(block), f"a {kind} summary without its {block} block"
    assert summary["metrics"]["ttft_ms"]["count"] > 0
    assert not undefined("summary.json", set(leaves(summary)))
