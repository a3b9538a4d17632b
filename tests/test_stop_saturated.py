"""The ``saturated`` stop rule: a queue that only grows ends the load early, failing it.

Pure checks of the trend it fits (a steady climb fires; noise, a drained burst, a high
but flat latency or a queue without slower answers do not), then the simulator serving
two requests at once: offered four times what it serves, the run stops early with its
evidence, every request accounted; offered a third of it, the run goes to its bound.
The capacity search reads a saturated point as a fail.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import orjson
import pytest

from loadtest.app.capacity.search import point_of
from loadtest.cli.main import main
from loadtest.config.scenario import parse_scenario
from loadtest.config.stop_rules import RunSoFar, TrendSample
from loadtest.config.stop_saturated import (
    DEFAULT,
    SATURATED,
    SaturationSettings,
    fitted_rise,
    ticked,
)
from loadtest.errors import ScenarioError
from loadtest.model.io import run_requests
from loadtest.model.summary import Summary

WINDOW = SaturationSettings(window_s=3.0, rise=0.5)


def _seen(samples: list[TrendSample]) -> RunSoFar:
    # The rule judges when a request ends in a new half second: cut the samples there.
    n = max(i + 1 for i in range(1, len(samples)) if ticked(samples[: i + 1]))
    samples = samples[:n]
    return RunSoFar(samples[-1].end_s, n, n, 0, 0, samples)


def _trend(queue: np.ndarray, ttft: np.ndarray, seconds: float = 4.0) -> list[TrendSample]:
    t = np.linspace(0.0, seconds, len(queue))
    return [TrendSample(float(a), int(q), float(f)) for a, q, f in zip(t, queue, ttft, strict=True)]


def test_a_steady_climb_of_both_fires_and_says_its_evidence() -> None:
    rng = np.random.default_rng(1)
    n = 200
    queue = np.linspace(4, 60, n) + rng.normal(0, 2, n)
    ttft = np.linspace(100, 2000, n) + rng.normal(0, 50, n)
    reason = SATURATED.reached(WINDOW, _seen(_trend(queue, ttft)))
    assert reason is not None
    assert reason.startswith("saturated: over the last 3.0 s in flight rose ")
    assert "TTFT from the intended send" in reason and "behind arrivals" in reason


def test_noise_a_drained_burst_a_flat_latency_or_a_queue_alone_do_not_fire() -> None:
    rng = np.random.default_rng(2)
    n = 200
    flat_q = 20 + rng.normal(0, 3, n)
    flat_f = 900 + rng.normal(0, 200, n)
    climbing_q = np.linspace(4, 60, n)
    climbing_f = np.linspace(100, 2000, n)
    burst_q = np.concatenate([np.linspace(5, 40, n // 4), np.linspace(40, 5, n - n // 4)])
    burst_f = np.concatenate([np.linspace(100, 900, n // 4), np.linspace(900, 100, n - n // 4)])
    for queue, ttft in [
        (flat_q, flat_f),  # high and noisy, but level
        (climbing_q, flat_f),  # more in flight, answers no slower: not a queue
        (flat_q, climbing_f),  # slower answers, no queue: a slower endpoint
        (burst_q, burst_f),  # a burst that drains
    ]:
        assert SATURATED.reached(WINDOW, _seen(_trend(queue, ttft))) is None
    # Before a window's worth of measured load nothing is judged.
    early = _trend(climbing_q, climbing_f, seconds=2.0)
    assert SATURATED.reached(WINDOW, _seen(early)) is None


def test_the_fit_is_a_least_squares_line_with_its_slope_in_standard_errors() -> None:
    x = np.arange(10.0)
    start, end, t = fitted_rise(x, 2 * x + 1)
    assert start == pytest.approx(1.0) and end == pytest.approx(19.0) and t == np.inf
    assert fitted_rise(x, -x)[2] == 0.0
    rng = np.random.default_rng(3)
    y = 0.1 * x + rng.normal(0, 1, 10)
    # scipy's linregress agrees on the slope's t.
    from scipy import stats

    r = stats.linregress(x, y)
    assert fitted_rise(x, y)[2] == pytest.approx(r.slope / r.stderr)


def test_its_table_is_checked_naming_the_key() -> None:
    def parse(stop: dict[str, object]) -> object:
        load = {"stop": [{"kind": "saturated", **stop}]}
        data = {"name": "x", "sources": [{"kind": "inline", "prompts": ["a"]}], "load": load}
        return parse_scenario(data, "x.toml")

    with pytest.raises(ScenarioError, match=r"load\.stop\[0\]\.window_s: expected a number > 0"):
        parse({"window_s": 0})
    with pytest.raises(ScenarioError, match=r"load\.stop\[0\]\.rise: expected a number > 0"):
        parse({"rise": -1})
    assert SaturationSettings(10.0, 0.5) == DEFAULT


def _scenario(tmp_path: Path, rate: float, duration_s: float) -> Path:
    prompts = ", ".join(f'"question {i}"' for i in range(10))
    path = tmp_path / "queue.toml"
    path.write_text(
        f'name = "queue"\nmax_tokens = 16\n[[sources]]\nkind = "inline"\nprompts = [{prompts}]\n'
        f'[load]\nmode = "constant"\nrate = {rate}\nduration_s = {duration_s}\nwarmup_s = 0\n'
        '[[load.stop]]\nkind = "saturated"\nwindow_s = 3\n'
        # Two at a time, ~50 ms each: it serves ~40 requests a second.
        "[sim]\nttft_ms = 20.0\nitl_ms = 2.0\nmax_running = 2\nmin_output_fraction = 1.0\n"
        "[slo]\nttft_ms.p50 = 10000\n"
    )
    return path


def _summary(out: Path) -> tuple[Summary, Path]:
    (run_dir,) = out.iterdir()
    data: Summary = orjson.loads((run_dir / "summary.json").read_bytes())
    return data, run_dir


def test_an_endpoint_offered_four_times_what_it_serves_stops_early_failed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    code = main(["run", str(_scenario(tmp_path, 160, 30)), "--no-tui", "--out", str(out)])
    err = capsys.readouterr().err
    s, run_dir = _summary(out)
    (fired,) = s.get("stopped", [])
    assert fired["rule"] == "saturated" and fired["fails"] is True, fired
    assert fired["reason"].startswith("saturated: over the last "), fired
    assert code == 1 and "stopped early (saturated: " in err.splitlines()[-1]
    # Long before its 30 s, and every request sent is accounted.
    assert s["run"]["duration_s"] < 20 and not s["run"]["interrupted"]
    assert sum(1 for _ in run_requests(run_dir)) == s["requests"]["sent"]
    # A capacity search reads the point as a fail, with the evidence as its why.
    point = point_of(160, s)
    assert point.outcome == "fail" and point.why == fired["reason"]


def test_an_endpoint_offered_a_third_of_it_runs_to_its_bound(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    code = main(["run", str(_scenario(tmp_path, 12, 5)), "--no-tui", "--out", str(out)])
    capsys.readouterr()
    s, _ = _summary(out)
    assert "stopped" not in s and code == 0
    assert s["requests"]["ok"] >= 40
