"""``--workers N`` for every kind of scenario: fault plans, managed restarts, traces,
synthetic lengths, agent sessions, conversations, a worker killed mid-run. (Splitting and
merging themselves: ``test_workers.py``; every shipped scenario run with two workers:
``test_shipped_scaleout.py``.)"""

from __future__ import annotations

import signal
import time
from pathlib import Path

import orjson

from tests.conftest import read_jsonl, shipped_with_grace
from tests.test_workers import (
    ROOT,
    _cli,
    _one_run,
    _progressed,
    _scenario,
    kill_worker_1,
    start_two_workers,
)

RESTART = (
    'name = "r"\nmax_tokens = 24\n[[sources]]\nkind = "inline"\nprompts = ["a", "b"]\n'
    "[load]\nconcurrency = 4\nduration_s = 6\n"
    "[sim]\nttft_ms = 5.0\nitl_ms = 4.0\nload_s = 0.5\n"
    '[[faults.events]]\nname = "restart"\nkind = "restart"\nat_s = 2\n'
    "duration_s = 2\ndown_s = 0.5\nmax_failures = 4\n"
)


def test_every_source_and_fault_kind_is_accepted_with_workers_and_ray(tmp_path: Path) -> None:
    """Nothing is refused for splitting any more: a restart on Ray (held through the
    control actor) and an agent trace (split by session) both pass the run's checks."""
    sc = tmp_path / "r.toml"
    sc.write_text(RESTART)
    res = _cli("run", str(sc), "--check", "--workers", "2", "--ray", "127.0.0.2:1")
    assert res.returncode == 0 and "valid" in res.stdout, res.stderr
    trace = ROOT / "scenarios" / "agent-trace.toml"
    res = _cli("run", str(trace), "--check", "--workers", "2", "--ray", "127.0.0.2:1")
    assert res.returncode == 0 and "workers: 2 Ray tasks" in res.stdout, res.stderr


def test_a_restart_holds_the_load_in_every_worker(tmp_path: Path) -> None:
    """While the coordinator's restarted target is down, both workers hold their load
    (a file in their folders): only the requests caught in flight fail, not a stream of
    connection errors from sessions spinning against a closed port."""
    sc = tmp_path / "r.toml"
    sc.write_text(RESTART)
    # The verdict may be "failed" (asserted below); it must not gate the exit code.
    run_dir = _one_run(sc, tmp_path / "out", "--workers", "2", "--fail-on", "never")
    s = orjson.loads((run_dir / "summary.json").read_bytes())
    (restart,) = s["faults"]
    assert restart["verdict"] in ("held", "degraded", "failed"), restart
    rows = read_jsonl(run_dir / "requests.jsonl")
    assert s["requests"]["sent"] == len(rows)
    # At most the 4 sessions' requests in flight at the stop; without the hold, 4 sessions
    # spinning through refused connections for ~1 s would fail hundreds.
    assert s["requests"]["failed"] + s["requests"]["cancelled"] <= 4, s["requests"]
    assert {r["worker"] for r in rows} == {0, 1}


FAULTS = """name = "wf"
max_tokens = 24
seed = 4
[[sources]]
kind = "inline"
prompts = ["a", "b", "c", "d"]
[load]
concurrency = 6
duration_s = 7
[sim]
speculative = true
ttft_ms = 5.0
itl_ms = 2.0
[[faults.events]]
name = "draft down"
kind = "draft_down"
at_s = 1.5
duration_s = 1.5
[[faults.events]]
name = "pause"
kind = "idle"
at_s = 3.5
duration_s = 0.5
burst = 5
[[faults.events]]
name = "cancel"
kind = "cancel"
at_s = 4.5
duration_s = 1.5
fraction = 0.5
after_tokens = 2
after_tokens_max = 6
"""


def test_a_fault_plan_runs_once_beside_two_workers(tmp_path: Path) -> None:
    """The rig plays the timeline once in the parent, each worker acts on its own load
    (its share of the burst, its own cancellations), and the verdicts are judged once
    on the merged records; the server block and metrics.jsonl are the parent's."""
    sc = tmp_path / "wf.toml"
    sc.write_text(FAULTS)
    run_dir = _one_run(sc, tmp_path / "out", "--workers", "2")
    s = orjson.loads((run_dir / "summary.json").read_bytes())
    req = s["requests"]
    rows = read_jsonl(run_dir / "requests.jsonl")
    assert req["sent"] == req["ok"] + req["failed"] + req["cancelled"] == len(rows)
    assert {r["worker"] for r in rows} == {0, 1}
    verdicts = {v["name"]: v for v in s["faults"]}
    assert set(verdicts) == {"draft down", "pause", "cancel"}
    # The draft outage happened (the speculative sim fell back) and was judged (how it
    # came out depends on how busy the machine is; that it was judged does not).
    down = verdicts["draft down"]
    assert down["verdict"] in ("held", "degraded", "failed"), down
    assert s["server"]["scraped"] >= 5 and (run_dir / "metrics.jsonl").exists()
    assert s["server"]["fallbacks"] >= 1
    # Cancellations came from both workers, inside the window.
    cancelled = [r for r in rows if r.get("injected_cancel")]
    assert {r["worker"] for r in cancelled} == {0, 1}
    assert all(4.5 * 1000 <= r["intended_ms"] < 6.0 * 1000 + 50 for r in cancelled)
    # No load was offered in the idle gap by either worker (bar requests caught in it).
    in_gap = [r for r in rows if 3.55 * 1000 < r["intended_ms"] < 3.95 * 1000]
    assert not in_gap, in_gap[:3]
    # The settling check needs one in-flight count: with workers it says it was not made.
    assert "not checked" in str(verdicts["cancel"]), verdicts["cancel"]


def test_a_worker_killed_mid_run_is_accounted_and_named(tmp_path: Path) -> None:
    """SIGKILL one of two workers: the run still ends with a summary, the dead worker's
    accounted requests are merged (sent == lines), and the summary says which died."""
    sc = _scenario(tmp_path, "concurrency = 4\nduration_s = 60\ngrace_s = 0.5\n")
    out = tmp_path / "out"
    proc = start_two_workers(sc, out)
    deadline = time.monotonic() + 60
    while not all(_progressed(out, i) for i in (0, 1)):
        assert proc.poll() is None and time.monotonic() < deadline, "no worker progressed"
        time.sleep(0.1)
    # Lines reach the file once a second: kill once worker 1 has written some.
    while not any(p.stat().st_size for p in out.glob("*/worker-1/requests.jsonl")):
        assert time.monotonic() < deadline, "worker 1 wrote no line"
        time.sleep(0.1)
    kill_worker_1(proc)
    time.sleep(1.0)  # worker 0 goes on alone for a moment
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert "worker 1 died" in err, err[-2000:]
    (run_dir,) = out.iterdir()
    s = orjson.loads((run_dir / "summary.json").read_bytes())
    r = s["requests"]
    rows = read_jsonl(run_dir / "requests.jsonl")
    assert r["sent"] == r["ok"] + r["failed"] + r["cancelled"] == len(rows)
    (lost,) = s["run"]["workers_lost"]
    assert lost["worker"] == 1 and lost["exit"] == -signal.SIGKILL
    assert lost["requests"] == sum(1 for row in rows if row["worker"] == 1) > 0
    assert s["run"]["interrupted"] is True


def test_a_trace_split_over_two_workers_replays_every_line_at_its_time(tmp_path: Path) -> None:
    """Worker w replays lines w, w+2, ...: merged, each line once, at its recorded time
    (the trace's own offsets, not the split's interleaving phase), from both workers."""
    from loadtest.datasets.trace import read_trace
    from loadtest.engine.schedule import trace_offsets_ns

    trace = ROOT / "scenarios" / "data" / "trace-small.jsonl"
    run_dir = _one_run(ROOT / "scenarios" / "trace.toml", tmp_path / "out", "--workers", "2")
    rows = read_jsonl(run_dir / "requests.jsonl")
    s = orjson.loads((run_dir / "summary.json").read_bytes())
    entries = read_trace(trace, None)
    offsets = trace_offsets_ns([e.timestamp_ms for e in entries], 2.0)  # speedup = 2
    assert s["requests"]["sent"] == len(rows) == len(entries)
    assert sorted(r["trace_index"] for r in rows) == list(range(len(entries)))
    assert {r["worker"] for r in rows} == {0, 1}
    for r in rows:
        assert r["worker"] == r["trace_index"] % 2
        assert abs(r["intended_ms"] - offsets[r["trace_index"]] / 1e6) < 0.01, r
    lengths = orjson.loads((run_dir / "workload.json").read_bytes())
    assert lengths["requests"] == len(entries)


def test_synthetic_prompts_split_over_two_workers_keep_their_exact_lengths(
    tmp_path: Path,
) -> None:
    sc = ROOT / "scenarios" / "synthetic.toml"
    # Twice the shipped 4/s after 2 s of warm-up, not 5 (17 warm-up requests, not 20).
    short = ("--requests", "24", "--rate", "8", "--warmup", "2")
    run_dir = _one_run(sc, tmp_path / "out", "--workers", "2", *short)
    rows = read_jsonl(run_dir / "requests.jsonl")
    assert {r["worker"] for r in rows} == {0, 1}
    measured = [r for r in rows if not r["warmup"]]
    assert len(measured) == 24  # split 12 + 12; the warm-up's requests come on top
    lengths = orjson.loads((run_dir / "workload.json").read_bytes())
    ok = sum(1 for r in measured if r["outcome"] == "ok")
    assert lengths["requests"] == ok and lengths["exact_output"] == ok


def test_agent_sessions_split_over_two_workers_merge_into_one_agent_block(
    tmp_path: Path,
) -> None:
    """Each worker runs its share of the sessions; the agent block adds their task
    counters and share histograms, and agrees with the merged tasks.jsonl."""
    sc = shipped_with_grace("agent-tasks", tmp_path, 1)
    run_dir = _one_run(sc, tmp_path / "out", "--workers", "2", "--duration", "6")
    s = orjson.loads((run_dir / "summary.json").read_bytes())
    agent = s["agent"]
    tasks = read_jsonl(run_dir / "tasks.jsonl")
    assert {t["worker"] for t in tasks} == {0, 1}
    measured = [t for t in tasks if not t["warmup"]]
    assert agent["tasks"] == len(measured) > 0
    assert agent["warmup"] == len(tasks) - len(measured)
    assert agent["completed"] == sum(t["outcome"] == "completed" for t in measured)
    assert agent["time_to_valid_call_ms"]["count"] > 0 and agent["time_shares"]


def test_agent_trace_sessions_split_over_two_workers_count_as_one_process(
    tmp_path: Path,
) -> None:
    """Worker w replays whole sessions w, w+2, ..., each from its recorded start; merged,
    every call of every session once, and the agent_trace block counts what a one-process
    run of the same scenario counts, its shares computed once on the summed times."""
    from loadtest.datasets.otel import read_agent_trace
    from loadtest.engine.schedule import trace_offsets_ns

    sc = ROOT / "scenarios" / "agent-trace.toml"
    sessions = read_agent_trace(ROOT / "scenarios" / "data" / "agent-trace.jsonl")
    starts = trace_offsets_ns([x.offset_ns / 1e6 for x in sessions])
    every_call = sorted((i, k + 1) for i, x in enumerate(sessions) for k in range(len(x.calls)))
    blocks = []
    for run_dir in (
        _one_run(sc, tmp_path / "one"),
        _one_run(sc, tmp_path / "two", "--workers", "2"),
    ):
        s = orjson.loads((run_dir / "summary.json").read_bytes())
        rows = read_jsonl(run_dir / "requests.jsonl")
        r = s["requests"]
        assert r["sent"] == r["ok"] + r["failed"] + r["cancelled"] == len(rows) == len(every_call)
        assert sorted((row["session"], row["call"]) for row in rows) == every_call
        for row in rows:
            if row["call"] == 1:  # each session starts at its own recorded offset
                assert abs(row["intended_ms"] - starts[row["session"]] / 1e6) < 0.01, row
        blocks.append(s["agent_trace"])
    assert {row["worker"] for row in rows} == {0, 1}
    assert all(row["worker"] == row["session"] % 2 for row in rows)
    one, two = blocks
    counts = ("sessions_in_trace", "replayed", "completed", "failed", "calls", "recorded")
    assert {k: two[k] for k in counts} == {k: one[k] for k in counts}
    assert two["completed"] == two["sessions_in_trace"] == len(sessions)
    assert sorted(x["trace_id"] for x in two["sessions"]) == sorted(x.trace_id for x in sessions)
    total = two["total"]
    assert abs(two["decode_share"] - total["decode_ms"] / total["session_ms"]) < 1e-4
    parts = ("ttft_ms", "decode_ms", "tools_ms", "other_ms")
    assert abs(sum(total[k] for k in parts) - total["session_ms"]) < 0.01


def test_conversations_split_over_two_workers_merge_their_turn_table(tmp_path: Path) -> None:
    """Worker w runs conversations w, w+2, ... of one order: no conversation runs in both;
    multiturn.json is built from both workers' values (not a mean of percentiles), which
    each hands back in its result."""
    from loadtest.features.multiturn import multiturn_block

    # Shorter answers (256 tokens took ~2 s each) end more conversations, whose next
    # ones start measured first turns in both workers, and a grace of 1 s ends the run.
    sc = shipped_with_grace("multi-turn", tmp_path, 1)
    flags = ("--workers", "2", "--duration", "6", "--max-tokens", "64")
    run_dir = _one_run(sc, tmp_path / "out", *flags)
    rows = read_jsonl(run_dir / "requests.jsonl")
    by_worker = [{r["conversation"] for r in rows if r["worker"] == w} for w in (0, 1)]
    assert by_worker[0] and by_worker[1] and not by_worker[0] & by_worker[1]
    results = [orjson.loads((run_dir / f"worker-{w}" / "result.json").read_bytes()) for w in (0, 1)]
    parts = [p for r in results for p in r["blocks"]["multiturn"]]
    assert len(parts) == 2  # a part per worker
    merged = orjson.loads((run_dir / "multiturn.json").read_bytes())
    assert merged == multiturn_block(parts)
    first = next(t for t in merged["ttft_by_turn"] if t["turn"] == 1)
    assert first["requests"] == sum(len(p["ttft"].get("1", [])) for p in parts) > 0
