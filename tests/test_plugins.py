"""Third-party plugins run without editing loadtest: installed, found, used.

``tests/plugins/lines_source`` is a package as another project would ship it: a prompt
source kind (``lines``), a fault kind (``pause``), an output file
(``category_counts.csv``) and a summary block (``lines``). The test installs it into a folder
of its own (not into the environment the suite runs in) and runs scenarios naming its
kinds from a subprocess that sees that folder.
"""

from __future__ import annotations

import importlib.util
import os
import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import cast

import orjson
import pytest

from loadtest._compat.plugins import group_entry_points
from loadtest.config.arrivals import arrival_modes, arrival_process
from loadtest.config.scenario import parse_scenario
from loadtest.config.sources import source_kinds, source_plugin
from loadtest.engine.blocks import OMIT, SummaryBlock, block_plugin
from loadtest.errors import ResultFileError, ScenarioError
from loadtest.features.faults.kind import FaultEvent, FaultKind, fault_kind
from loadtest.features.faults.registry import fault_kinds
from loadtest.model.blocks import block_names, summary_type
from loadtest.model.io import run_requests
from loadtest.model.summary import Summary
from loadtest.model.verdict import FaultVerdict
from loadtest.report.outputs import COMPLETE, OutputFile, output_names, output_plugin
from tests.conftest import read_jsonl

ROOT = Path(__file__).resolve().parent.parent
PLUGIN = ROOT / "tests" / "plugins" / "lines_source"


def test_loadtests_own_kinds_are_registered_plugins() -> None:
    kinds = source_kinds()
    for kind in ("sharegpt", "bfcl", "humaneval", "jsonl", "inline", "synthetic", "trace"):
        assert kind in kinds
        plugin = source_plugin(kind)
        assert isinstance(plugin.keys, frozenset)
    assert source_plugin("jsonl").needs_path and not source_plugin("inline").needs_path


def test_an_unknown_kind_is_named_with_those_installed(tmp_path: Path) -> None:
    data = {"name": "x", "sources": [{"kind": "lines"}]}
    with pytest.raises(ScenarioError, match=r"sources\[0\]\.kind.*inline") as err:
        parse_scenario(data, str(tmp_path / "x.toml"))
    assert "lines" in str(err.value)


def test_loadtests_own_fault_kinds_are_registered_plugins() -> None:
    own = {"cancel", "idle", "restart", "hook", "draft_down", "draft_reset", "draft_latency"}
    assert own | {"draft_bandwidth", "draft_blackhole"} <= set(fault_kinds())
    for kind in fault_kinds():
        assert isinstance(fault_kind(kind), FaultKind)
    # Where each acts when scaled out, and what it needs, is the kind's own declaration.
    assert fault_kind("cancel").runs.in_load and fault_kind("idle").runs.in_load
    assert fault_kind("restart").runs.holds_load and fault_kind("restart").runs.needs_target
    assert not fault_kind("hook").runs.in_load and fault_kind("draft_down").runs.needs_proxy
    assert "latency_ms" in fault_kind("draft_latency").keys
    assert "latency_ms" not in fault_kind("draft_down").keys


def test_loadtests_own_entry_points_come_from_the_checkout_that_runs() -> None:
    # The venv's metadata may be an install of another checkout (older, or newer): the
    # kinds found are the ones this checkout's pyproject.toml lists, with its values.
    import tomllib

    own = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["entry-points"]
    groups = ("faults", "sources", "outputs", "blocks", "arrivals", "tables")
    for group in (f"loadtest.{g}" for g in groups):
        found = {ep.name: ep.value for ep in group_entry_points(group)}
        assert own[group].items() <= found.items(), group


def test_loadtests_own_output_files_are_registered_plugins_summary_last() -> None:
    names = output_names()
    assert {"hgrm", "summary_csv", "summary"} <= set(names)
    assert names[-1] == COMPLETE == "summary"  # the marker of a complete folder
    files = {output_plugin(n).name for n in names}
    assert {"*.hgrm", "summary.csv", "summary.json"} <= files
    for n in names:
        assert isinstance(output_plugin(n), OutputFile)
        assert output_plugin(n).made_from <= {"summary", "metrics", "blocks"}


def test_loadtests_own_summary_blocks_are_registered_plugins() -> None:
    names = block_names()
    own = {"agent", "agent_trace", "faults", "server", "multiturn", "workload"}
    assert own <= set(names)
    for name in names:
        assert isinstance(block_plugin(name), SummaryBlock)
    # What summary.json holds where a run had no part of a block (its bytes as before).
    assert block_plugin("faults").empty == [] and block_plugin("server").empty is None
    assert block_plugin("agent").empty is OMIT and block_plugin("agent_trace").empty is OMIT
    # Files of their own (written by the outputs of the same names), not summary keys.
    assert not block_plugin("multiturn").in_summary and not block_plugin("workload").in_summary
    assert {"multiturn.json", "workload.json"} <= {output_plugin(n).name for n in output_names()}
    # The model summary.json is read with: the typed Summary's own fields are the
    # registered blocks' models (summary_type refuses any that differ).
    fields = summary_type().__annotations__
    assert set(fields) == set(Summary.__annotations__)
    assert vars(summary_type())["__required_keys__"] == {
        "schema",
        "run",
        "requests",
        "metrics",
        "tokens_per_chunk",
        "throughput",
        "tool_calls",
        "by_category",
        "out_of_range_values",
        "slo",
    }


def test_an_unknown_fault_kind_is_named_with_those_installed(tmp_path: Path) -> None:
    data = {
        "name": "x",
        "sources": [{"kind": "inline", "prompts": ["a"]}],
        "faults": {"events": [{"kind": "pause", "at_s": 1, "duration_s": 1}]},
    }
    with pytest.raises(ScenarioError, match=r"faults\.events\[0\]\.kind.*cancel") as err:
        parse_scenario(data, str(tmp_path / "x.toml"))
    assert "pause" in str(err.value) and "x.toml" in str(err.value)


def test_the_plugin_kinds_own_rule_fails_a_window_it_was_broken_in(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The judge of the plugin, read from its file (this process has not installed it).
    spec = importlib.util.spec_from_file_location(
        "loadtest_lines_pause", PLUGIN / "loadtest_lines" / "pause.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)  # its dataclass looks itself up
    spec.loader.exec_module(module)
    pause = module.PAUSE
    assert isinstance(pause, FaultKind)
    ev = FaultEvent(kind="pause", at_s=1, duration_s=1)
    entry = cast(FaultVerdict, {"started_in_window": 3, "detail": {"sent_in_pause": 3}})
    assert pause.judge(ev, entry) == ("failed", "3 requests were sent inside the pause")
    entry["detail"] = {"sent_in_pause": 0}
    assert pause.judge(ev, entry) is None  # the shared judge then
    # Its figures are typed: a summary whose count is a string is refused, naming it.
    entry["detail"] = {"sent_in_pause": "3"}
    with pytest.raises(ResultFileError, match=r"PauseFigures: Expected `int`, got `str`"):
        pause.judge(ev, entry)


def _loadtest(
    installed: Path, cwd: Path, *args: str, python: tuple[str, str] = ("-m", "loadtest")
) -> subprocess.CompletedProcess[str]:
    """``loadtest ARGS`` (or ``python PYTHON ARGS``) in a process that sees the installed
    plugin package."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(installed), str(ROOT)]))
    return subprocess.run(
        [sys.executable, *python, *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=cwd,
    )


def _run(
    installed: Path, tmp_path: Path, scenario: str, *flags: str
) -> tuple[subprocess.CompletedProcess[str], Path]:
    """``loadtest run`` of ``scenario`` (its text) with ``flags``; the run's folder."""
    sc = tmp_path / "scenario.toml"
    sc.write_text(scenario)
    out = tmp_path / "out"
    res = _loadtest(installed, tmp_path, "run", str(sc), "--no-tui", "--out", str(out), *flags)
    (run_dir,) = out.iterdir()
    return res, run_dir


def test_a_plugin_source_is_found_and_its_own_keys_reach_it(
    installed: Path, tmp_path: Path
) -> None:
    prompts = tmp_path / "prompts.txt"
    prompts.write_text("first question\n\nsecond question\nthird question\n")
    sc = tmp_path / "p.toml"
    sc.write_text(
        'name = "p"\nmax_tokens = 8\nrecord_prompts = true\n'
        '[[sources]]\nkind = "lines"\ncategory = "mine"\npath = "prompts.txt"\n'
        'prefix = "Q: "\nlimit = 2\n'
        "[load]\nconcurrency = 2\nrequests = 6\n[sim]\nttft_ms = 2.0\nitl_ms = 1.0\n"
    )
    out = tmp_path / "out"
    res = _loadtest(installed, tmp_path, "run", str(sc), "--no-tui", "--out", str(out))
    assert res.returncode == 0, res.stderr[-3000:]
    (run_dir,) = out.iterdir()
    s = orjson.loads((run_dir / "summary.json").read_bytes())
    assert s["requests"]["ok"] == 6
    rows = read_jsonl(run_dir / "requests.jsonl")
    assert {r["category"] for r in rows} == {"mine"}
    assert {r["prompt_id"] for r in rows} <= {"line-0", "line-1"}
    sent = {m["content"] for r in rows for m in r["messages"]}
    assert sent <= {"Q: first question", "Q: second question"}, sent
    # A key the plugin does not declare is an error naming it, as for loadtest's kinds.
    sc.write_text(sc.read_text().replace('prefix = "Q: "', 'prefix = "Q: "\nsuffix = "?"'))
    res = _loadtest(installed, tmp_path, "run", str(sc), "--check")
    assert res.returncode == 2 and "suffix" in res.stderr, res.stderr[-1000:]


def test_a_plugin_kinds_typed_keys_reach_it_though_a_builtin_kind_has_one_so_named(
    installed: Path, tmp_path: Path
) -> None:
    # block_size is also a key of loadtest's trace kind: the lines kind's own parser reads
    # it into its own typed keys (a value loadtest dropped when it knew the name).
    (tmp_path / "prompts.txt").write_text("abcdefghij\nxy\n")
    scenario = (
        'name = "p"\nmax_tokens = 8\nrecord_prompts = true\n'
        '[[sources]]\nkind = "lines"\npath = "prompts.txt"\nblock_size = 4\n'
        "[load]\nconcurrency = 2\nrequests = 8\n[sim]\nttft_ms = 2.0\nitl_ms = 1.0\n"
    )
    res, run_dir = _run(installed, tmp_path, scenario)
    assert res.returncode == 0, res.stderr[-3000:]
    rows = read_jsonl(run_dir / "requests.jsonl")
    sent = {m["content"] for r in rows for m in r["messages"]}
    assert len(rows) == 8 and len(sent) >= 2
    assert sent <= {"abcd", "efgh", "ij", "xy"}, sent
    # Its parser's checks name the file, the table and the key.
    sc = tmp_path / "bad.toml"
    sc.write_text(scenario.replace("block_size = 4", "block_size = 0"))
    res = _loadtest(installed, tmp_path, "run", str(sc), "--check")
    assert res.returncode == 2, res.stderr[-1000:]
    assert "bad.toml: sources[0].block_size" in res.stderr, res.stderr[-1000:]


PAUSED = """name = "paused"
max_tokens = 8
seed = 3
[[sources]]
kind = "inline"
prompts = ["a", "b", "c"]
[load]
concurrency = 2
duration_s = 4.5
[sim]
ttft_ms = 20.0
itl_ms = 1.0
[[faults.events]]
name = "quiet"
kind = "pause"
at_s = 1.5
duration_s = 1.0
grace_ms = 100
"""


@pytest.mark.parametrize("workers", [1, 2])
def test_a_plugin_fault_kind_is_injected_in_every_worker_and_judged(
    installed: Path, tmp_path: Path, workers: int
) -> None:
    flags = ["--workers", str(workers)] if workers > 1 else []
    res, run_dir = _run(installed, tmp_path, PAUSED, *flags)
    assert res.returncode == 0, res.stderr[-3000:]
    s = orjson.loads((run_dir / "summary.json").read_bytes())
    rows = read_jsonl(run_dir / "requests.jsonl")
    assert s["requests"]["sent"] == len(rows) and s["requests"]["failed"] == 0
    assert {r.get("worker", 0) for r in rows} == set(range(workers))
    # Injected: no process sent a request inside the pause (beyond its grace), and each
    # sent some on both sides of it.
    assert not [r for r in rows if 1600 <= r["sent_ms"] < 2500], "sent inside the pause"
    for w in range(workers):
        mine = [r["sent_ms"] for r in rows if r.get("worker", 0) == w]
        assert min(mine) < 1500 and max(mine) >= 2500, (w, min(mine), max(mine))
    # Judged once, on the merged records, by the plugin's figures and rule.
    (window,) = s["faults"]
    assert window["kind"] == "pause" and window["name"] == "quiet"
    assert window["detail"]["sent_in_pause"] == 0
    assert window["detail"]["paused_s"] >= 0.95
    assert window["started_in_window"] <= 2 * workers  # only those caught by the grace
    # Not the plugin's "failed"; the shared judge compared latency around the window.
    assert window["verdict"] in ("held", "degraded"), window["reason"]
    # The printed table shows the plugin's own figures beside the shared ones.
    assert "sent_in_pause 0" in res.stdout, res.stdout[-2000:]
    assert window["before"]["ok"] >= 5 and window["after"]["ok"] >= 5


def test_a_plugin_fault_kinds_own_keys_are_checked_naming_file_table_and_key(
    installed: Path, tmp_path: Path
) -> None:
    for bad, key, problem in (
        ("grace_ms = 100", "grace = 1", "unknown key"),
        ("grace_ms = 100", "grace_ms = -1", "expected a number >= 0"),
        ("duration_s = 1.0", "duration_s = 0", "a pause needs a duration > 0"),
    ):
        sc = tmp_path / "bad.toml"
        sc.write_text(PAUSED.replace(bad, key))
        res = _loadtest(installed, tmp_path, "run", str(sc), "--check")
        name = key.split(" ")[0]
        assert res.returncode == 2, res.stderr[-1000:]
        assert f"bad.toml: faults.events[0].{name}: " in res.stderr, res.stderr[-1000:]
        assert problem in res.stderr, res.stderr[-1000:]


COUNTED = """name = "counted"
max_tokens = 8
seed = 5
[[sources]]
kind = "inline"
category = "alpha"
prompts = ["a", "b"]
[[sources]]
kind = "inline"
category = "beta"
weight = 0.5
prompts = ["c"]
[load]
concurrency = 2
requests = 12
[sim]
ttft_ms = 2.0
itl_ms = 1.0
"""


@pytest.mark.parametrize("workers", [1, 2])
def test_a_plugin_output_file_is_written_by_every_run_and_by_summarize(
    installed: Path, tmp_path: Path, workers: int
) -> None:
    flags = ["--workers", str(workers)] if workers > 1 else []
    res, run_dir = _run(installed, tmp_path, COUNTED, *flags)
    assert res.returncode == 0, res.stderr[-3000:]
    rows = read_jsonl(run_dir / "requests.jsonl")
    measured = {
        cat: sum(r["category"] == cat and r["outcome"] == "ok" and not r["warmup"] for r in rows)
        for cat in ("alpha", "beta")
    }
    assert measured["alpha"] and measured["beta"], measured

    def csv_text(alpha: int, beta: int) -> str:
        lines = ["category,prompts,measured", f"alpha,{alpha},{measured['alpha']}"]
        lines.append(f"beta,{beta},{measured['beta']}")
        return "".join(f"{line}\r\n" for line in lines)  # the csv module's line ends

    counts = run_dir / "category_counts.csv"
    assert counts.read_bytes().decode() == csv_text(2, 1)
    # Written through loadtest's writer: no temporary file left beside it.
    assert not list(run_dir.glob(".*.tmp"))
    # loadtest's own outputs are still written beside it, unchanged in kind.
    assert (run_dir / "summary.json").exists() and (run_dir / "summary.csv").exists()
    assert (run_dir / "e2e_ms.hgrm").exists()
    # A folder rebuilt by ``summarize`` gets every registered output too.
    (run_dir / "summary.json").unlink()
    counts.unlink()
    res = _loadtest(installed, tmp_path, "summarize", str(run_dir))
    assert res.returncode == 0, res.stderr[-3000:]
    assert counts.read_bytes().decode() == csv_text(2, 1)
    assert (run_dir / "summary.json").exists()


def test_an_output_that_fails_is_named_and_the_folder_is_not_marked_complete(
    installed: Path, tmp_path: Path
) -> None:
    res, run_dir = _run(installed, tmp_path, COUNTED.replace('"beta"', '"refused"'))
    assert res.returncode == 2, res.stderr[-3000:]
    assert "'category_counts' failed: ValueError" in res.stderr, res.stderr[-2000:]
    assert "Traceback" not in res.stderr
    # The others are written; summary.json, the mark of a complete folder, is not.
    assert (run_dir / "summary.csv").exists() and (run_dir / "e2e_ms.hgrm").exists()
    assert not (run_dir / "category_counts.csv").exists()
    assert not (run_dir / "summary.json").exists()


LINED = """name = "lined"
max_tokens = 8
seed = 9
[[sources]]
kind = "lines"
category = "mine"
path = "prompts.txt"
[lines]
label = "nightly"
""" + COUNTED[COUNTED.index("[load]") :]  # the same load and simulator


@pytest.mark.parametrize("workers", [1, 2])
def test_a_plugin_summary_block_is_fed_merged_and_printed(
    installed: Path, tmp_path: Path, workers: int
) -> None:
    (tmp_path / "prompts.txt").write_text("first\nsecond\nthird\n")
    flags = ["--workers", str(workers)] if workers > 1 else []
    res, run_dir = _run(installed, tmp_path, LINED, *flags)
    assert res.returncode == 0, res.stderr[-3000:]
    s = orjson.loads((run_dir / "summary.json").read_bytes())
    rows = read_jsonl(run_dir / "requests.jsonl")
    assert {r.get("worker", 0) for r in rows} == set(range(workers))
    by_prompt: dict[str, int] = {}
    for r in rows:
        by_prompt[r["prompt_id"]] = by_prompt.get(r["prompt_id"], 0) + 1
    ok = [r for r in rows if r["outcome"] == "ok"]
    # Fed by the plugin's hook in every process, merged once over the workers' parts,
    # with the merged metrics beside them.
    assert s["lines"] == {
        "sent": s["requests"]["sent"],
        "ok": len(ok),
        "output_tokens": sum(r["output_tokens"] for r in ok),
        "by_prompt": dict(sorted(by_prompt.items())),
        # From the plugin's own [lines] table, which its parser read and its hook found.
        "label": "nightly",
        "measured_ok": s["requests"]["measured_ok"],
    }
    assert s["lines"]["sent"] == len(rows) >= 12
    if workers > 1:  # each worker handed its own part back
        for w in range(workers):
            result = orjson.loads((run_dir / f"worker-{w}" / "result.json").read_bytes())
            (part,) = result["blocks"]["lines"]
            assert part["sent"] == sum(r["worker"] == w for r in rows) > 0
    # Printed after the table, as the plugin renders it.
    line = f"lines (nightly): {len(ok)}/{len(rows)} ok over {len(by_prompt)} lines"
    assert line in res.stdout, res.stdout[-2000:]
    # The block is part of the model summary.json is read with: it loads back typed,
    # and a value that breaks the plugin's model is named, file and field.
    check = (
        "import sys; from loadtest.model.io import load_summary\n"
        "print(load_summary(sys.argv[1])['lines']['by_prompt'])"
    )
    res = _python(installed, tmp_path, check, str(run_dir))
    assert res.returncode == 0 and res.stdout.strip() == str(dict(sorted(by_prompt.items())))
    s["lines"]["ok"] = "many"
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / ".invalid-on-purpose").touch()  # not for the suite's schema check
    (bad / "summary.json").write_bytes(orjson.dumps(s))
    res = _python(installed, tmp_path, check, str(bad))
    assert res.returncode != 0 and "$.lines.ok" in res.stderr, res.stderr[-2000:]


BUDGETED = """name = "budgeted"
max_tokens = 8
[[sources]]
kind = "inline"
prompts = ["a", "b", "c"]
[load]
concurrency = 4
duration_s = 60
[[load.stop]]
kind = "tokens"
budget = 400
[sim]
ttft_ms = 2.0
itl_ms = 1.0
"""


@pytest.mark.parametrize("workers", [1, 2])
def test_a_plugin_stop_rule_ends_the_load_in_every_process_without_failing_it(
    installed: Path, tmp_path: Path, workers: int
) -> None:
    res, run_dir = _run(installed, tmp_path, BUDGETED, "--workers", str(workers))
    assert res.returncode == 0, res.stderr[-3000:]  # a budget used up is a normal end
    s = orjson.loads((run_dir / "summary.json").read_bytes())
    stopped = s["stopped"]
    assert 1 <= len(stopped) <= workers, stopped
    part = -(-400 // workers)  # each process reads its part of the budget
    for fired in stopped:
        assert fired["rule"] == "tokens" and fired["fails"] is False
        read = int(fired["reason"].split()[1])
        assert read >= part and f"(budget {part})" in fired["reason"], fired
    assert not s["run"]["interrupted"] and s["run"]["duration_s"] < 60
    assert "STOPPED EARLY" in res.stdout and "tokens: " in res.stdout
    # Every request accounted: the ones in flight when the budget ran out too.
    req = s["requests"]
    assert sum(1 for _ in run_requests(run_dir)) == req["sent"] >= 400 // 8
    # Its own key is checked, naming file, table and key.
    res = _loadtest(
        installed,
        tmp_path,
        "run",
        str(_scenario_file(tmp_path, BUDGETED.replace("budget = 400", "budget = 0"))),
        "--check",
    )
    assert res.returncode == 2 and "load.stop[0].budget" in res.stderr, res.stderr[-1000:]


def _scenario_file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "other.toml"
    path.write_text(text)
    return path


PULSED = """name = "pulsed"
max_tokens = 4
seed = 3
[[sources]]
kind = "inline"
prompts = ["a", "b", "c"]
[load]
mode = "pulses"
pulse = 3
rate = 40.0
requests = 24
[sim]
ttft_ms = 2.0
itl_ms = 1.0
"""


@pytest.mark.parametrize("workers", [1, 2])
def test_a_plugin_arrival_process_sends_its_plan_in_one_process_and_in_workers(
    installed: Path, tmp_path: Path, workers: int
) -> None:
    flags = ["--workers", str(workers)] if workers > 1 else []
    res, run_dir = _run(installed, tmp_path, PULSED, *flags)
    assert res.returncode == 0, res.stderr[-3000:]
    rows = read_jsonl(run_dir / "requests.jsonl")
    assert len(rows) == 24 and {r["outcome"] for r in rows} == {"ok"}
    # Pulses of 3 every 3/40 s = 75 ms: the plugin's plan, whole, however many processes
    # sent it (each worker kept every second arrival of the one plan).
    intended = sorted(r["intended_ms"] for r in rows)
    planned = [(k // 3) * 75.0 for k in range(24)]
    assert all(abs(a - b) < 1.0 for a, b in zip(intended, planned, strict=True)), intended
    if workers > 1:
        per_worker = [sum(r["worker"] == w for r in rows) for w in range(workers)]
        assert per_worker == [12, 12]
    s = orjson.loads((run_dir / "summary.json").read_bytes())
    assert s["run"]["load"]["mode"] == "pulses"
    assert s["run"]["load"]["arrival"] == {"pulse": 3}


def test_a_plugins_own_keys_and_table_are_checked_naming_file_table_and_key(
    installed: Path, tmp_path: Path
) -> None:
    for text, key, problem in (
        (PULSED.replace("pulse = 3", "pulse = 0"), "load.pulse", "a pulse is 1 or more"),
        (PULSED.replace("pulse = 3", "pulse = 2.5"), "load.pulse", "expected an integer"),
        (PULSED.replace("pulse = 3", "burstiness = 2"), "load.burstiness", "unknown key"),
        (PULSED + '[lines]\nlabl = "x"\n', "lines.labl", "unknown key"),
        (PULSED + "[lines]\nlabel = " + '"' + "x" * 41 + '"\n', "lines.label", "at most 40"),
        (PULSED + "[linez]\nlabel = 1\n", "linez", "unknown key"),
    ):
        sc = tmp_path / "bad.toml"
        sc.write_text(text)
        res = _loadtest(installed, tmp_path, "run", str(sc), "--check")
        assert res.returncode == 2, res.stderr[-1000:]
        assert f"bad.toml: {key}: " in res.stderr and problem in res.stderr, res.stderr[-1000:]


ORDERED = """name = "ordered"
max_tokens = 4
[[sources]]
kind = "ordered"
path = "prompts.txt"
[load]
concurrency = 2
[sim]
ttft_ms = 2.0
itl_ms = 1.0
"""


@pytest.mark.parametrize("workers", [1, 2])
def test_a_plugin_workload_runs_and_splits_as_it_declares(
    installed: Path, tmp_path: Path, workers: int
) -> None:
    (tmp_path / "prompts.txt").write_text("".join(f"question {i}\n" for i in range(11)))
    flags = ["--workers", str(workers)] if workers > 1 else []
    res, run_dir = _run(installed, tmp_path, ORDERED, *flags)
    assert res.returncode == 0, res.stderr[-3000:]
    rows = read_jsonl(run_dir / "requests.jsonl")
    # Every line once, whatever the split; each worker sent its own lines w, w+N, ...
    assert sorted(r["line"] for r in rows) == list(range(11))
    assert {r["outcome"] for r in rows} == {"ok"}
    for w in range(workers):
        mine = sorted(r["line"] for r in rows if r.get("worker", 0) == w)
        assert mine == list(range(w, 11, workers))
    s = orjson.loads((run_dir / "summary.json").read_bytes())
    assert s["requests"]["sent"] == 11
    check = _loadtest(installed, tmp_path, "run", str(tmp_path / "scenario.toml"), "--check")
    assert check.returncode == 0, check.stderr[-2000:]
    said = f"ordered {tmp_path / 'prompts.txt'}: 11 lines, each sent once, in order"
    assert said in check.stdout, check.stdout


def _python(installed: Path, cwd: Path, code: str, *args: str) -> subprocess.CompletedProcess[str]:
    """``python -c CODE ARGS`` in a process that sees the installed plugin package."""
    return _loadtest(installed, cwd, *args, python=("-c", code))


def test_a_plugin_summary_block_is_in_the_published_schema(installed: Path, tmp_path: Path) -> None:
    code = (
        "from loadtest.model.io import summary_schema_bytes\n"
        "import sys; sys.stdout.buffer.write(summary_schema_bytes())"
    )
    res = _python(installed, tmp_path, code)
    assert res.returncode == 0, res.stderr[-2000:]
    schema = orjson.loads(res.stdout)
    summary = schema["$defs"]["Summary"]
    assert summary["properties"]["lines"] == {"$ref": "#/$defs/LinesTally"}
    assert "lines" not in summary["required"]  # a run without a lines source has none
    tally = schema["$defs"]["LinesTally"]
    own = {"sent", "ok", "output_tokens", "by_prompt", "label", "measured_ok"}
    assert set(tally["required"]) == own
    assert tally["properties"]["by_prompt"]["additionalProperties"] == {"type": "integer"}
    # loadtest's own part of it is the schema it publishes without the plugin.
    del schema["$defs"]["LinesTally"]
    del summary["properties"]["lines"]
    published = orjson.loads((ROOT / "docs" / "summary.schema.json").read_bytes())
    assert schema == published


def test_every_registry_names_an_unknown_plugin_and_what_it_knows() -> None:
    """One lookup (``_compat.plugins.load_named``) behind every registry: a name nobody
    registered is an error of the registry's layer naming the kind, the name and the
    names that are registered."""
    from loadtest.errors import DatasetError, UsageError
    from loadtest.features.faults.registry import load_plugin
    from loadtest.model.blocks import load_block
    from loadtest.report.outputs import output_names, output_plugin

    cases: list[tuple[Callable[[], object], type[Exception], str, tuple[str, ...]]] = [
        (lambda: load_plugin("nosuch"), UsageError, "no fault kind 'nosuch'", fault_kinds()),
        (lambda: load_block("nosuch"), UsageError, "no summary block 'nosuch'", block_names()),
        (lambda: output_plugin("nosuch"), UsageError, "no output 'nosuch'", output_names()),
        (
            lambda: arrival_process("nosuch"),
            UsageError,
            "no arrival process 'nosuch'",
            arrival_modes(),
        ),
        (
            lambda: source_plugin("nosuch"),
            DatasetError,
            "no prompt source kind 'nosuch'",
            source_kinds(),
        ),
    ]
    for call, error, said, known in cases:
        with pytest.raises(error) as info:
            call()
        text = str(info.value)
        assert text.startswith(said + " is installed (known: "), text
        assert all(name in text for name in known), text


VIEWED = """name = "viewed"
max_tokens = 8
[[sources]]
kind = "inline"
prompts = ["a", "b", "c"]
[load]
concurrency = 3
duration_s = 3
warmup_s = 0.5
[sim]
ttft_ms = 5.0
itl_ms = 2.0
"""


@pytest.mark.parametrize("workers", [1, 2])
def test_a_plugin_live_output_has_its_flag_and_sees_the_run_go_and_end(
    installed: Path, tmp_path: Path, workers: int
) -> None:
    log = tmp_path / "views.jsonl"
    res, run_dir = _run(
        installed, tmp_path, VIEWED, "--workers", str(workers), "--view-log", str(log)
    )
    assert res.returncode == 0, res.stderr[-3000:]
    s = orjson.loads((run_dir / "summary.json").read_bytes())
    lines = [orjson.loads(line) for line in log.read_text().splitlines()]
    *going, last = lines
    # Seen while it went (about once a second), from every process's live.json merged...
    assert going and any(v["phase"] == "measuring" and v["sent"] > 0 for v in going)
    assert all(v["run"] == run_dir.name for v in lines)
    # ...and at its end, from the run's own metrics: the summary's count.
    assert (
        last["phase"] == "ended" and last["sent"] == last["summary_sent"] == s["requests"]["sent"]
    )
    assert last["series"] > 10  # it was handed the built families too
    # Its own check of its value, as a usage error naming its flag.
    res = _loadtest(installed, tmp_path, "run", "--requests", "1", "--view-log", "x.txt")
    assert res.returncode == 2 and "--view-log 'x.txt': name a .jsonl file" in res.stderr


_DASHBOARD = """
import asyncio, socket, sys, time
from pathlib import Path
from loadtest.app.process.inprocess import drive
from loadtest.config.scenario import load_scenario
from loadtest.datasets import build_pool
from loadtest.engine.blocks import block_hooks
from loadtest.engine.runner import RunConfig, Runner
from loadtest.sim import InProcessSim, SimConfig
from loadtest.tui import Dashboard, DashboardFeed
from loadtest.tui.sources import ReplaySource

async def live(run_dir: Path) -> None:
    sc = load_scenario(sys.argv[1])
    pool, _ = build_pool(sc)
    async with InProcessSim(SimConfig(ttft_ms=5.0, itl_ms=5.0)) as sim:
        config = RunConfig(scenario=sc, endpoint=sim.url, model="sim-llm", run_dir=run_dir)
        runner = Runner(config, pool, hooks=block_hooks(sc))  # as every run attaches them
        run_end, dashboard_end = socket.socketpair()
        app, feed = Dashboard(link=dashboard_end), DashboardFeed(run_end, 0.1)
        async with app.run_test(size=(120, 48)) as pilot:
            run = asyncio.create_task(drive(runner, feed))
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline:
                f = app.last_frame
                if f is not None and f.phase == "measuring" and f.panels and f.ok > 0:
                    break
                await pilot.pause(0.05)
            f = app.last_frame
            assert f is not None
            print("LIVE", f.phase, f.ok, list(f.panels))
            print("SHOWN", app.query_one("#blocks").display)
            await pilot.press("q")
            outcome = await run
        f = app.last_frame
        print("ENDED", f.phase, list(f.panels))
        print("SENT", outcome.metrics.sent, outcome.metrics.outcomes["ok"])

async def replay(run_dir: Path) -> None:
    app = Dashboard(ReplaySource(run_dir))
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause(0.5)
        print("REPLAY", list(app.last_frame.panels))
        print("SCREEN", "lines: " in app.export_screenshot().replace("&#160;", " "))

asyncio.run(live(Path(sys.argv[2])))
asyncio.run(replay(Path(sys.argv[3])))
"""


def test_a_plugin_summary_blocks_panel_is_on_the_dashboard_live_and_in_a_replay(
    installed: Path, tmp_path: Path
) -> None:
    (tmp_path / "prompts.txt").write_text("first\nsecond\nthird\n")
    res, finished = _run(installed, tmp_path, LINED)  # a finished run's folder to replay
    assert res.returncode == 0, res.stderr[-3000:]
    sc = tmp_path / "lined.toml"
    sc.write_text(LINED[: LINED.index("[load]")] + "[load]\nconcurrency = 2\nduration_s = 30\n")
    live_dir = tmp_path / "live"
    live_dir.mkdir()
    res = _python(installed, tmp_path, _DASHBOARD, str(sc), str(live_dir), str(finished))
    assert res.returncode == 0, res.stderr[-3000:]
    lines = {line.split(" ", 1)[0]: line for line in res.stdout.splitlines()}
    # While the run goes: the panel from the hook's parts so far, merged in the
    # dashboard's process by the plugin's own merge.
    assert lines["LIVE"].startswith("LIVE measuring "), res.stdout
    assert "'lines: " in lines["LIVE"] and "busiest line " in lines["LIVE"], res.stdout
    assert lines["SHOWN"] == "SHOWN True"
    # The last frame is the run's end: every request the run accounted.
    _, sent, ok = lines["SENT"].split()
    assert lines["ENDED"].startswith("ENDED ended "), res.stdout
    assert f"lines: {ok}/{sent} ok, " in lines["ENDED"], res.stdout
    # The replay of a finished folder shows the block of its summary.json.
    block = orjson.loads((finished / "summary.json").read_bytes())["lines"]
    final = f"lines: {block['ok']}/{block['sent']} ok, {block['output_tokens']} tokens"
    assert final in lines["REPLAY"] and lines["SCREEN"] == "SCREEN True", res.stdout


ANSWERED = """name = "answered"
max_tokens = 200
seed = 4
[[sources]]
kind = "inline"
prompts = ["a", "b", "c"]
[load]
concurrency = 2
requests = 12
[sim]
ttft_ms = 2.0
itl_ms = 1.0
"""


@pytest.mark.parametrize("workers", [1, 2])
def test_a_plugin_sweep_dimension_sets_each_steps_scenario_in_every_process(
    installed: Path, tmp_path: Path, workers: int
) -> None:
    sc = tmp_path / "answered.toml"
    sc.write_text(ANSWERED)
    out = tmp_path / "out"
    flags = ["--workers", str(workers)] if workers > 1 else []
    res = _loadtest(
        installed,
        tmp_path,
        "sweep",
        str(sc),
        "--sweep",
        "answer_tokens=3,24",
        "--no-tui",
        "--out",
        str(out),
        *flags,
    )
    assert res.returncode == 0, res.stderr[-3000:]
    assert "step 1/2: answer_tokens 3" in res.stdout and "step 2/2: answer_tokens 24" in res.stdout
    (folder,) = out.iterdir()
    capacity = orjson.loads((folder / "capacity.json").read_bytes())
    assert capacity["kind"] == "answer_tokens"
    assert [row["load"] for row in capacity["steps"]] == [3, 24]
    for step, asked in (("step-00-3", 3), ("step-01-24", 24)):
        rows = read_jsonl(folder / step / "requests.jsonl")
        ok = [r for r in rows if r["outcome"] == "ok"]
        assert len(rows) == 12 and len(ok) == 12, step
        # Every request of the step asked for the step's value, in every process: the
        # simulator's answers stop at it (the scenario's 200 gave 154-184 tokens).
        lengths = [r["output_tokens"] for r in ok]
        assert max(lengths) <= asked and (asked == 3 or max(lengths) > 3), (step, lengths)
        assert {r.get("worker", 0) for r in rows} == set(range(workers))
    # A value the dimension refuses is named by the plugin, before any load.
    res = _loadtest(
        installed,
        tmp_path,
        "sweep",
        str(sc),
        "--sweep",
        "answer_tokens=40000",
        "--no-tui",
        "--out",
        str(tmp_path / "refused"),
    )
    assert res.returncode == 2 and "answer_tokens 40000: at most 32768" in res.stderr
    res = _loadtest(installed, tmp_path, "sweep", str(sc), "--sweep", "answer_tokens=2.5")
    assert res.returncode == 2 and "'2.5' is not a whole number" in res.stderr


# ANSWERED's load, served by the side type's own server processes (no [sim] table).
SIDED = ANSWERED[: ANSWERED.index("[sim]")].replace("max_tokens = 200", "max_tokens = 16")


@pytest.mark.parametrize("workers", [1, 2])
def test_a_plugin_side_type_is_started_measured_and_stopped_for_every_run(
    installed: Path, tmp_path: Path, workers: int
) -> None:
    sc = tmp_path / "sided.toml"
    sc.write_text(SIDED)
    out = tmp_path / "out"
    flags = ["--workers", str(workers)] if workers > 1 else []
    argv = ["ab", str(sc), "--baseline", "simproc:slow", "--candidate", "simproc:fast"]
    res = _loadtest(installed, tmp_path, *argv, "--repeat", "1", "--out", str(out), *flags)
    assert res.returncode in (0, 1), res.stderr[-3000:]  # 1: a verdict, never a crash
    (folder,) = out.iterdir()
    c = orjson.loads((folder / "comparison.json").read_bytes())
    for side, given in (("a", "simproc:slow"), ("b", "simproc:fast")):
        # loadtest started the plugin's server for the run, timed its start, sampled its
        # memory and stopped it: the same record as for llama.cpp and vLLM.
        cost = c[side]["deployment_cost"]
        assert cost["deployment"] == given and cost["starts"] == 1, cost
        assert 0 < cost["ready_s"] <= cost["first_token_s"] < 60, cost
        assert 10 < cost["rss_steady_mib"] <= cost["rss_peak_mib"], cost
    # 8 ms a token against 1: the candidate's TPOT is far lower, as the plugin set it up.
    tpot = c["metrics"]["tpot_ms"]["percentiles"]["p50"]
    assert tpot["b"] < tpot["a"] / 3, tpot
    assert "a simulator process's start" in _loadtest(installed, tmp_path, *argv, "--check").stdout
    # A mode the plugin does not know is its own message, with the flag named; a NAME
    # no side type has is named with those installed.
    bad = _loadtest(installed, tmp_path, "ab", "--candidate", "simproc:medium", "--check")
    assert bad.returncode == 2 and "--candidate 'simproc:medium': a simproc side is" in bad.stderr
    bad = _loadtest(installed, tmp_path, "ab", "--candidate", "simpr:fast", "--check")
    assert bad.returncode == 2 and "known: llama, sim, simproc, vllm" in bad.stderr, bad.stderr


def test_a_plugin_side_type_takes_a_draft_length_and_a_server_setting(
    installed: Path, tmp_path: Path
) -> None:
    # --draft-max and --server-sweep were llama.cpp's, vLLM's and the simulator's only: a
    # side type now says whether it speculates, its draft length and its settings.
    sc = tmp_path / "sided.toml"
    sc.write_text(SIDED)
    out = tmp_path / "out"
    argv = ["ab", str(sc), "--baseline", "simproc:slow", "--candidate", "simproc:spec"]
    argv += ["--draft-max", "1,3", "--sweep", "concurrency=2", "--repeat", "1"]
    res = _loadtest(installed, tmp_path, *argv, "--out", str(out))
    assert res.returncode in (0, 1), res.stderr[-3000:]  # 1: a verdict, never a crash
    (folder,) = out.iterdir()
    d = orjson.loads((folder / "decision.json").read_bytes())
    draft = d["draft"]
    assert draft["values"] == [1, 3], draft
    assert draft["setting"] == "the simulator's spec_k (tokens the draft proposes per step)"
    # Each K's server drafted that many tokens a step: the simulator's own counts, by
    # position, have one position at K=1 and three at K=3.
    acc = d["acceptance"]
    assert [len(a["per_position"]) for a in acc] == [1, 3], acc
    assert all(a["position_source"].startswith("server") for a in acc), acc
    # A side that does not speculate has no draft length, and says what would.
    plain = ["ab", str(sc), "--baseline", "simproc:slow", "--candidate", "simproc:fast"]
    res = _loadtest(installed, tmp_path, *plain, "--draft-max", "2", "--sweep", "concurrency=1")
    assert res.returncode == 2 and "is not a speculative deployment ab starts" in res.stderr
    # --server-sweep checks the setting against the side type before any run.
    swept = [*plain, "--sweep", "concurrency=1", "--check", "--server-sweep"]
    res = _loadtest(installed, tmp_path, *swept, "threads=2")
    assert res.returncode == 2 and "threads=2: simproc sides take itl_ms" in res.stderr
    res = _loadtest(installed, tmp_path, *swept, "itl_ms=1,4")
    assert res.returncode == 0, res.stderr[-2000:]


_WORKERS_PANELS = """
import sys
from pathlib import Path
from loadtest.config.scenario import load_scenario
from loadtest.tui.workers_source import WorkersSource

import orjson

dirs = [Path(d) for d in sys.argv[2:]]
frame = WorkersSource(dirs, load_scenario(sys.argv[1]), "http://x", "m").frame("ttft_ms", "all")
parts = [orjson.loads((d / "live.json").read_bytes())["blocks"]["lines"] for d in dirs]
print("EACH", *(sum(p["ok"] for p in ps) for ps in parts))
print("PANELS", list(frame.panels))
"""


def test_a_plugin_summary_blocks_panel_is_on_the_dashboard_of_a_workers_run(
    installed: Path, tmp_path: Path
) -> None:
    # The dashboard of a --workers run reads each worker's live.json: it had no panels,
    # as the workers handed on their metrics only.
    (tmp_path / "prompts.txt").write_text("first\nsecond\nthird\n")
    timed = LINED.replace("requests = 12", "duration_s = 3")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    # A live output makes the workers write live.json, as the dashboard does.
    res, run_dir = _run(
        installed, tmp_path, timed, "--workers", "2", "--prometheus", f"127.0.0.1:{port}"
    )
    assert res.returncode == 0, res.stderr[-3000:]
    lives = sorted(p.parent for p in run_dir.rglob("live.json"))
    assert len(lives) == 2, lives
    res = _python(
        installed, tmp_path, _WORKERS_PANELS, str(tmp_path / "scenario.toml"), *map(str, lives)
    )
    assert res.returncode == 0, res.stderr[-3000:]
    lines = {line.split(" ", 1)[0]: line for line in res.stdout.splitlines()}
    each = [int(n) for n in lines["EACH"].split()[1:]]
    # Both workers' parts, merged by the block's own merge: its ok is the two added.
    assert len(each) == 2 and min(each) > 0, res.stdout
    assert f"'lines: {sum(each)}/" in lines["PANELS"], res.stdout
    assert "busiest line " in lines["PANELS"], res.stdout
