"""The command line as a user runs it: a real process, the real simulator, real files."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import orjson
import pytest

from tests.conftest import read_jsonl

ROOT = Path(__file__).resolve().parent.parent


def loadtest(*args: str, cwd: Path = ROOT, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "loadtest", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
    )


def inline_scenario(tmp_path: Path, extra: str = "") -> Path:
    p = tmp_path / "quick.toml"
    p.write_text(
        'name = "quick"\nmax_tokens = 8\n[[sources]]\nkind = "inline"\n'
        'prompts = ["a", "b", "c"]\n[load]\nconcurrency = 4\n' + extra
    )
    return p


def only_run_dir(out: Path) -> Path:
    [run_dir] = list(out.iterdir())
    return run_dir


def test_run_without_endpoint_uses_the_simulator_and_writes_every_file(tmp_path: Path) -> None:
    out = tmp_path / "out"
    res = loadtest(
        "run", str(inline_scenario(tmp_path)), "--requests", "30", "--out", str(out), "--no-tui"
    )
    assert res.returncode == 0, res.stderr
    assert "built-in simulator" in res.stderr
    assert "TTFT" in res.stdout and "requests: sent 30" in res.stdout
    run_dir = only_run_dir(out)
    names = {p.name for p in run_dir.iterdir()}
    assert {
        "summary.json",
        "histograms.hlog",
        "requests.jsonl",
        "summary.csv",
        "ttft_ms.hgrm",
        "e2e_ms_corrected.hgrm",
        "dispatch_lag_ms.hgrm",
    } <= names
    summary = orjson.loads((run_dir / "summary.json").read_bytes())
    assert summary["requests"]["sent"] == 30 == summary["requests"]["ok"]
    assert summary["run"]["model"] == "sim-llm"
    # The simulator keeps its connections alive: nothing had to be resent.
    assert summary["requests"]["resent_stale_connection"] == 0
    assert len(read_jsonl(run_dir / "requests.jsonl")) == 30
    assert "Value     Percentile TotalCount" in (run_dir / "ttft_ms.hgrm").read_text()


def test_flags_override_the_scenario(tmp_path: Path) -> None:
    out = tmp_path / "out"
    res = loadtest(
        "run",
        str(inline_scenario(tmp_path)),
        "--rate",
        "50",
        "--duration",
        "1",
        "--max-tokens",
        "3",
        "--seed",
        "9",
        "--out",
        str(out),
        "--no-tui",
    )
    assert res.returncode == 0, res.stderr
    s = orjson.loads((only_run_dir(out) / "summary.json").read_bytes())
    assert s["run"]["load"]["mode"] == "poisson" and s["run"]["load"]["rate"] == 50
    assert s["run"]["seed"] == 9
    assert 20 <= s["requests"]["sent"] <= 90


def test_scenario_errors_exit_2_with_a_message_and_no_traceback(tmp_path: Path) -> None:
    bad = inline_scenario(tmp_path, "burst = 3\n")
    res = loadtest("run", str(bad), "--no-tui")
    assert res.returncode == 2
    assert f"{bad}: load.burst: unknown key" in res.stderr
    assert "Traceback" not in res.stderr
    res = loadtest("run", str(tmp_path / "nope.toml"))
    assert res.returncode == 2 and "cannot read the file" in res.stderr
    res = loadtest("run", "--concurrency", "2", "--rate", "3")
    assert res.returncode == 2 and "not allowed with argument" in res.stderr


def test_unreachable_endpoint_is_a_clear_error(tmp_path: Path) -> None:
    res = loadtest(
        "run",
        str(inline_scenario(tmp_path)),
        "--endpoint",
        "http://127.0.0.1:9",
        "--no-tui",
        "--out",
        str(tmp_path / "o"),
    )
    assert res.returncode == 1
    assert "cannot reach http://127.0.0.1:9/v1/models" in res.stderr
    assert "Traceback" not in res.stderr


def _start(tmp_path: Path, load: str, max_tokens: str) -> tuple[subprocess.Popen[str], Path]:
    """A real ``loadtest run`` process against its built-in simulator."""
    out = tmp_path / "out"
    scenario = inline_scenario(tmp_path, load)
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "loadtest",
            "run",
            str(scenario),
            "--out",
            str(out),
            "--no-tui",
            "--max-tokens",
            max_tokens,
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
    )
    return proc, out


def _start_and_wait_for_requests(
    tmp_path: Path, load: str, max_tokens: str
) -> tuple[subprocess.Popen[str], Path]:
    """A real ``loadtest run`` process, returned once requests.jsonl has lines."""
    proc, out = _start(tmp_path, load, max_tokens)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        jsonl = [p / "requests.jsonl" for p in out.iterdir()] if out.exists() else []
        if any(p.exists() and p.stat().st_size for p in jsonl):
            break
        time.sleep(0.05)
    return proc, out


def _start_and_wait_for_streams(
    tmp_path: Path, load: str, max_tokens: str
) -> tuple[subprocess.Popen[str], Path]:
    """A real ``loadtest run`` process, returned once its simulator serves a request.

    Streams too long to end during the test write no line to requests.jsonl, so the
    simulator's own count of the requests it serves says the run is under way.
    """
    proc, out = _start(tmp_path, load, max_tokens)
    assert proc.stderr is not None
    url = None
    while url is None:
        line = proc.stderr.readline()  # the note comes before any request is sent
        assert line, "the run ended before it said which simulator it uses"
        found = re.search(r"built-in simulator at (http://\S+)", line)
        url = found.group(1) if found else None
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url + "/health", timeout=5) as resp:
                if orjson.loads(resp.read())["running"] >= 1:
                    break
        except OSError:
            pass  # the note comes as the simulator starts, before it listens
        time.sleep(0.05)
    else:
        raise AssertionError("the simulator served no request within 30 s")
    return proc, out


def _accounted(run_dir: Path) -> dict[str, int]:
    s = orjson.loads((run_dir / "summary.json").read_bytes())
    r: dict[str, int] = s["requests"]
    assert s["run"]["interrupted"] is True
    rows = read_jsonl(run_dir / "requests.jsonl")
    assert r["sent"] == r["ok"] + r["failed"] + r["cancelled"] == len(rows)
    assert len({row["index"] for row in rows}) == len(rows)
    assert r["sent"] > 0
    return r


def test_sigint_stops_the_run_and_still_writes_everything(tmp_path: Path) -> None:
    proc, out = _start_and_wait_for_requests(tmp_path, "duration_s = 60\ngrace_s = 0.5\n", "400")
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 130, stderr
    _accounted(only_run_dir(out))


def test_a_second_ctrl_c_stops_at_once_and_still_writes_what_was_accounted(
    tmp_path: Path,
) -> None:
    # Streams of ~40 s and a 60 s grace: only the second Ctrl-C can end this quickly.
    proc, out = _start_and_wait_for_streams(tmp_path, "duration_s = 120\ngrace_s = 60\n", "4000")
    proc.send_signal(signal.SIGINT)
    time.sleep(0.5)
    assert proc.poll() is None  # still waiting for the in-flight streams
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=20)
    assert proc.returncode == 130, stderr
    assert "again to cancel them" in stderr
    r = _accounted(only_run_dir(out))
    assert r["cancelled"] >= 1


def test_sigterm_stops_gracefully_like_ctrl_c(tmp_path: Path) -> None:
    proc, out = _start_and_wait_for_requests(tmp_path, "duration_s = 60\ngrace_s = 0.5\n", "400")
    proc.send_signal(signal.SIGTERM)
    _, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 130, stderr
    _accounted(only_run_dir(out))


def test_a_killed_run_leaves_whole_request_lines_and_no_half_summary(tmp_path: Path) -> None:
    proc, out = _start_and_wait_for_requests(tmp_path, "duration_s = 60\n", "8")
    time.sleep(1.5)
    proc.kill()
    _, err = proc.communicate(timeout=10)
    run_dir = only_run_dir(out)
    rows = read_jsonl(run_dir / "requests.jsonl")  # every line parses
    assert rows
    assert not (run_dir / "summary.json").exists()
    assert not list(run_dir.glob(".*.tmp"))
    _assert_the_simulator_died(err)


def _assert_the_simulator_died(err: str) -> None:
    """The simulator a killed run started (named in its stderr) does not outlive it."""
    sim_url = re.search(r"built-in simulator at (http://\S+)", err)
    assert sim_url is not None, err
    host, port = sim_url.group(1).removeprefix("http://").split(":")
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            socket.create_connection((host, int(port)), timeout=1).close()
        except OSError:
            break
        time.sleep(0.2)
    else:
        raise AssertionError(f"the simulator at {sim_url.group(1)} outlived the killed run")


def _hdr_stats(values_ms: list[float]) -> dict[str, float]:
    """count, min, p50..p999 and max of ``values_ms`` as summary.json states them, from
    hdrh itself (not loadtest's fast percentile), at the lines' 0.1 µs truncated to µs."""
    from hdrh.histogram import HdrHistogram

    h = HdrHistogram(1, 3_600_000_000, 3)
    for v in values_ms:
        h.record_value(round(v * 1e4) // 10)
    stats = {"count": h.get_total_count(), "min": round(h.get_min_value() / 1e3, 3)}
    for key, q in (("p50", 50), ("p90", 90), ("p95", 95), ("p99", 99), ("p999", 99.9)):
        stats[key] = round(h.get_value_at_percentile(q) / 1e3, 3)
    stats["max"] = round(h.get_max_value() / 1e3, 3)
    return stats


def test_a_killed_run_is_summarized_reported_and_compared(tmp_path: Path) -> None:
    import shutil

    import numpy as np

    proc, out = _start(tmp_path, "duration_s = 120\n", "8")
    deadline = time.monotonic() + 60
    run_dir = None
    while time.monotonic() < deadline:
        found = [p for p in out.glob("*/requests.jsonl")] if out.exists() else []
        if found and found[0].read_bytes().count(b"\n") >= 150:
            run_dir = found[0].parent
            break
        time.sleep(0.1)
    assert run_dir is not None, "the run wrote no 150 lines within 60 s"
    live = loadtest("summarize", str(run_dir))
    assert live.returncode == 2 and "still going" in live.stderr, live.stderr
    proc.kill()
    _, err = proc.communicate(timeout=10)
    _assert_the_simulator_died(err)
    rows = read_jsonl(run_dir / "requests.jsonl")

    torn = tmp_path / "torn"
    shutil.copytree(run_dir, torn)
    with open(torn / "requests.jsonl", "ab") as f:
        f.write(orjson.dumps(rows[-1])[:60])
    res = loadtest("summarize", str(torn))
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith("REBUILT: the run was killed")
    assert "1 torn last line not counted" in " ".join(res.stdout.split())
    s = orjson.loads((torn / "summary.json").read_bytes())
    r = s["requests"]
    assert r["sent"] == len(rows) == s["rebuilt"]["lines"] and s["rebuilt"]["torn_lines"] == 1
    assert r["ok"] == sum(row["outcome"] == "ok" for row in rows)
    assert r["warmup"] == sum(bool(row["warmup"]) for row in rows)
    assert r["sent"] == r["ok"] + r["failed"] + r["cancelled"]
    measured = [row for row in rows if row["outcome"] == "ok" and not row["warmup"]]
    for metric in ("ttft_ms", "tpot_ms", "e2e_ms", "dispatch_lag_ms", "client_lag_ms"):
        values = [row[metric] for row in measured if row[metric] is not None]
        assert s["metrics"][metric] == {**_hdr_stats(values), "mean": s["metrics"][metric]["mean"]}
        assert s["metrics"][metric]["mean"] == pytest.approx(np.mean(values), abs=1e-3)
        # The sample at HdrHistogram's rank (0.99 n, rounded), within its bucket's width.
        p99 = float(np.sort(values)[max(1, int(0.99 * len(values) + 0.5)) - 1])
        assert s["metrics"][metric]["p99"] == pytest.approx(p99, rel=1e-3, abs=2e-3)

    # report and compare read the killed folder as it is: rebuilt, and not written.
    rep = loadtest("report", str(run_dir))
    assert rep.returncode == 0, rep.stderr
    assert "REBUILT: the run was killed" in (run_dir / "report.html").read_text()
    assert "no summary.json: rebuilt from requests.jsonl" in rep.stderr
    assert not (run_dir / "summary.json").exists()
    cmp = loadtest("compare", str(run_dir), str(torn))
    assert cmp.returncode == 0, cmp.stdout + cmp.stderr
    assert "NOTE: A: 1 run(s) killed before writing a summary" in cmp.stdout
    assert "no detectable difference" in cmp.stdout


def test_sim_command_serves_until_terminated() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "loadtest.sim", "--port", "0"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line.startswith("loadtest sim listening on http://127.0.0.1:")
    url = line.split()[-1]
    with urllib.request.urlopen(url + "/v1/models", timeout=5) as resp:
        assert orjson.loads(resp.read())["data"][0]["id"] == "sim-llm"
    proc.terminate()
    assert proc.wait(10) == 0
    proc.stdout.close()
    assert proc.stderr is not None
    proc.stderr.close()


def test_the_command_ends_at_once_with_its_exit_code_and_runs_the_exit_handlers(
    tmp_path: Path,
) -> None:
    # A failed SLO is exit 1; the atexit handler (a marker file) still runs; the whole
    # report is printed and every file is written before the quick exit.
    out, marker = tmp_path / "out", tmp_path / "atexit-ran"
    code = (
        "import atexit, pathlib, sys\n"
        f"atexit.register(pathlib.Path({str(marker)!r}).touch)\n"
        "from loadtest.cli.command import command\n"
        "command(sys.argv[1:])\n"
    )
    args = ["run", str(inline_scenario(tmp_path)), "--requests", "10", "--out", str(out)]
    res = subprocess.run(
        [sys.executable, "-c", code, *args, "--no-tui", "--slo", "ttft_ms.p50=0.0001"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
    )
    assert res.returncode == 1, res.stderr
    assert marker.exists()
    assert res.stdout.rstrip().splitlines()[-1].startswith("results: ")
    summary = orjson.loads((only_run_dir(out) / "summary.json").read_bytes())
    assert summary["requests"]["sent"] == 10
