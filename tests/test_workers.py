"""``--workers N``: splitting the load, merging the histograms, whole runs."""

from __future__ import annotations

import dataclasses
import itertools
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest

from loadtest.app.scale.workers import split_load
from loadtest.config.scenario import LoadSpec
from loadtest.errors import UsageError
from loadtest.measure.merge import encode_metrics, merge_metrics
from loadtest.measure.recorders import Metrics
from loadtest.model.record import RequestRecord
from loadtest.report.hlog import read_hlog
from tests.conftest import loadtest_here, read_jsonl

ROOT = Path(__file__).resolve().parent.parent


def test_closed_loop_sessions_and_counts_are_divided() -> None:
    plans = split_load(LoadSpec(mode="closed", concurrency=7, requests=10), 3, seed=5)
    assert [p.load.concurrency for p in plans] == [3, 2, 2]
    assert [p.load.requests for p in plans] == [4, 3, 3]
    assert len({p.seed for p in plans}) == 3
    with pytest.raises(UsageError, match="at least one"):
        split_load(LoadSpec(mode="closed", concurrency=2), 3, seed=0)


def test_open_loop_arrivals_are_shared_out_and_caps_divided() -> None:
    load = LoadSpec(mode="gamma", rate=90.0, concurrency=9, rate_ceiling=120.0)
    plans = split_load(dataclasses.replace(load, arrival=(("burstiness", 2.0),)), 3, seed=0)
    # Each worker draws the whole plan and keeps its share of it (every third arrival):
    # test_schedule shows that the shares together are the plan, for every process.
    assert [p.share for p in plans] == [(0, 3), (1, 3), (2, 3)]
    assert {p.load.rate for p in plans} == {90.0}
    assert {p.load.arrival for p in plans} == {(("burstiness", 2.0),)}
    assert [p.load.concurrency for p in plans] == [3, 3, 3]
    assert {p.load.rate_ceiling for p in plans} == {40.0}


def _record(i: int, ttft_ms: float, category: str) -> RequestRecord:
    sent = 1_000_000_000 + i * 1_000_000
    first = sent + int(ttft_ms * 1e6)
    return RequestRecord(
        index=i,
        prompt_id="p",
        source="s",
        category=category,
        warmup=False,
        intended_ns=sent,
        sent_ns=sent,
        end_ns=first + 5_000_000,
        outcome="ok" if i % 7 else "failed",
        error_class=None if i % 7 else "http_5xx",
        first_token_ns=first,
        last_token_ns=first + 4_000_000,
        token_chunk_ns=(first, first + 2_000_000, first + 4_000_000),
        chunks=3,
        output_tokens=3,
    )


def _split(n: int, workers: int, *, closed_loop: bool) -> tuple[Metrics, list[Metrics]]:
    """n records into one Metrics, and the same records dealt round-robin to workers."""
    single = Metrics(closed_loop=closed_loop, t0_ns=0)
    parts = [Metrics(closed_loop=closed_loop, t0_ns=0) for _ in range(workers)]
    for i in range(n):
        rec = _record(i, 5 + (i * 37) % 200, "ab"[i % 2])
        single.add(rec)
        parts[i % workers].add(rec)
    for m in (single, *parts):
        m.roll(1.0)
    return single, parts


def test_merged_histograms_equal_one_histogram_of_every_value() -> None:
    single, parts = _split(300, 3, closed_loop=False)
    merged = merge_metrics([encode_metrics(p) for p in parts], closed_loop=False, t0_ns=0)
    assert merged.outcomes == single.outcomes and merged.errors == single.errors
    for name, h in single.total.hists.items():
        other = merged.total.hists[name]
        assert other.get_total_count() == h.get_total_count(), name
        for q in (50, 90, 99, 99.9, 100):
            assert other.get_value_at_percentile(q) == h.get_value_at_percentile(q), name
        assert merged.total.sums[name] == pytest.approx(single.total.sums[name])
    assert merged.by_category.keys() == single.by_category.keys()
    assert merged.measure_start_ns == single.measure_start_ns
    assert merged.last_end_ns == single.last_end_ns


def _scenario(tmp: Path, load: str) -> Path:
    path = tmp / "w.toml"
    path.write_text(
        'name = "w"\nmax_tokens = 24\n[[sources]]\nkind = "inline"\n'
        'prompts = ["a", "b", "c", "d"]\n[load]\n' + load + "[sim]\nttft_ms = 5.0\nitl_ms = 1.0\n"
    )
    return path


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return loadtest_here(*args, cwd=ROOT)


def _one_run(sc: Path, out: Path, *extra: str) -> Path:
    """Run scenario ``sc`` headless into ``out``; its one run folder."""
    res = _cli("run", str(sc), "--no-tui", "--seed", "3", "--out", str(out), *extra)
    assert res.returncode == 0, res.stderr[-2000:]
    (run_dir,) = out.iterdir()
    return run_dir


def test_two_workers_account_for_every_request_and_merge_their_files(tmp_path: Path) -> None:
    sc = _scenario(tmp_path, "concurrency = 6\nrequests = 200\n")
    run_dir = _one_run(sc, tmp_path / "out", "--workers", "2")
    s = orjson.loads((run_dir / "summary.json").read_bytes())
    assert s["run"]["workers"] == 2
    assert s["requests"]["sent"] == s["requests"]["ok"] == 200
    assert s["requests"]["resent_stale_connection"] == 0  # same schema as one process
    rows = read_jsonl(run_dir / "requests.jsonl")
    assert len(rows) == 200 and {r["worker"] for r in rows} == {0, 1}
    per_worker = [len(read_jsonl(run_dir / f"worker-{i}" / "requests.jsonl")) for i in (0, 1)]
    assert per_worker == [100, 100]
    hlog = read_hlog(run_dir / "histograms.hlog")
    assert hlog["ttft_ms"].get_total_count() == s["metrics"]["ttft_ms"]["count"] == 200
    # Each worker's own dispatch lag, beside the merged one (a busy worker shows). The
    # bound below is exact only where every count's p99 rank leaves the same share above
    # it: HDR's rank is int(0.99 n + 0.5), so 100 values leave 1 above and 200 leave 2,
    # and no more than 2 merged values can exceed the larger worker's p99. (With 60 a
    # worker, 1 is left above each and 1 above the merged 120: in one CI run the merged
    # p99 was worker 1's maximum, 21.34 ms, over both workers' p99s, 20.37 and 20.66.)
    lags = s["run"]["worker_dispatch_lag"]
    assert [w["worker"] for w in lags] == [0, 1]
    merged_p99 = s["metrics"]["dispatch_lag_ms"]["p99"]
    assert max(w["dispatch_lag_ms"]["p99"] for w in lags) >= merged_p99 * 0.99 - 0.01


def test_open_loop_rate_is_kept_across_workers(tmp_path: Path) -> None:
    sc = _scenario(tmp_path, 'mode = "poisson"\nrate = 80.0\nduration_s = 4\n')
    run_dir = _one_run(sc, tmp_path / "out", "--workers", "2")
    s = orjson.loads((run_dir / "summary.json").read_bytes())
    # The arrivals are seeded (--seed 3), so these figures are fixed; the bounds hold
    # for any seed too. 320 arrivals expected, Poisson: P(outside (245, 395)) = 4e-5.
    assert 245 < s["requests"]["sent"] < 395
    assert s["requests"]["sent"] == s["requests"]["ok"] + s["requests"]["failed"]
    # The merged arrivals are one Poisson process of 80/s: exponential gaps, whose
    # coefficient of variation is 1. The arrivals are seeded, so the CV is fixed; over
    # ~320 gaps (simulated 10^6 times) the sample CV falls below 0.8 at 8e-6 and above
    # 1.2 at ~1e-3 (1.3: 2.5e-5, the bound to take were the seeding to go); the mean gap
    # (12.5 ms, sd 0.7) leaves (9, 16) at < 1e-6. One worker's rate alone (gap 25 ms) or
    # evenly spaced arrivals (CV 0) still fail.
    intended = sorted(r["intended_ms"] for r in read_jsonl(run_dir / "requests.jsonl"))
    gaps = [b - a for a, b in itertools.pairwise(intended)]
    mean = sum(gaps) / len(gaps)
    sd = (sum((g - mean) ** 2 for g in gaps) / len(gaps)) ** 0.5
    assert 9.0 < mean < 16.0 and 0.8 < sd / mean < 1.2, (mean, sd)
    # And it is the one process's plan, arrival for arrival: each worker drew the whole
    # plan from the run's seed and kept its share (a worker drawing from its own seed
    # would still make a Poisson process, but not this one).
    alone = _one_run(sc, tmp_path / "alone")
    one = sorted(r["intended_ms"] for r in read_jsonl(alone / "requests.jsonl"))
    assert len(one) == len(intended)
    assert all(abs(a - b) < 1.0 for a, b in zip(one, intended, strict=True))


def test_constant_arrivals_of_two_workers_interleave_into_one_even_stream(tmp_path: Path) -> None:
    # Each worker sends every other arrival of one plan at 80/s: the merged stream is
    # even only if both count from one start instant and keep their own share.
    # 1.5 s: 120 intended times (exact, not drawn), 119 gaps, each one checked.
    sc = _scenario(tmp_path, 'mode = "constant"\nrate = 80.0\nduration_s = 1.5\n')
    run_dir = _one_run(sc, tmp_path / "out", "--workers", "2")
    rows = read_jsonl(run_dir / "requests.jsonl")
    intended = sorted(r["intended_ms"] for r in rows)
    gaps = [b - a for a, b in itertools.pairwise(intended)]
    assert len(rows) >= 100 and all(12.0 < g < 13.0 for g in gaps), gaps[:10]


def test_ctrl_c_stops_every_worker_and_the_merged_results_are_written(tmp_path: Path) -> None:
    sc = _scenario(tmp_path, "concurrency = 4\nduration_s = 60\ngrace_s = 0.5\n")
    out = tmp_path / "out"
    proc = start_two_workers(sc, out)
    # Interrupt once both workers have completed requests (each writes progress.json once
    # a second), instead of a fixed sleep that had to cover spawning on a busy machine.
    deadline = time.monotonic() + 60
    while not all(_progressed(out, i) for i in (0, 1)):
        assert proc.poll() is None and time.monotonic() < deadline, "no worker progressed"
        time.sleep(0.1)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err[-2000:]
    (run_dir,) = out.iterdir()
    s = orjson.loads((run_dir / "summary.json").read_bytes())
    r = s["requests"]
    assert s["run"]["interrupted"] is True and r["sent"] > 0
    assert r["sent"] == r["ok"] + r["failed"] + r["cancelled"]
    assert r["sent"] == len(read_jsonl(run_dir / "requests.jsonl"))


def start_two_workers(sc: Path, out: Path) -> subprocess.Popen[str]:
    """``loadtest run sc --workers 2`` as a process of its own (to signal, or to kill a
    worker of), writing into ``out``."""
    argv = ["run", str(sc), "--no-tui", "--workers", "2", "--out", str(out)]
    return subprocess.Popen(
        [sys.executable, "-m", "loadtest", *argv],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
    )


def kill_worker_1(proc: subprocess.Popen[str]) -> None:
    """SIGKILL worker 1 of the run ``proc``: the child that holds worker-1/requests.jsonl
    open."""
    import psutil

    (victim,) = [
        child
        for child in psutil.Process(proc.pid).children(recursive=True)
        if any("worker-1" in f.path for f in child.open_files())
    ]
    victim.kill()


def _progressed(out: Path, worker: int) -> bool:
    """Whether worker ``worker`` of the run under ``out`` reported a completed request."""
    for path in out.glob(f"*/worker-{worker}/progress.json"):
        try:
            return int(orjson.loads(path.read_bytes())["ok"]) > 0
        except (OSError, orjson.JSONDecodeError):
            return False  # not there yet, or caught mid-replace
    return False


def _live(tmp: Path, parts: list[Metrics]) -> list[Path]:
    dirs = []
    for i, m in enumerate(parts):
        d = tmp / f"worker-{i}"
        d.mkdir()
        snapshot = {
            "metrics": encode_metrics(m),
            "in_flight": 2,
            "measured": m.sent,
            "rate_history": [10.0, 20.0],
            "token_rate_history": [100.0, 200.0],
            "ttft_p95_history": [5.0, 6.0 + i],
        }
        (d / "live.json").write_bytes(orjson.dumps(snapshot))
        dirs.append(d)
    return dirs


async def test_the_dashboard_shows_the_workers_merged(tmp_path: Path) -> None:
    from loadtest.config.scenario import parse_scenario
    from loadtest.tui import Dashboard
    from loadtest.tui.workers_source import WorkersSource

    single, parts = _split(200, 2, closed_loop=True)
    sc = parse_scenario(
        {"sources": [{"kind": "inline", "prompts": ["x"]}], "load": {"duration_s": 10}}, "w.toml"
    )
    source = WorkersSource(_live(tmp_path, parts), sc, "http://x", "m")
    f = source.frame("ttft_ms", "all")
    assert (f.ok, f.failed, f.in_flight) == (single.outcomes["ok"], single.outcomes["failed"], 4)
    assert f.req_rate == (20.0, 40.0) and f.ttft_p95 == (5.0, 7.0)
    ttft = next(r for r in f.percentiles if r[0] == "ttft_ms")
    h = single.total.hists["ttft_ms"]
    assert ttft[1] == h.get_total_count() and ttft[2] == h.get_value_at_percentile(50) / 1e3
    assert source.frame("ttft_ms", "a").categories == ("all", "a", "b")

    done = {"flag": False}
    stops: list[int] = []
    app = Dashboard(
        watch=source, finished=lambda: done["flag"], on_stop=lambda: stops.append(1), refresh_s=0.1
    )
    async with app.run_test(size=(120, 48)) as pilot:
        await pilot.pause(0.3)
        assert app.last_frame is not None and "2/2 workers" in app.last_frame.phase
        await pilot.press("q")
        assert stops == [1]
        done["flag"] = True
        await pilot.pause(0.5)
    assert not app.is_running


@pytest.mark.quiet  # a neighbour's load once moved one side's TTFT by 2.6 ms (margin 3.4)
def test_a_two_worker_run_equals_a_single_process_run_within_noise(tmp_path: Path) -> None:
    """Equivalence, not a failed difference test: every median's 95% interval of B - A
    must lie within a margin, which a real gap of that size would break."""
    from loadtest.report.compare import compare_runs, load_run

    path = _scenario(tmp_path, "concurrency = 8\nrequests = 160\n")
    # No drawn spread: fixed output lengths, TTFTs and gaps. With 4 prompts a drawn TTFT
    # takes 4 values 10-25% apart and the median of the run sits on a rank boundary
    # between two of them, so whether the interval spans a gap was fixed by the seeds
    # (and could fail on every run after a change of pool or RNG). Without spread every
    # figure is the planned one plus the machine's overhead, and 160 requests (20 a
    # session) give a median whose interval is a fraction of a millisecond wide.
    sim = "ttft_ms = 20.0\nitl_ms = 4.0\nmin_output_fraction = 1.0\nttft_sigma = 0.0\n"
    sim += "itl_sigma = 0.0"
    path.write_text(path.read_text().replace("ttft_ms = 5.0\nitl_ms = 1.0", sim))
    single = load_run(_one_run(path, tmp_path / "one"))
    workers = load_run(_one_run(path, tmp_path / "two", "--workers", "2"))
    for run in (single, workers):
        assert run.summary["requests"]["ok"] == 160
    c = compare_runs([single], [workers], resamples=1000)
    for metric in ("ttft_ms", "tpot_ms", "e2e_ms"):
        p50 = c["metrics"][metric]["percentiles"]["p50"]
        a, low, high = p50["a"], p50["ci_low"], p50["ci_high"]
        assert a is not None and low is not None and high is not None, (metric, p50)
        # The two runs are sequential, with different process layouts on a shared 2-core
        # machine. This very setup, 12 pairs on a quiet machine
        # (benchmarks/bench_workers_equivalence.py): the interval's far end reached 0.76
        # ms on TTFT (3.6% of A), 0.02 ms on TPOT, 0.93 ms on e2e (0.8%); with drawn
        # spread, a ±2.1 ms TTFT margin once failed while the suite's other workers ran.
        # max(15%, 2 ms) is 3.2 ms on TTFT (4x the quiet worst), 2 ms on TPOT (100x),
        # 17 ms on e2e (18x): room for a neighbour's load, while a per-worker bias of a
        # few ms (a wrong t0, a phase, one worker's clock) still fails.
        margin = max(0.15 * a, 2.0)
        assert -margin < low and high < margin, (metric, p50)
