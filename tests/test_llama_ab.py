"""End-to-end comparisons on a real engine: ``run`` + ``compare`` of the shipped llama
scenarios, and ``ab`` of deployments it starts itself. Apart from tests/test_llama.py so
the suite's workers run the two files side by side (each is minutes on 2 cores).

They need the ``llama`` extra. Without it they are skipped, unless
``LOADTEST_REQUIRE_LLAMA=1`` (set by CI), where a missing extra is a failure.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from tests.conftest import read_jsonl
from tests.llama_servers import require_llama_extra
from tests.test_llama import REPETITIVE

require_llama_extra()

pytestmark = pytest.mark.timeout(300)


def test_baseline_and_speculative_runs_compare_end_to_end(tmp_path: Path) -> None:
    """The shipped llama scenarios, each starting and stopping its engine, then compare."""
    scenarios = Path(__file__).resolve().parent.parent / "scenarios"
    dirs = []
    for name in ("llama-baseline", "llama-spec"):
        out = tmp_path / name
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "loadtest",
                "run",
                str(scenarios / f"{name}.toml"),
                "--no-tui",
                # compare judges a metric on at least 10 values a side; short answers
                # keep the engine's work what 4 requests of 64 tokens were.
                "--requests",
                "10",
                "--max-tokens",
                "24",
                "--out",
                str(out),
            ],
            capture_output=True,
            text=True,
            timeout=240,
        )
        assert done.returncode == 0, done.stderr[-2000:]
        (run_dir,) = out.iterdir()
        dirs.append(run_dir)
    report = tmp_path / "compare.json"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "loadtest",
            "compare",
            str(dirs[0]),
            str(dirs[1]),
            "--json",
            str(report),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    c = orjson.loads(report.read_bytes())
    assert c["a"]["completion_rate"] == c["b"]["completion_rate"] == 1.0
    assert c["a"]["acceptance_rate_timings"] is None  # the baseline drafts nothing
    assert c["b"]["acceptance_rate_timings"] is not None
    ttft_a = [r["ttft_ms"] for r in read_jsonl(dirs[0] / "requests.jsonl") if r["ttft_ms"]]
    p50 = c["metrics"]["ttft_ms"]["percentiles"]["p50"]
    assert min(ttft_a) <= p50["a"] <= max(ttft_a)
    assert p50["ci_low"] <= p50["diff"] <= p50["ci_high"]
    assert c["metrics"]["ttft_ms"]["verdict"] in ("faster", "slower", "no detectable difference")
    assert "ttft_ms" in done.stdout


def test_ab_of_managed_deployments_reports_latency_acceptance_and_costs(tmp_path: Path) -> None:
    """``ab`` starting llama.cpp itself: no speculation against the target as its own draft.

    Every figure of the report is there with sane values: latency lines, acceptance from
    the engine's counters beside loadtest's own (agreeing within the stated tolerance),
    cold start, memory (the self-draft loads the weights twice: more RSS), and energy or
    why this machine cannot tell."""
    scenario = tmp_path / "tiny.toml"
    prompts = str([*REPETITIVE, "Name three colours of the rainbow, in order:"])
    scenario.write_text(
        'name = "tiny"\nstream = true\nmax_tokens = 24\nseed = 1\n'
        '[[sources]]\nkind = "inline"\ncategory = "repetitive"\n'
        f"prompts = {prompts}\n".replace("'", '"')
        + '[load]\nmode = "closed"\nconcurrency = 2\nrequests = 10\nwarmup_s = 0\n'
    )
    out = tmp_path / "ab"
    argv = ["ab", str(scenario), "--baseline", "llama:none", "--candidate", "llama:self"]
    done = subprocess.run(
        # One start a side of 10 requests (compare judges a metric on >= 10 values a
        # side): four llama.cpp starts were half of this file's time, and how several
        # starts of a side add up is tested on written-down runs (test_compare_figures).
        [sys.executable, "-m", "loadtest", *argv, "--repeat", "1", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=240,
    )
    # 1: a verdict the run could not stand behind (e.g. outputs diverging); never a crash.
    assert done.returncode in (0, 1), done.stderr[-2000:]
    (folder,) = out.iterdir()
    c = orjson.loads((folder / "comparison.json").read_bytes())
    assert not c["blocking"], c["findings"]
    for m in ("ttft_ms", "tpot_ms", "e2e_ms"):
        lines = c["metrics"][m]["percentiles"]
        assert {"p50", "p95"} <= set(lines), m
        assert lines["p50"]["a"] > 0 and lines["p50"]["b"] > 0
        assert lines["p50"]["ci_low"] <= lines["p50"]["diff"] <= lines["p50"]["ci_high"]
    for side, name in (("a", "llama:none"), ("b", "llama:self")):
        cost = c[side]["deployment_cost"]
        assert cost["deployment"] == name and cost["note"] is None and cost["starts"] == 1
        assert 0 < cost["ready_s"] < cost["first_token_s"] < 120
        assert 100 < cost["rss_steady_mib"] <= cost["rss_peak_mib"]
        if cost["energy_j_per_run"] is None:
            assert cost["energy"].startswith("not available on this machine: ")
        else:
            assert cost["energy_j_per_run"] > 0 and cost["energy_j_per_output_token"] > 0
    assert c["memory_added"] > 0.2  # the target's weights and KV cache once more
    assert c["a"]["acceptance"] == []  # the baseline drafts nothing
    (line,) = c["b"]["acceptance"]
    assert line["category"] == "repetitive" and line["drafted"] > 0
    assert line["engine_rate"] >= 0.9  # a greedy draft equal to the target
    # The same steps counted by the engine and by loadtest on the stream.
    assert line["agree"] is True, line
    engine, derived = line["engine_accepted_per_step"], line["derived_accepted_per_step"]
    assert abs(derived - engine) <= line["tolerance"] * (engine + 1)
    eq = c["equivalence"]
    assert eq is not None and eq["prompts_compared"] >= 2
    # Divergent prompts are listed (llama.cpp's batching may change even its own answers).
    assert len(eq["divergent"]) == eq["prompts_compared"] - eq["matching"]
    assert "deployment cost" in done.stdout and "acceptance (engine:" in done.stdout
    report = subprocess.run(
        [sys.executable, "-m", "loadtest", "report", str(folder)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert report.returncode == 0, report.stderr
    page = (folder / "report.html").read_text()
    assert "Deployment cost" in page and "Speculative acceptance per category" in page
