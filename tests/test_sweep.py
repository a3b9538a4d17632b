"""Capacity sweeps: the pure knee and capacity logic, and a sweep against the simulator."""

from __future__ import annotations

from pathlib import Path
from typing import cast

import orjson
import pytest

from loadtest.app.capacity.sweep import (
    best_load,
    find_knee,
    knee_in_range,
    parse_steps,
    render_capacity,
)
from loadtest.cli.main import main
from loadtest.errors import UsageError
from loadtest.model.sweep import CapacityResult, SweepStep, best_load_text
from tests.test_server_sweep import effort_scenario


def _row(load: float, e2e: float | None, met: bool = True) -> SweepStep:
    # Only the columns the knee and the best load read.
    return cast(SweepStep, {"load": load, "e2e_ms_p50": e2e, "slo_met": met})


def test_the_knee_is_the_last_load_before_latency_climbs() -> None:
    rows = [_row(1, 100), _row(2, 104), _row(4, 120), _row(8, 210), _row(16, 400)]
    assert find_knee(rows, 0.5) == 4
    assert find_knee(rows, 0.1) == 2
    assert find_knee(rows, 5.0) == 16
    assert find_knee([_row(1, 100)], 0.5) is None
    assert knee_in_range(rows, 0.5) and knee_in_range(rows, 0.1)
    # Latency never climbed past 5x its lowest: 16 is the top of the range, not a knee.
    assert not knee_in_range(rows, 5.0)
    assert not knee_in_range([_row(1, 100)], 0.5)


def test_no_knee_within_the_range_is_said_so() -> None:
    rows = [_row(1, 100), _row(4, 101), _row(16, 103), _row(64, 104)]
    for r in rows:
        more: dict[str, object] = {"requests_per_s": 1.0, "output_tokens_per_s": 1.0}
        more |= {"goodput_per_s": None, "ttft_ms_p95": 1.0, "e2e_ms_p99": 1.0}
        cast(dict[str, object], r).update(more)
    result: CapacityResult = {
        "kind": "concurrency",
        "steps": rows,
        "best_load": 64,
        "knee": None,
        "knee_tolerance": 0.5,
        "flat_to": find_knee(rows, 0.5),
        "interrupted": False,
    }
    text = render_capacity(result)
    assert "no knee within the range (flat up to 64)" in text
    assert "knee (median e2e within 50% of its lowest): 64" not in text


def test_best_load_needs_every_lower_step_to_meet_the_slos() -> None:
    rows = [_row(1, 1), _row(2, 1), _row(4, 1, met=False), _row(8, 1)]
    assert best_load(rows) == 2
    assert best_load([_row(1, 1, met=False)]) is None


def test_steps_are_checked() -> None:
    assert parse_steps("1,2,4", "concurrency") == (1.0, 2.0, 4.0)
    for bad in ("1,x", "4,2", "0,1", "1.5", "1,1"):
        with pytest.raises(UsageError, match="--concurrency"):
            parse_steps(bad, "concurrency")
    assert parse_steps("0.5,2.5", "rates") == (0.5, 2.5)


def test_a_sweep_finds_the_capacity_the_simulator_was_given(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Four slots, then queueing: median e2e is flat up to 4 sessions and doubles at 8.
    # Every answer is 20 tokens (min_output_fraction 1), so a request's service time is
    # S = 5 + 19 x 3 = 62 ms whatever the seed draws (with drawn lengths, 2S at 8 sessions
    # sat on the 100 ms line, by the plans of three prompts). Up to 4 sessions e2e is
    # ~62-70 ms; at 8, half wait a whole service: ~124 ms and more. The SLO of 95 ms
    # leaves ~35% over the one and ~25% under the other, beyond what a busy machine
    # moves a step's median (sigma 0.05 spreads it ~3%).
    scenario = tmp_path / "slots.toml"
    scenario.write_text(
        'name = "slots"\nmax_tokens = 20\n[[sources]]\nkind = "inline"\n'
        'prompts = ["a", "b", "c"]\n[load]\nconcurrency = 1\nduration_s = 1.5\nwarmup_s = 0.3\n'
        "[sim]\nttft_ms = 5.0\nitl_ms = 3.0\nttft_sigma = 0.05\nitl_sigma = 0.05\n"
        "max_running = 4\nmin_output_fraction = 1.0\n"
    )
    out = tmp_path / "out"
    code = main(
        [
            "sweep",
            str(scenario),
            "--concurrency",
            "1,2,4,8,16",
            "--out",
            str(out),
            "--slo",
            "e2e_ms.p50=95",
        ]
    )
    assert code == 1  # 8 and 16 sessions miss the 95 ms median
    (folder,) = out.iterdir()
    result = orjson.loads((folder / "capacity.json").read_bytes())
    assert [r["load"] for r in result["steps"]] == [1, 2, 4, 8, 16]
    assert result["knee"] == 4
    assert result["best_load"] == 4
    csv_lines = (folder / "capacity.csv").read_text().splitlines()
    assert len(csv_lines) == 6 and csv_lines[0].startswith("load,requests,requests_per_s")
    thr = [r["requests_per_s"] for r in result["steps"]]
    # Throughput grows up to the slots and then stays flat: 4 sessions give 4x one
    # session's, and 16 sessions on 4 slots no more than 4. Each bound leaves 30-37%
    # (2.5x against 4x, 1.3x against 1x), so only a neighbour slowing one step alone by
    # about a third breaks it, while a simulator without slots (16x) or a sweep that
    # ran every step at one load (1x) still fails.
    assert thr[2] > 2.5 * thr[0] and thr[4] < 1.3 * thr[2]
    assert all(r["goodput_per_s"] is not None for r in result["steps"])
    assert result["steps"][4]["goodput_per_s"] < result["steps"][2]["goodput_per_s"]
    # One folder per step, the run's files directly in it; requests are the measured ones.
    steps = sorted(p for p in folder.iterdir() if p.is_dir())
    assert [p.name for p in steps] == [f"step-{i:02d}-{c}" for i, c in enumerate((1, 2, 4, 8, 16))]
    for step, row in zip(steps, result["steps"], strict=True):
        summary = orjson.loads((step / "summary.json").read_bytes())
        req = summary["requests"]
        assert row["requests"] == req["sent"] - req["warmup"]
        assert row["warmup_requests"] == req["warmup"] > 0
        assert row["requests"] == summary["metrics"]["e2e_ms"]["count"] + req["failed"]
    assert "warmup_requests" in csv_lines[0].split(",")
    # One line per step, then the capacity table; no step's full summary.
    out_text = capsys.readouterr().out
    heads = [line for line in out_text.splitlines() if line.startswith("step ")]
    assert heads == [f"step {i}/5: concurrency {c}" for i, c in enumerate((1, 2, 4, 8, 16), 1)]
    assert "latency (ms)" not in out_text and "results:" not in out_text
    assert "highest concurrency meeting the SLOs: 4" in out_text


def test_the_load_models_knee_is_where_its_settings_put_it(tmp_path: Path) -> None:
    # No slots and no KV limit: only the load model bends the curve. A step carrying C
    # decoding tokens costs itl_ms * (1 + share * (C - 1)), so an answer of 20 tokens
    # (19 gaps) ends at ttft + 19 * itl * (1 + share * (C - 1)); with share 0.05 that
    # passes 1.5x its lowest past C = 11. Steps 1, 4 and 16 sit at 1.14x and 1.71x.
    ttft, itl, share, loads = 2.0, 10.0, 0.05, (1, 4, 16)

    def e2e(c: int) -> float:
        return ttft + 19 * itl * (1 + share * (c - 1))

    designed = max(c for c in loads if e2e(c) <= 1.5 * e2e(1))
    assert designed == 4 and e2e(16) / e2e(1) > 1.7
    scenario = tmp_path / "knee.toml"
    scenario.write_text(
        'name = "knee"\nmax_tokens = 20\n[[sources]]\nkind = "inline"\n'
        'prompts = ["a", "b", "c"]\n[load]\nconcurrency = 1\nduration_s = 1.5\nwarmup_s = 0.3\n'
        f"[sim]\nttft_ms = {ttft}\nitl_ms = {itl}\nstep_token_share = {share}\n"
        "ttft_sigma = 0.05\nitl_sigma = 0.05\nmin_output_fraction = 1.0\n"
        "prefill_chunk_tokens = 0\n"
    )
    out = tmp_path / "out"
    argv = ["sweep", str(scenario), "--concurrency", ",".join(map(str, loads))]
    assert main([*argv, "--out", str(out)]) == 0
    (folder,) = out.iterdir()
    result = orjson.loads((folder / "capacity.json").read_bytes())
    medians = [r["e2e_ms_p50"] for r in result["steps"]]
    assert result["knee"] == designed, medians
    # The flat model (share 0) would have no knee in this range: the curve is the model's.
    assert medians[2] / medians[0] > 1.5 > medians[1] / medians[0], medians
    # No KV limit: the server (scraped as vLLM) preempted nothing at any step.
    assert [r["preemptions"] for r in result["steps"]] == [0, 0, 0]
    assert all(r["waiting_peak"] == 0 for r in result["steps"])


def test_the_table_shows_the_servers_preemptions_where_it_counts_them() -> None:
    rows = [_row(1, 100), _row(4, 120), _row(16, 300)]
    for r, preempted in zip(rows, (0, 0, 41), strict=True):
        more: dict[str, object] = {"requests_per_s": 1.0, "output_tokens_per_s": 1.0}
        more |= {"goodput_per_s": None, "ttft_ms_p95": 1.0, "e2e_ms_p99": 1.0}
        more["preemptions"] = preempted
        cast(dict[str, object], r).update(more)
    result: CapacityResult = {
        "kind": "concurrency",
        "steps": rows,
        "best_load": 16,
        "knee": 4,
        "knee_tolerance": 0.5,
        "flat_to": None,
        "interrupted": False,
    }
    lines = render_capacity(result).splitlines()
    assert lines[0].split()[-2:] == ["preempt", "SLO"]
    assert [line.split()[-2] for line in lines[2:5]] == ["0", "0", "41"]
    for r in rows:
        del cast(dict[str, object], r)["preemptions"]  # a server that does not count them
    assert "preempt" not in render_capacity(result)


def test_a_rate_sweep_is_rated_over_its_arrivals_and_a_small_step_cannot_tell(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # `sweep code.toml --rates 2,4,8 --duration 3` said 1.2 / 2.4 / 4.0 req/s (the drain
    # in the window) and "highest rate meeting the SLOs: 8" on 6 requests at rate 2.
    scenario = tmp_path / "paced.toml"
    scenario.write_text(
        'name = "paced"\nmax_tokens = 40\n[[sources]]\nkind = "inline"\n'
        'prompts = ["a", "b", "c"]\n[load]\nmode = "constant"\nrate = 1\nduration_s = 2\n'
        "warmup_s = 0\n[sim]\nttft_ms = 5.0\nitl_ms = 20.0\nmin_output_fraction = 1.0\n"
    )
    out = tmp_path / "out"
    argv = ["sweep", str(scenario), "--rates", "5,30", "--out", str(out)]
    code = main([*argv, "--slo", "ttft_ms.p95=1000"])
    text = capsys.readouterr().out
    (folder,) = out.iterdir()
    steps = orjson.loads((folder / "capacity.json").read_bytes())["steps"]
    # 10 and 60 arrivals over 2 s, each ~0.8 s long: the rates are the arrivals'.
    for step in steps:
        assert step["measured_ok"] == step["requests"]
        assert step["requests_per_s"] == pytest.approx(step["load"], rel=0.1)
    # A p95 needs 20 requests: rate 5 of 2 s has 10, so nothing is named.
    assert [s["slo"] for s in steps] == ["too few", "met"]
    assert steps[0]["requests_to_judge"] == 20 and not steps[0]["slo_met"]
    said = " ".join(text.split())
    assert "highest rate meeting the SLOs: cannot tell (rate 5: 10 measured requests" in said
    assert code == 1  # a gate on a step that could not tell does not pass
    best = text[text.index("highest rate") : text.index("knee (")]
    assert all(len(line) <= 80 for line in best.splitlines())  # wrapped
    # No SLOs given: no highest load is named at all (it said "8" on nothing), however
    # short the steps.
    assert main([*argv[:-1], str(tmp_path / "none"), "--duration", "0.5"]) == 0
    assert "highest rate meeting the SLOs: no SLOs given" in capsys.readouterr().out


def test_a_rate_its_in_flight_cap_cannot_send_is_not_sustained_and_not_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # `sweep code.toml --rates 2,...,32` (concurrency = 32) named 32 the highest rate
    # meeting a TTFT p95 SLO while it sent 5.8 req/s: the sends waited for a slot, and
    # the raw TTFTs, measured from those late sends, were those of a lighter load. Here
    # two slots and answers of ~0.8 s carry ~2.5 req/s: rate 2 is sent, rate 20 is not.
    scenario = tmp_path / "capped.toml"
    scenario.write_text(
        'name = "capped"\nmax_tokens = 40\n[[sources]]\nkind = "inline"\n'
        'prompts = ["a", "b", "c"]\n[load]\nmode = "constant"\nrate = 1\nduration_s = 12\n'
        "concurrency = 2\nwarmup_s = 0\n"
        "[sim]\nttft_ms = 5.0\nitl_ms = 20.0\nmin_output_fraction = 1.0\n"
    )
    out = tmp_path / "out"
    argv = ["sweep", str(scenario), "--rates", "2,20", "--out", str(out), "-q"]
    main([*argv, "--slo", "ttft_ms.p95=1000"])
    text = " ".join(capsys.readouterr().out.split())
    (folder,) = out.iterdir()
    steps = orjson.loads((folder / "capacity.json").read_bytes())["steps"]
    assert [s["slo"] for s in steps] == ["met", "not sustained"], steps
    assert steps[1]["requests_per_s"] < 5  # what it sent, far under the 20 offered
    assert "an in-flight cap of 2" in steps[1]["not_sustained"]
    assert "highest rate meeting the SLOs: 2 (rate 20 was not sustained: half its" in text
    assert "NOT SUSTAINED" in text
    # The figure from the intended sends is given where the table has no column for it
    # (it said "see TTFT corrected").
    summary = orjson.loads((folder / steps[1]["run_id"] / "summary.json").read_bytes())
    corrected = summary["metrics"]["ttft_ms_corrected"]["p95"]
    said = f"ms raw, {corrected:.1f} ms from the intended sends)"
    assert said in steps[1]["not_sustained"] and said in text
    assert "see TTFT corrected" not in text


def test_every_step_not_sustained_is_named_not_only_the_first() -> None:
    """rates 16 and 32 both stood as NOT SUSTAINED; only 16's was explained."""

    def step(load: float, slo: str) -> dict[str, object]:
        why = "half its requests left late" if slo == "not sustained" else None
        return {"load": load, "slo": slo, "slo_met": slo == "met", "not_sustained": why}

    rows = [step(8, "met"), step(16, "not sustained"), step(32, "not sustained")]
    result = cast(CapacityResult, {"kind": "rate", "steps": rows, "best_load": 8})
    assert best_load_text(result) == (
        "highest rate meeting the SLOs: 8 (rate 16 was not sustained: half its requests "
        "left late); rate 32 not sustained either: its figures are of a lighter load"
    )
    result = cast(CapacityResult, {"kind": "rate", "steps": rows[:2], "best_load": 8})
    assert best_load_text(result).endswith("left late)")
    # Named too where the first step past the best missed its SLOs instead.
    rows[1] = step(16, "missed")
    result = cast(CapacityResult, {"kind": "rate", "steps": rows, "best_load": 8})
    assert best_load_text(result) == (
        "highest rate meeting the SLOs: 8; rate 32 not sustained: its figures are of a lighter load"
    )


def test_a_grid_runs_once_per_value_of_a_request_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``sweep --sampling-sweep reasoning_effort=low,high``: every request of a value's
    grid carries it; the built-in simulator reasons 0.5x and 2x its mean of 16 tokens,
    so the time to an answer moves with the effort, step by step."""
    path = effort_scenario(tmp_path)
    out = tmp_path / "out"
    argv = ["sweep", str(path), "--concurrency", "1,2", "--out", str(out), "--no-tui"]
    assert main([*argv, "--sampling-sweep", "reasoning_effort=low,high"]) == 0
    printed = capsys.readouterr().out
    (outer,) = out.iterdir()
    assert outer.name.endswith("-sampling-sweep-effort")
    assert sorted(p.name for p in outer.iterdir()) == [
        "reasoning_effort=high",
        "reasoning_effort=low",
    ]
    ttfa: dict[str, list[float]] = {}
    for value, tokens in (("low", 8), ("high", 32)):
        (grid,) = (outer / f"reasoning_effort={value}").iterdir()
        assert (grid / "capacity.csv").exists()
        for step in sorted(p for p in grid.iterdir() if p.is_dir()):
            summary = orjson.loads((step / "summary.json").read_bytes())
            said = summary["reasoning"]["tokens_per_request"]["p50"]
            assert said == pytest.approx(tokens, abs=1)
            ttfa.setdefault(value, []).append(summary["metrics"]["ttfa_ms"]["p50"])
    assert all(h > 2.5 * lo for h, lo in zip(ttfa["high"], ttfa["low"], strict=True)), ttfa
    assert printed.count("capacity: ") == 2 and "request field reasoning_effort=high" in printed
    search = ["sweep", str(path), "--search", "concurrency=1..4"]
    assert main([*search, "--sampling-sweep", "reasoning_effort=low"]) == 2


def test_a_tail_figure_of_too_few_requests_is_not_printed_as_one() -> None:
    # A rate-2 step of 3 s printed "e2e p99 2408.1" on its 6 requests: their slowest.
    more = {"requests_per_s": 1.0, "output_tokens_per_s": 1.0, "goodput_per_s": None}
    row = {**_row(2, 100), **more, "ttft_ms_p95": 31.5, "e2e_ms_p99": 2408.1}
    few = cast(SweepStep, {**row, "requests": 6, "measured_ok": 6})
    enough = cast(SweepStep, {**row, "load": 4, "requests": 120, "measured_ok": 120})
    result: CapacityResult = {
        "kind": "rate",
        "steps": [few, enough],
        "best_load": None,
        "knee": None,
        "knee_tolerance": 0.5,
        "flat_to": None,
        "interrupted": False,
    }
    text = render_capacity(result)
    first, second = (line for line in text.splitlines() if line.strip().startswith(("2 ", "4 ")))
    assert "n<20" in first and "n<100" in first
    assert "n<" not in second and f"{enough['e2e_ms_p99']:.1f}" in second
    assert "n<N: the step measured fewer ok requests than the percentile needs" in text
