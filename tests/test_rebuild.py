"""Summaries rebuilt from a dead run's files: the same figures as the run's own summary.

A finished run's folder less its summary.json is what a run killed at its last line
leaves, so rebuilding it must give back the summary the run wrote (to the 0.1 µs the
lines are rounded to). The command line's killed-run test is in ``test_cli``.
"""

from __future__ import annotations

import calendar
import shutil
import time
from pathlib import Path

import orjson
import pytest

from loadtest.cli.main import main
from loadtest.errors import ResultFileError, UsageError
from loadtest.features.server_summary import served_by_simulator
from loadtest.measure.recorders import MetricSet
from loadtest.model.io import JsonLines
from loadtest.model.record import RequestRecord
from loadtest.model.summary import MetricStats, Summary
from loadtest.report.hlog import HlogWriter, read_hlog, read_intervals
from loadtest.report.rebuild import rebuild_summary, summary_of
from loadtest.report.summary import resolution_ms
from tests.conftest import read_jsonl

SCENARIO = """
name = "rebuild"
max_tokens = 12
[[sources]]
kind = "inline"
category = "chat"
prompts = ["a", "b", "c"]
[[sources]]
kind = "inline"
category = "code"
prompts = ["def f():", "class A:"]
[load]
concurrency = 4
requests = 80
warmup_s = 0.3
[sim]
ttft_ms = 5.0
itl_ms = 1.5
[slo]
ttft_ms.p95 = 5000
error_rate = 0.01
"""
DURATIONS = ("dispatch_lag_ms", "client_lag_ms", "write_ms", "ttft_ms", "e2e_ms", "tpot_ms")


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Two finished runs of the simulator, one with its chunk times recorded."""
    tmp = tmp_path_factory.mktemp("rebuild")
    scenario = tmp / "rebuild.toml"
    scenario.write_text(SCENARIO)
    runs = {}
    for name, extra in (("plain", []), ("chunks", ["--record-chunks"])):
        out = tmp / name
        assert main(["run", str(scenario), "--out", str(out), "--no-tui", *extra]) == 0
        (runs[name],) = out.iterdir()
    return runs


def _killed_copy(run: Path, tmp_path: Path) -> Path:
    """The folder as a run killed right after its last line leaves it."""
    folder = tmp_path / run.name
    shutil.copytree(run, folder, ignore=shutil.ignore_patterns("summary.*", "*.hgrm"))
    return folder


def _epoch(stamp: str) -> int:
    return calendar.timegm(time.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ"))


def _close(rebuilt: MetricStats, own: MetricStats, what: str) -> None:
    assert rebuilt["count"] == own["count"], what
    for key in ("min", "p50", "p90", "p99", "max", "mean"):
        if key in own:
            # A line keeps 0.1 µs: a value can land 1 µs off, in the next HDR bucket.
            tol = resolution_ms(own[key]) + 0.002
            assert rebuilt[key] == pytest.approx(own[key], abs=tol), (what, key)


@pytest.mark.parametrize("kind", ["plain", "chunks"])
def test_a_rebuilt_summary_is_the_summary_the_run_wrote(
    kind: str, finished: dict[str, Path], tmp_path: Path
) -> None:
    run = finished[kind]
    own: Summary = orjson.loads((run / "summary.json").read_bytes())
    folder = _killed_copy(run, tmp_path)
    s = rebuild_summary(folder).summary
    assert s["run"]["interrupted"] is True
    for key in ("scenario", "endpoint", "model", "load", "prompts", "seed"):
        assert s["run"][key] == own["run"][key], key
    # From the .hlog's header, which keeps the start to the ms: a start at .9995 s or
    # later is there as the next second.
    assert _epoch(s["run"]["started_at"]) - _epoch(own["run"]["started_at"]) in (0, 1)
    assert s["run"]["measured_s"] == pytest.approx(own["run"]["measured_s"], abs=0.002)
    mine = {k: v for k, v in s["requests"].items() if k != "resent_stale_connection"}
    assert mine == {k: v for k, v in own["requests"].items() if k != "resent_stale_connection"}
    assert "resent_stale_connection" not in s["requests"]  # unknown, not a zero
    for name, stats in own["metrics"].items():
        _close(s["metrics"][name], stats, name)
    for cat, block in own["by_category"].items():
        for name, stats in block["metrics"].items():
            if kind == "chunks" or name != "itl_ms":  # the log has no categories
                _close(s["by_category"][cat]["metrics"][name], stats, f"{cat} {name}")
    _close(s["tokens_per_chunk"], own["tokens_per_chunk"], "tokens_per_chunk")
    assert s["tool_calls"] == own["tool_calls"]
    assert [c["verdict"] for c in s["slo"]["checks"]] == [
        c["verdict"] for c in own["slo"]["checks"]
    ]
    assert s["slo"]["goodput"]["requests"] == own["slo"]["goodput"]["requests"]
    server, own_server = s.get("server"), own.get("server")
    assert server is not None and own_server is not None
    assert server["scraped"] == own_server["scraped"]
    # The simulator served it: run.json does not say so, its /metrics page did. A rebuilt
    # run of it once printed "0/11 match the expected answer" for its random tool calls.
    assert own["run"].get("simulated") is True and s["run"].get("simulated") is True
    assert s["decode_steps"] == own["decode_steps"]
    rebuilt = s["rebuilt"]
    assert rebuilt["lines"] == own["requests"]["sent"] and rebuilt["torn_lines"] == 0
    assert rebuilt["start_record"] is True
    assert rebuilt["from_hlog"] == ([] if kind == "chunks" else ["itl_ms", "tokens_per_chunk"])
    assert rebuilt["hlog_requests"] == own["requests"]["measured_ok"]


def test_a_rebuild_without_the_scrape_still_knows_the_simulator_served(
    finished: dict[str, Path], tmp_path: Path
) -> None:
    """With metrics.jsonl gone too, only run.json can say who answered: the rebuilt
    summary of a tool-call run printed "0/88 match the expected answer" of the
    simulator's random calls, where the whole folder says why none can match."""
    folder = _killed_copy(finished["plain"], tmp_path)
    (folder / "metrics.jsonl").unlink()
    s = rebuild_summary(folder).summary
    assert s.get("server") is None  # nothing scraped to tell it by
    assert s["run"].get("simulated") is True
    assert served_by_simulator(s)  # the table's "(no answer match: ...)"


def test_request_lines_read_back_as_their_records(finished: dict[str, Path]) -> None:
    rows = read_jsonl(finished["chunks"] / "requests.jsonl")
    for row in rows:
        again = RequestRecord.from_json(row).to_json(0)
        for key in (*DURATIONS, "tool_call_ms", "cancel_close_ms"):
            assert again[key] == row[key], key
        for key in ("intended_ms", "sent_ms", "first_token_ms", "end_ms"):
            # Rebuilt from the durations: one rounding step off at most.
            if row[key] is not None:
                assert again[key] == pytest.approx(row[key], abs=2e-4), key
        for key in ("outcome", "category", "warmup", "output_tokens", "token_chunks"):
            assert again[key] == row[key], key
    assert all(len(r["token_chunk_ms"]) == r["token_chunks"] for r in rows)


def test_json_lines_count_a_torn_last_line_and_name_a_bad_one(tmp_path: Path) -> None:
    path = tmp_path / "requests.jsonl"
    path.write_bytes(b'{"a": 1}\n\n{"a": 2}\n{"a": 3, "b"')
    lines = JsonLines(path)
    assert [r["a"] for r in lines] == [1, 2] and (lines.lines, lines.torn) == (2, 1)
    path.write_bytes(b'{"a": 1}\n{"a": 2}')  # cut just before its newline: whole
    lines = JsonLines(path)
    assert len(list(lines)) == 2 and lines.torn == 0
    path.write_bytes(b'{"a": 1}\n{"a": \n{"a": 3}\n')
    with pytest.raises(ResultFileError, match=r"requests\.jsonl:2: not a JSON line"):
        list(JsonLines(path))


def test_a_torn_last_line_is_counted_as_torn(finished: dict[str, Path], tmp_path: Path) -> None:
    folder = _killed_copy(finished["plain"], tmp_path)
    whole = len(read_jsonl(folder / "requests.jsonl"))
    with open(folder / "requests.jsonl", "ab") as f:
        f.write(b'{"index": 999, "prompt_id": "x", "sour')
    s = rebuild_summary(folder).summary
    assert s["rebuilt"]["torn_lines"] == 1
    assert s["rebuilt"]["lines"] == s["requests"]["sent"] == whole


def test_a_line_that_is_not_a_request_is_named(finished: dict[str, Path], tmp_path: Path) -> None:
    folder = _killed_copy(finished["plain"], tmp_path)
    rows = (folder / "requests.jsonl").read_bytes().splitlines(keepends=True)
    rows.insert(3, b'{"index": 1}\n')
    (folder / "requests.jsonl").write_bytes(b"".join(rows))
    with pytest.raises(ResultFileError, match=r"requests\.jsonl: line 4: not a request line"):
        rebuild_summary(folder)


def test_without_run_json_the_unknown_is_said_not_guessed(
    finished: dict[str, Path], tmp_path: Path
) -> None:
    folder = _killed_copy(finished["plain"], tmp_path)
    (folder / "run.json").unlink()
    s = summary_of(folder)  # on the fly: nothing written
    assert not (folder / "summary.json").exists()
    assert s["run"]["scenario"].startswith("unknown") and s["run"]["model"] == "unknown"
    assert s["run"]["started_at"].endswith("Z")  # from the hlog's header
    assert s["slo"]["checks"] == [] and s["rebuilt"]["start_record"] is False
    assert any("run.json" in why for why in s["rebuilt"]["not_rebuilt"])
    assert s["requests"]["sent"] == len(read_jsonl(folder / "requests.jsonl"))


def test_a_folder_without_requests_is_not_a_run(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=r"no summary\.json and no requests\.jsonl"):
        rebuild_summary(tmp_path)


def test_a_killed_two_worker_run_is_rebuilt_from_its_workers(tmp_path: Path) -> None:
    scenario = tmp_path / "w.toml"
    scenario.write_text(SCENARIO.replace("requests = 80", "requests = 60"))
    out = tmp_path / "out"
    assert main(["run", str(scenario), "--out", str(out), "--no-tui", "--workers", "2"]) == 0
    (run,) = out.iterdir()
    own: Summary = orjson.loads((run / "summary.json").read_bytes())
    # Killed before the merge at its end: the workers' files are all there is.
    for name in ("summary.json", "requests.jsonl", "histograms.hlog", "run.json"):
        (run / name).unlink(missing_ok=True)
    s = rebuild_summary(run).summary
    assert s["run"]["workers"] == 2 and s["run"]["id"] == run.name
    assert s["requests"]["sent"] == own["requests"]["sent"] == s["rebuilt"]["lines"]
    assert s["requests"]["measured_ok"] == own["requests"]["measured_ok"]
    for name in ("ttft_ms", "e2e_ms", "itl_ms"):
        _close(s["metrics"][name], own["metrics"][name], name)


def test_a_cut_interval_log_keeps_its_whole_intervals(tmp_path: Path) -> None:
    path = tmp_path / "histograms.hlog"
    writer = HlogWriter(path, 1_700_000_000.0)
    for second in range(3):
        ms = MetricSet()
        for v in (1000, 2000, 3000):
            ms.record("ttft_ms", v * (second + 1))
        writer.write_interval(ms, float(second), 1.0)
    writer.close()
    raw = path.read_bytes()
    last = raw.rindex(b"Tag=ttft_ms,2.000")
    path.write_bytes(raw[: last + 40])  # into the last interval's payload
    assert len(read_intervals(path)["ttft_ms"]) == 2
    assert read_hlog(path)["ttft_ms"].get_total_count() == 6
