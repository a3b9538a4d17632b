"""The command line as a user runs it: a real process, the real simulator, real files."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import orjson

from tests.conftest import read_jsonl

ROOT = Path(__file__).resolve().parent.parent


def loadtest(*args: str, cwd: Path = ROOT, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "loadtest.cli", *args],
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


def test_sigint_stops_the_run_and_still_writes_everything(tmp_path: Path) -> None:
    out = tmp_path / "out"
    scenario = inline_scenario(tmp_path, "duration_s = 60\ngrace_s = 0.5\n")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "loadtest.cli",
            "run",
            str(scenario),
            "--out",
            str(out),
            "--no-tui",
            "--max-tokens",
            "400",
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if (
            out.exists()
            and any(out.iterdir())
            and any(
                (p / "requests.jsonl").stat().st_size
                for p in out.iterdir()
                if (p / "requests.jsonl").exists()
            )
        ):
            break
        time.sleep(0.2)
    time.sleep(1.0)
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 130, stderr
    run_dir = only_run_dir(out)
    s = orjson.loads((run_dir / "summary.json").read_bytes())
    r = s["requests"]
    assert s["run"]["interrupted"] is True
    assert (
        r["sent"]
        == r["ok"] + r["failed"] + r["cancelled"]
        == len(read_jsonl(run_dir / "requests.jsonl"))
    )
    assert r["sent"] > 0


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
    import urllib.request

    url = line.split()[-1]
    with urllib.request.urlopen(url + "/v1/models", timeout=5) as resp:
        assert orjson.loads(resp.read())["data"][0]["id"] == "sim-llm"
    proc.terminate()
    assert proc.wait(10) == 0
    proc.stdout.close()
    assert proc.stderr is not None
    proc.stderr.close()
