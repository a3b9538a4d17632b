"""An agent-trace replay split over ``--workers 2``: its OTLP export, its summary against
its lines, a killed run's rebuild and a killed worker's share. (Ray: ``test_ray.py``, which
runs ``check_export`` on a cluster's replay; session savings: ``test_session_savings.py``.)

The shipped trace has three sessions: worker 0 replays sessions 0 and 2, worker 1
session 1, each numbering its units from 0. What the run says of them (the summary's
``agent_trace`` block, the export) is checked against the request lines, counted here
on their own (``split_from_lines``), not by the code under test.
"""

from __future__ import annotations

import importlib.util
import shutil
import signal
import time
from collections import Counter
from pathlib import Path
from typing import Any

import orjson
import pytest

from loadtest.cli.main import main
from loadtest.datasets.otel import read_agent_trace
from loadtest.model.io import load_summary
from loadtest.report.compare import compare_runs, load_run
from tests.conftest import read_jsonl
from tests.test_agent_trace import FIXTURE, documents, spans_of
from tests.test_agent_trace_readback import SIM, _attrs, _same
from tests.test_workers import _one_run, kill_worker_1, start_two_workers

SCENARIO = f'name = "otel-replay"\n[[sources]]\nkind = "agent-trace"\npath = "{FIXTURE}"\n' + SIM
LINE_MS = 0.01
"""What one session's figure may differ by between the lines (times in ms to 0.1 µs,
recorded tool times to 1 µs a call) and the run (ns, rounded to µs once): far under
any real difference (a call takes ms)."""


@pytest.fixture(scope="module")
def two_workers(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The shipped trace replayed by two workers, and its OTLP export."""
    tmp = tmp_path_factory.mktemp("workers")
    sc = tmp / "s.toml"
    sc.write_text(SCENARIO)
    run_dir = _one_run(sc, tmp / "out", "--workers", "2")
    assert main(["export-trace", "--format", "otlp", str(run_dir)]) == 0
    return run_dir, run_dir / "trace.otlp.jsonl"


def split_from_lines(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """What the lines say of the replayed sessions: counts, and each completed session's
    time split (ms), in the order the sessions ended."""
    groups: dict[tuple[int, int], list[dict[str, Any]]] = {}
    for r in rows:
        if "trace_id" in r and not r["warmup"]:
            groups.setdefault((r.get("worker", 0), r["unit"]), []).append(r)
    done, failed = [], 0
    for lines in groups.values():
        lines.sort(key=lambda r: r["call"])
        if any(r["outcome"] != "ok" for r in lines):
            failed += 1
        elif [r["call"] for r in lines] == list(range(1, lines[0]["calls"] + 1)):
            ttft = sum(r["first_token_ms"] - r["sent_ms"] for r in lines)
            decode = sum(r["end_ms"] - r["first_token_ms"] for r in lines)
            tools = sum(r["tool_ms"] for r in lines[1:])
            session = lines[-1]["end_ms"] - lines[0]["intended_ms"]
            row = {"trace_id": lines[0]["trace_id"], "calls": len(lines), "session_ms": session}
            row.update(ttft_ms=ttft, decode_ms=decode, tools_ms=tools)
            row["other_ms"] = session - ttft - decode - tools
            done.append((lines[-1]["end_ms"], row))
    done.sort(key=lambda d: d[0])
    sessions = [row for _, row in done]
    parts = ("session_ms", "ttft_ms", "decode_ms", "tools_ms", "other_ms")
    return {
        "completed": len(done),
        "failed": failed,
        "calls": sum(s["calls"] for s in sessions),
        "total": {k: sum(s[k] for s in sessions) for k in parts},
        "sessions": sessions,
    }


def check_block_against_lines(block: dict[str, Any], rows: list[dict[str, Any]]) -> None:
    """The summary's agent_trace block says what the lines say, session by session."""
    lines = split_from_lines(rows)
    assert (block["completed"], block["failed"], block["calls"]) == (
        lines["completed"],
        lines["failed"],
        lines["calls"],
    )
    assert block["replayed"] == block["completed"] + block["failed"]
    n = len(lines["sessions"])
    for k, v in lines["total"].items():
        assert block["total"][k] == pytest.approx(v, abs=LINE_MS * n), (k, block["total"])
    # Listed as a one-process run lists them: in the order they ended.
    assert [s["trace_id"] for s in block["sessions"]] == [s["trace_id"] for s in lines["sessions"]]
    for got, want in zip(block["sessions"], lines["sessions"], strict=True):
        for k, v in want.items():
            assert got[k] == (pytest.approx(v, abs=LINE_MS) if isinstance(v, float) else v), k


def check_export(run_dir: Path, exported: Path) -> None:
    """Every session and call of a two-worker replay in its OTLP export exactly once, the
    two workers' sessions distinct, and the summary's agent_trace what the lines give."""
    rows = read_jsonl(run_dir / "requests.jsonl")
    sessions = read_agent_trace(FIXTURE)
    assert {r["worker"] for r in rows} == {0, 1}
    assert len(rows) == sum(len(s.calls) for s in sessions)
    docs = documents(exported)
    if importlib.util.find_spec("opentelemetry.proto_json") is not None:
        from opentelemetry.proto_json.collector.trace.v1.trace_service import (
            ExportTraceServiceRequest,
        )

        for doc in docs:  # the official decoder reads each document back unchanged
            assert ExportTraceServiceRequest.from_dict(doc).to_dict() == doc
    units = {(r["worker"], r["unit"]) for r in rows}
    assert len(docs) == len(units) == len(sessions)
    seen: Counter[tuple[int, int]] = Counter()
    owners = set()
    for doc in docs:
        spans = spans_of([doc])
        (agent,) = [s for s in spans if s["name"].startswith("invoke_agent")]
        a = _attrs(agent)
        worker, unit, key = (
            int(a["loadtest.session.worker"]),
            int(a["loadtest.session.unit"]),
            a["loadtest.session.key"],
        )
        owners.add((worker, unit))
        assert {s["traceId"] for s in spans} == {agent["traceId"]}
        mine = {r["index"]: r for r in rows if (r["worker"], r["unit"]) == (worker, unit)}
        assert {r["trace_id"] for r in mine.values()} == {key}
        chats = [s for s in spans if s["name"].startswith("chat ")]
        for chat in chats:
            index = int(_attrs(chat)["loadtest.request.index"])
            seen[worker, index] += 1
            line = mine[index]
            assert _attrs(chat)["gen_ai.usage.output_tokens"] == str(line["output_tokens"])
        assert len(chats) == len(mine)
    # Sessions of different workers are distinct traces, even where their units agree.
    assert owners == units and {w for w, _ in owners} == {0, 1}
    assert len({spans_of([d])[0]["traceId"] for d in docs}) == len(docs)
    assert seen == Counter((r["worker"], r["index"]) for r in rows)
    assert set(seen.values()) == {1}
    # Read back as a trace: the same sessions, the same calls.
    again = read_agent_trace(exported)
    assert sorted(len(s.calls) for s in again) == sorted(len(s.calls) for s in sessions)
    block = load_summary(run_dir)["agent_trace"]
    assert block["sessions_in_trace"] == len(sessions)
    check_block_against_lines(dict(block), rows)


def test_a_two_worker_replay_exports_each_session_and_call_once(
    two_workers: tuple[Path, Path],
) -> None:
    check_export(*two_workers)


def _killed_copy(run: Path, tmp: Path) -> Path:
    """The run as a SIGKILL leaves a --workers run: its workers' folders, nothing merged."""
    folder = tmp / run.name
    shutil.copytree(
        run,
        folder,
        ignore=shutil.ignore_patterns(
            "summary.*", "*.hgrm", "trace.*", "requests.jsonl", "histograms.hlog", "workload.json"
        ),
    )
    for w in folder.glob("worker-*"):
        shutil.copy(run / w.name / "requests.jsonl", w / "requests.jsonl")
        shutil.copy(run / w.name / "histograms.hlog", w / "histograms.hlog")
        (w / "result.json").unlink()
    return folder


def test_a_killed_two_worker_replay_rebuilds_and_exports_from_the_workers_lines(
    two_workers: tuple[Path, Path], tmp_path: Path
) -> None:
    run_dir, exported = two_workers
    folder = _killed_copy(run_dir, tmp_path)
    assert not (folder / "requests.jsonl").exists()
    # The export reads the workers' lines: the same sessions, ids and times.
    assert main(["export-trace", "--format", "otlp", str(folder)]) == 0
    assert documents(folder / "trace.otlp.jsonl") == documents(exported)
    assert main(["summarize", str(folder)]) == 0
    rebuilt = load_summary(folder)
    own = load_summary(run_dir)["agent_trace"]
    assert _same(rebuilt["agent_trace"], own), (rebuilt["agent_trace"], own)
    notes = rebuilt["rebuilt"]["not_rebuilt"]
    assert any(n.startswith("agent_trace: rebuilt from the lines") for n in notes)
    # compare reads the workers' lines too: the same calls, paired with the run's own.
    killed, whole = load_run(folder), load_run(run_dir)
    assert killed.trace_calls == whole.trace_calls and len(whole.trace_calls) == 12
    s = compare_runs([whole], [killed]).get("agent_trace")
    assert s is not None and (s["paired"], s["paired_calls"]) == (3, 12)
    assert s["saved_ms"] == pytest.approx(0, abs=LINE_MS)  # the same sessions, rounded apart


def _lines(path: Path) -> int:
    try:
        return path.read_bytes().count(b"\n")
    except FileNotFoundError:
        return 0


def test_a_worker_killed_mid_replay_keeps_its_sessions_in_the_time_split(tmp_path: Path) -> None:
    """SIGKILL worker 1 after it completed a session: the run's agent_trace block counts
    that worker's completed sessions from its lines (it handed in no tally), so the block
    and the merged lines agree."""
    sc = tmp_path / "s.toml"
    # Closed: each worker replays its sessions over and over until stopped.
    sc.write_text(
        SCENARIO.replace("[sim]", 'starts = "closed"\n[load]\nconcurrency = 2\n'
                         "duration_s = 60\ngrace_s = 0.5\n[sim]")
    )  # fmt: skip
    out = tmp_path / "out"
    proc = start_two_workers(sc, out)
    try:
        deadline = time.monotonic() + 90
        # Lines reach the file once a second: a session is four of them.
        while not all(_lines(p) >= 5 for p in out.glob("*/worker-[01]/requests.jsonl")) or (
            len(list(out.glob("*/worker-[01]/requests.jsonl"))) < 2
        ):
            assert proc.poll() is None and time.monotonic() < deadline, "no session completed"
            time.sleep(0.1)
        kill_worker_1(proc)
        (run_dir,) = out.iterdir()
        start = _lines(run_dir / "worker-0" / "requests.jsonl")
        while _lines(run_dir / "worker-0" / "requests.jsonl") < start + 4:  # worker 0 goes on
            assert proc.poll() is None and time.monotonic() < deadline, "worker 0 stopped"
            time.sleep(0.1)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert "worker 1 died" in err, err[-2000:]
    s = orjson.loads((run_dir / "summary.json").read_bytes())
    (lost,) = s["run"]["workers_lost"]
    assert lost["worker"] == 1
    rows = read_jsonl(run_dir / "requests.jsonl")
    assert split_from_lines([r for r in rows if r["worker"] == 1])["completed"] >= 1
    block = s["agent_trace"]
    assert block["sessions_in_trace"] == len(read_agent_trace(FIXTURE))
    check_block_against_lines(block, rows)
