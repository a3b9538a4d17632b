"""``--ray``: a run through a local Ray head on loopback is complete and merged.

Needs the ``ray`` extra; CI installs it and sets ``LOADTEST_REQUIRE_RAY=1`` so that the
test runs there instead of skipping. Ray's token auth is disabled for the test and its
temporary folder is the test's own, removed with it.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from tests.conftest import read_jsonl, shipped_with_grace

ROOT = Path(__file__).resolve().parent.parent

try:
    import ray  # noqa: F401

    HAVE_RAY = True
except ImportError:
    HAVE_RAY = False

pytestmark = pytest.mark.skipif(
    not HAVE_RAY and os.environ.get("LOADTEST_REQUIRE_RAY") != "1",
    reason="the ray extra is not installed",
)


def _env(*paths: Path) -> dict[str, str]:
    where = os.pathsep.join(str(p) for p in (*paths, ROOT))
    return dict(os.environ, RAY_AUTH_MODE="disabled", PYTHONPATH=where)


def _ray(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ray.scripts.scripts", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=env or _env(),
    )


HEAD_IP, NODE_IP = "127.0.0.2", "127.0.0.3"
"""Loopback addresses Ray keeps: it swaps 127.0.0.1 itself for the machine's address."""


def _free_port(host: str) -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def ray_head(installed: Path) -> Iterator[str]:
    """A two-node cluster on loopback: a head and a second node, each on its own address.
    Its nodes see the test plugin package (``tests/test_plugins.py``), as a cluster that
    runs a third party's kinds must: a driver sees it only where a test says so."""
    env = _env(installed)
    # Short: Ray's unix sockets live under it, and their paths may not exceed 107 bytes.
    temp = Path(tempfile.mkdtemp(prefix="lt-ray-", dir="/tmp"))
    # A free port can be taken again before Ray binds it while other jobs run ("GCS
    # could not bind ... address in use"): then try again with a fresh one.
    for _attempt in range(4):
        port = _free_port(HEAD_IP)
        started = _ray(
            "start",
            "--head",
            f"--node-ip-address={HEAD_IP}",
            f"--port={port}",
            "--num-cpus=1",
            "--include-dashboard=false",
            "--disable-usage-stats",
            f"--temp-dir={temp}",
            env=env,
        )
        text = (started.stdout + started.stderr).lower()
        if started.returncode == 0 or not ("in use" in text or "bind" in text):
            break
    assert started.returncode == 0, started.stderr[-2000:]
    try:
        joined = _ray(
            "start",
            f"--address={HEAD_IP}:{port}",
            f"--node-ip-address={NODE_IP}",
            "--num-cpus=1",
            "--disable-usage-stats",
            env=env,
        )
        assert joined.returncode == 0, joined.stderr[-2000:]
        yield f"{HEAD_IP}:{port}"
    finally:
        _ray("stop", "--force")
        shutil.rmtree(temp, ignore_errors=True)


def _driver_addresses(address: str) -> set[str]:
    """The addresses every driver that joined the cluster registered under."""
    code = (
        "import sys, ray\n"
        f"ray.init(address={address!r}, include_dashboard=False, log_to_driver=False,"
        f" _node_ip_address={HEAD_IP!r})\n"
        "print(*{j['DriverIPAddress'] for j in ray._private.state.jobs()})\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=_env()
    )
    assert done.returncode == 0, done.stderr[-2000:]
    found = set(done.stdout.split())
    assert len(found) >= 1
    return found


def test_loopback_clusters_keep_the_driver_on_loopback(caplog: pytest.LogCaptureFixture) -> None:
    from loadtest.app.scale.ray_backend import _loopback_node

    assert _loopback_node("127.0.0.2:6379") == "127.0.0.2"
    assert _loopback_node("10.1.2.3:6379") is None
    # Ray swaps 127.0.0.1 for the machine's address whatever it is told: say so.
    with caplog.at_level("WARNING", logger="loadtest"):
        assert _loopback_node("127.0.0.1:6379") is None
    assert "127.0.0.2" in caplog.text


def test_a_run_through_ray_is_complete_and_merged(ray_head: str, tmp_path: Path) -> None:
    scenario = tmp_path / "r.toml"
    scenario.write_text(
        'name = "r"\nmax_tokens = 16\n[[sources]]\nkind = "inline"\nprompts = ["a", "b"]\n'
        "[load]\nconcurrency = 4\nrequests = 120\n[sim]\nttft_ms = 5.0\nitl_ms = 1.0\n"
    )
    out = tmp_path / "out"
    argv = ["run", str(scenario), "--no-tui", "--workers", "2", "--ray", ray_head]
    res = subprocess.run(
        [sys.executable, "-m", "loadtest", *argv, "--out", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=240,
        env=_env(),
    )
    assert res.returncode == 0, res.stderr[-3000:]
    assert "Ray tasks at" in res.stderr
    # The driver registered on loopback, not under the machine's own network address
    # (which is what Ray makes of a cluster started on 127.0.0.1).
    assert _driver_addresses(ray_head) <= {HEAD_IP, NODE_IP}
    (run_dir,) = out.iterdir()
    s = orjson.loads((run_dir / "summary.json").read_bytes())
    assert s["run"]["workers"] == 2
    assert s["requests"]["sent"] == s["requests"]["ok"] == 120
    rows = read_jsonl(run_dir / "requests.jsonl")
    assert len(rows) == 120 and {r["worker"] for r in rows} == {0, 1}
    assert s["metrics"]["ttft_ms"]["count"] == 120


def _ray_run(ray_head: str, scenario: Path, out: Path, *extra: str) -> Path:
    argv = ["run", str(scenario), "--no-tui", "--workers", "2", "--ray", ray_head, *extra]
    res = subprocess.run(
        [sys.executable, "-m", "loadtest", *argv, "--out", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=240,
        env=_env(),
    )
    assert res.returncode == 0, res.stderr[-3000:]
    (run_dir,) = out.iterdir()
    return run_dir


def test_a_fault_plan_on_the_cluster_is_judged_once_on_the_merged_records(
    ray_head: str, tmp_path: Path
) -> None:
    from tests.test_workers_scenarios import FAULTS

    sc = tmp_path / "wf.toml"
    sc.write_text(FAULTS)
    run_dir = _ray_run(ray_head, sc, tmp_path / "out")
    s = orjson.loads((run_dir / "summary.json").read_bytes())
    rows = read_jsonl(run_dir / "requests.jsonl")
    r = s["requests"]
    assert r["sent"] == r["ok"] + r["failed"] + r["cancelled"] == len(rows)
    assert {row["worker"] for row in rows} == {0, 1}
    assert {v["name"] for v in s["faults"]} == {"draft down", "pause", "cancel"}
    assert s["faults"][0]["verdict"] in ("held", "degraded", "failed")
    assert s["server"]["scraped"] >= 5
    assert {row["worker"] for row in rows if row.get("injected_cancel")} == {0, 1}


def test_a_trace_on_the_cluster_replays_every_line_once(ray_head: str, tmp_path: Path) -> None:
    run_dir = _ray_run(ray_head, ROOT / "scenarios" / "trace.toml", tmp_path / "out")
    rows = read_jsonl(run_dir / "requests.jsonl")
    lines = sum(1 for _ in (ROOT / "scenarios" / "data" / "trace-small.jsonl").open())
    assert sorted(r["trace_index"] for r in rows) == list(range(lines))
    assert all(r["worker"] == r["trace_index"] % 2 for r in rows)
    # The exact-length tally is a block: each task hands its part back with its result
    # (its own files stay on its machine), merged here into workload.json.
    lengths = orjson.loads((run_dir / "workload.json").read_bytes())
    assert lengths["requests"] == lines
    assert len(lengths["prompt_overhead_median_per_worker"]) == 2


def test_agent_sessions_on_the_cluster_merge_into_one_agent_block(
    ray_head: str, tmp_path: Path
) -> None:
    sc = shipped_with_grace("agent-tasks", tmp_path, 1)
    run_dir = _ray_run(ray_head, sc, tmp_path / "out", "--duration", "5")
    s = orjson.loads((run_dir / "summary.json").read_bytes())
    rows = read_jsonl(run_dir / "requests.jsonl")
    assert {r["worker"] for r in rows} == {0, 1}
    assert s["agent"]["tasks"] + s["agent"]["warmup"] > 0
    assert s["agent"]["time_to_valid_call_ms"]["count"] > 0
    # tasks.jsonl came back from both tasks and was merged as a local run's.
    tasks = read_jsonl(run_dir / "tasks.jsonl")
    assert {t["worker"] for t in tasks} == {0, 1}
    assert s["agent"]["tasks"] == sum(1 for t in tasks if not t["warmup"])
    assert s["agent"]["warmup"] == sum(1 for t in tasks if t["warmup"])


def test_conversations_on_the_cluster_merge_their_shipped_parts(
    ray_head: str, tmp_path: Path
) -> None:
    """Each task hands its conversations' values back with its result, and multiturn.json
    is built from both, as with local workers: the first turn counts every measured
    first turn of both tasks."""
    # Shorter answers and grace, as in the local test (test_workers_scenarios.py).
    sc = shipped_with_grace("multi-turn", tmp_path, 1)
    run_dir = _ray_run(ray_head, sc, tmp_path / "out", "--duration", "6", "--max-tokens", "64")
    merged = orjson.loads((run_dir / "multiturn.json").read_bytes())
    rows = read_jsonl(run_dir / "requests.jsonl")
    assert {r["worker"] for r in rows} == {0, 1}
    firsts = [
        r
        for r in rows
        if r["turn"] == 1 and not r["warmup"] and r["outcome"] == "ok" and r["ttft_ms"]
    ]
    first = next(t for t in merged["ttft_by_turn"] if t["turn"] == 1)
    assert first["requests"] == len(firsts) > 0
    assert {r["worker"] for r in firsts} == {0, 1}


def test_an_agent_trace_on_the_cluster_replays_each_session_once(
    ray_head: str, tmp_path: Path
) -> None:
    from loadtest.datasets.otel import read_agent_trace

    sessions = read_agent_trace(ROOT / "scenarios" / "data" / "agent-trace.jsonl")
    run_dir = _ray_run(ray_head, ROOT / "scenarios" / "agent-trace.toml", tmp_path / "out")
    s = orjson.loads((run_dir / "summary.json").read_bytes())
    rows = read_jsonl(run_dir / "requests.jsonl")
    calls = sum(len(x.calls) for x in sessions)
    assert s["requests"]["sent"] == s["requests"]["ok"] == len(rows) == calls
    assert all(r["worker"] == r["session"] % 2 for r in rows)
    block = s["agent_trace"]
    assert (block["sessions_in_trace"], block["completed"], block["calls"]) == (3, 3, calls)
    # workload.json (the exact-length tally) came back from both tasks and was merged.
    assert orjson.loads((run_dir / "workload.json").read_bytes())["requests"] == calls


def test_an_agent_trace_on_the_cluster_exports_each_session_and_call_once(
    ray_head: str, tmp_path: Path
) -> None:
    """The replay's OTLP export has every session and call of both tasks once, their
    sessions distinct (each task numbers its units from 0), and the merged agent_trace
    block what the lines give (as ``test_agent_trace_workers`` checks of local workers)."""
    from loadtest.cli.main import main
    from tests.test_agent_trace_workers import SCENARIO, check_export

    sc = tmp_path / "s.toml"
    sc.write_text(SCENARIO)
    run_dir = _ray_run(ray_head, sc, tmp_path / "out")
    assert main(["export-trace", "--format", "otlp", str(run_dir)]) == 0
    check_export(run_dir, run_dir / "trace.otlp.jsonl")


def test_a_restart_on_the_cluster_holds_the_load_in_every_task(
    ray_head: str, tmp_path: Path
) -> None:
    """While the coordinator's restarted target is down, both Ray tasks hold their load
    (the control actor's flag, no shared file): only the requests caught in flight fail."""
    from tests.test_workers_scenarios import RESTART

    sc = tmp_path / "r.toml"
    sc.write_text(RESTART)
    # A "failed" verdict is allowed below (the target's own recovery, not the hold, decides
    # it), so it must not gate the exit code either: the run exited 1 on one in CI.
    run_dir = _ray_run(ray_head, sc, tmp_path / "out", "--fail-on", "never")
    s = orjson.loads((run_dir / "summary.json").read_bytes())
    (restart,) = s["faults"]
    assert restart["verdict"] in ("held", "degraded", "failed"), restart
    assert restart["time_to_ready_s"] is not None, restart
    rows = read_jsonl(run_dir / "requests.jsonl")
    r = s["requests"]
    assert r["sent"] == r["ok"] + r["failed"] + r["cancelled"] == len(rows)
    assert {row["worker"] for row in rows} == {0, 1}
    # At most the 4 sessions' requests in flight at the stop (see the local test).
    assert r["failed"] + r["cancelled"] <= 4, r
    assert not (run_dir / "worker-0" / "hold").exists()


# -- a third party's kinds on the cluster: each runs in the Ray tasks as in workers ------


def _plugin_run(
    ray_head: str,
    installed: Path,
    tmp_path: Path,
    scenario: str,
    *,
    ok: int | tuple[int, ...] = 0,
    flags: tuple[str, ...] = (),
    command: str = "run",
) -> tuple[subprocess.CompletedProcess[str], Path]:
    sc = tmp_path / "scenario.toml"
    sc.write_text(scenario)
    out = tmp_path / "out"
    argv = [command, str(sc), "--no-tui", "--workers", "2", "--ray", ray_head, "--out", str(out)]
    argv += flags
    res = subprocess.run(
        [sys.executable, "-m", "loadtest", *argv],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=240,
        env=_env(installed),
    )
    assert res.returncode in ((ok,) if isinstance(ok, int) else ok), res.stderr[-3000:]
    assert "Ray tasks at" in res.stderr
    (run_dir,) = out.iterdir()
    return res, run_dir


def test_a_plugin_source_table_and_block_run_in_the_ray_tasks(
    ray_head: str, installed: Path, tmp_path: Path
) -> None:
    from tests.test_plugins import LINED

    (tmp_path / "prompts.txt").write_text("first\nsecond\nthird\n")
    res, run_dir = _plugin_run(ray_head, installed, tmp_path, LINED)
    s = orjson.loads((run_dir / "summary.json").read_bytes())
    rows = read_jsonl(run_dir / "requests.jsonl")
    assert {r["worker"] for r in rows} == {0, 1}
    assert {r["prompt_id"] for r in rows} <= {"line-0", "line-1", "line-2"}
    # Each task fed the plugin's block with its hook; merged once, here.
    assert s["lines"]["sent"] == s["requests"]["sent"] == len(rows) >= 12
    assert s["lines"]["label"] == "nightly"  # its own [lines] table reached the tasks
    assert (run_dir / "category_counts.csv").exists()  # its output, from the merge
    assert "lines (nightly): " in res.stdout


def test_a_plugin_fault_kind_is_injected_in_the_ray_tasks(
    ray_head: str, installed: Path, tmp_path: Path
) -> None:
    from tests.test_plugins import PAUSED

    _, run_dir = _plugin_run(ray_head, installed, tmp_path, PAUSED)
    s = orjson.loads((run_dir / "summary.json").read_bytes())
    rows = read_jsonl(run_dir / "requests.jsonl")
    assert {r["worker"] for r in rows} == {0, 1}
    assert not [r for r in rows if 1600 <= r["sent_ms"] < 2500], "sent inside the pause"
    (window,) = s["faults"]
    assert window["kind"] == "pause" and window["detail"]["sent_in_pause"] == 0


def test_a_plugin_arrival_process_is_split_over_the_ray_tasks(
    ray_head: str, installed: Path, tmp_path: Path
) -> None:
    from tests.test_plugins import PULSED

    _, run_dir = _plugin_run(ray_head, installed, tmp_path, PULSED)
    rows = read_jsonl(run_dir / "requests.jsonl")
    assert len(rows) == 24 and [sum(r["worker"] == w for r in rows) for w in (0, 1)] == [12, 12]
    intended = sorted(r["intended_ms"] for r in rows)
    planned = [(k // 3) * 75.0 for k in range(24)]
    assert all(abs(a - b) < 1.0 for a, b in zip(intended, planned, strict=True)), intended


def test_a_plugin_workload_splits_itself_over_the_ray_tasks(
    ray_head: str, installed: Path, tmp_path: Path
) -> None:
    from tests.test_plugins import ORDERED

    (tmp_path / "prompts.txt").write_text("".join(f"question {i}\n" for i in range(11)))
    _, run_dir = _plugin_run(ray_head, installed, tmp_path, ORDERED)
    rows = read_jsonl(run_dir / "requests.jsonl")
    assert sorted(r["line"] for r in rows) == list(range(11))
    for w in (0, 1):
        assert sorted(r["line"] for r in rows if r["worker"] == w) == list(range(w, 11, 2))


def test_a_plugin_stop_rule_is_judged_in_each_ray_task(
    ray_head: str, installed: Path, tmp_path: Path
) -> None:
    from tests.test_plugins import BUDGETED

    res, run_dir = _plugin_run(ray_head, installed, tmp_path, BUDGETED)
    s = orjson.loads((run_dir / "summary.json").read_bytes())
    assert 1 <= len(s["stopped"]) <= 2
    assert all(f["rule"] == "tokens" and "(budget 200)" in f["reason"] for f in s["stopped"])
    assert s["run"]["duration_s"] < 60 and "STOPPED EARLY" in res.stdout


def test_a_live_output_sees_the_ray_tasks_run_as_it_goes(
    ray_head: str, installed: Path, tmp_path: Path
) -> None:
    """Each task hands its live.json to the control actor; the parent writes them into
    the tasks' folders here, where the live outputs read them (a plugin's, here)."""
    from tests.test_plugins import VIEWED

    log = tmp_path / "views.jsonl"
    _, run_dir = _plugin_run(ray_head, installed, tmp_path, VIEWED, flags=("--view-log", str(log)))
    s = orjson.loads((run_dir / "summary.json").read_bytes())
    *going, last = [orjson.loads(line) for line in log.read_text().splitlines()]
    assert any(v["phase"] == "measuring" and v["sent"] > 0 for v in going), going
    assert last["phase"] == "ended" and last["sent"] == s["requests"]["sent"]


def test_a_plugin_sweep_dimension_sets_the_step_in_the_ray_tasks(
    ray_head: str, installed: Path, tmp_path: Path
) -> None:
    from tests.test_plugins import ANSWERED

    flags = ("--sweep", "answer_tokens=3")
    _, folder = _plugin_run(ray_head, installed, tmp_path, ANSWERED, flags=flags, command="sweep")
    rows = read_jsonl(folder / "step-00-3" / "requests.jsonl")
    assert {r["worker"] for r in rows} == {0, 1} and len(rows) == 12
    # Each task ran the step's scenario: answers of at most 3 tokens, not the 200 asked.
    assert max(r["output_tokens"] for r in rows if r["outcome"] == "ok") <= 3


def test_a_plugin_side_type_serves_the_ray_tasks(
    ray_head: str, installed: Path, tmp_path: Path
) -> None:
    from tests.test_plugins import SIDED

    flags = ("--baseline", "simproc:slow", "--candidate", "simproc:fast", "--repeat", "1")
    # 0 or 1: a verdict of ab's (never a crash)
    _, folder = _plugin_run(
        ray_head, installed, tmp_path, SIDED, flags=flags, command="ab", ok=(0, 1)
    )
    c = orjson.loads((folder / "comparison.json").read_bytes())
    for side in ("a", "b"):  # started here, loaded by both tasks, stopped after the run
        assert c[side]["deployment_cost"]["starts"] == 1, c[side]
    for run_dir in (folder / "baseline").iterdir():
        rows = read_jsonl(run_dir / "requests.jsonl")
        assert {r["worker"] for r in rows} == {0, 1} and len(rows) == 12
