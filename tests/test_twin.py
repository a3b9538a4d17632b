"""Simulator profiles: fitted from runs, served, validated, and warning outside their range."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from loadtest.app.engines.twin import fit_profile, fit_runs
from loadtest.app.engines.twin_runs import RunPoint
from loadtest.app.run.job import RunOptions, run_job
from loadtest.config.feature_specs import SIM
from loadtest.config.scenario import load_scenario
from loadtest.errors import ScenarioError
from loadtest.sim import SimConfig, SimProcess
from loadtest.sim.profile import FittedRange, RangeWatch, profile_text, read_profile, with_profile
from tests.conftest import log_records

SCENARIO = """
name = "fit"
max_tokens = 30
seed = 2

[sampling]
ignore_eos = true

[[sources]]
kind = "inline"
category = "chat"
prompts = ["{short}", "{long}"]

[load]
mode = "closed"
concurrency = 1
requests = 8
warmup_s = 0
""".replace("{short}", "a short question " * 2).replace("{long}", "a long question " * 60)

TRUTH = SimConfig(
    ttft_ms=30.0,
    ttft_sigma=0.05,
    ttft_per_1k_tokens_ms=200.0,
    itl_ms=10.0,
    itl_sigma=0.05,
    step_token_share=0.03,
    prefill_chunk_tokens=0,
)


def _runs(tmp: Path, config: SimConfig, loads: tuple[int, ...]) -> Path:
    scenario = tmp / "fit.toml"
    scenario.write_text(SCENARIO)
    sweep = tmp / "sweep"
    with SimProcess(config) as sim:
        for c in loads:
            options = RunOptions(
                scenario=str(scenario),
                endpoint=sim.url,
                concurrency=c,
                requests=6 * c,
                run_dir=str(sweep / f"step-{c}"),
                tui=False,
                print_results=False,
            )
            run_job(options)
    return sweep


@pytest.mark.quiet  # ttft_ms comes out ~4 ms above 30 (the client's share): 3.5 ms to spare
def test_a_fit_recovers_the_settings_of_the_engine_it_measured(tmp_path: Path) -> None:
    sweep = _runs(tmp_path, TRUTH, (1, 4, 8))
    profile, got, _ = fit_profile([str(sweep)], tmp_path / "p.toml")
    # The simulator is the engine here: its own settings are the truth to find again.
    assert got["itl_ms"] == pytest.approx(TRUTH.itl_ms, rel=0.1)
    assert got["step_token_share"] == pytest.approx(TRUTH.step_token_share, rel=0.3)
    assert got["ttft_ms"] == pytest.approx(TRUTH.ttft_ms, rel=0.25)
    assert got["ttft_per_1k_tokens_ms"] == pytest.approx(TRUTH.ttft_per_1k_tokens_ms, rel=0.25)
    assert got["min_output_fraction"] == 1.0  # every answer ran to max_tokens
    settings, fitted = read_profile(profile)
    assert settings == got
    assert fitted.running == (1, 8) and fitted.engine == "loadtest-sim"
    assert len(fitted.runs) == 3


def _point(folder: str, in_flight: float) -> RunPoint:
    """A run as the fit sees it, without the engine's prefill timings (vLLM's)."""
    return RunPoint(
        folder=folder,
        in_flight=in_flight,
        prompt_tokens=(10, 200, 10, 200),
        engine_tokens=420,
        ttft_ms=(22.0, 61.0, 21.0, 60.0),
        tpot_ms=(10.0 * in_flight, 10.5 * in_flight, 9.5 * in_flight, 10.0 * in_flight),
        output_tokens=(30, 30, 30, 30),
        stopped=0,
        running_peak=in_flight,
        waiting_peak=0.0,
        engine="vllm",
        acceptance=None,
    )


def test_a_fitted_profile_steps_its_streams_in_lockstep() -> None:
    settings, _, _ = fit_runs([_point("a", 1.0), _point("b", 2.0)])
    assert settings["lockstep"] is True
    assert settings["itl_ms"] == pytest.approx(10.0, rel=0.1)  # TPOT 10 at a batch of one


def test_a_profile_is_the_base_and_settings_given_win() -> None:
    assert with_profile(SimConfig(itl_ms=3.0), {"itl_ms": 3.0}).itl_ms == 3.0  # no profile


def test_profiles_are_served_under_explicit_settings(tmp_path: Path) -> None:
    path = tmp_path / "p.toml"
    fitted = FittedRange(running=(1, 4), prompt_tokens=(10, 100), engine="llama.cpp")
    path.write_text(profile_text({"itl_ms": 42.0, "max_running": 2}, fitted, ["a note"]))
    config = with_profile(SimConfig(profile=str(path)), {"max_running": 3})
    assert (config.itl_ms, config.max_running) == (42.0, 3)
    # A scenario names it relative to itself.
    (tmp_path / "s.toml").write_text(
        '[sim]\nprofile = "p.toml"\n[[sources]]\nkind = "inline"\nprompts = ["x"]\n'
    )
    assert SIM.of(load_scenario(tmp_path / "s.toml")).settings["profile"] == str(path)


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ("[fitted]\nrunning = [1, 2]\nprompt_tokens = [1, 2]\n", "p.toml: sim"),
        ("[sim]\nitl_ms = 'x'\n[fitted]\nrunning = [1, 2]\nprompt_tokens = [1, 2]\n", "sim.itl_ms"),
        ("[sim]\nrole = 'draft'\n[fitted]\nrunning = [1, 2]\nprompt_tokens = [1, 2]\n", "sim.role"),
        ("[sim]\nitl_ms = 1.0\n[fitted]\nrunning = [3, 2]\nprompt_tokens = [1, 2]\n", "running"),
        ("[sim]\nitl_ms = -1.0\n[fitted]\nrunning = [1, 2]\nprompt_tokens = [1, 2]\n", "negative"),
        ("[sim\n", "not valid TOML"),
    ],
)
def test_a_bad_profile_is_named_by_file_and_key(tmp_path: Path, text: str, where: str) -> None:
    path = tmp_path / "p.toml"
    path.write_text(text)
    with pytest.raises(ScenarioError, match=where):
        read_profile(path)


def test_the_twin_warns_once_when_load_leaves_the_fitted_range() -> None:
    watch = RangeWatch(FittedRange(running=(1, 4), prompt_tokens=(10, 100)))
    with log_records("loadtest.sim") as records:
        for running in (2, 4, 5, 6):
            watch.observe(running, 50)
        watch.observe(1, 500)
        watch.observe(1, 5)
    texts: list[Any] = [r.getMessage() for r in records if r.levelname == "WARNING"]
    assert len(texts) == 2, texts
    assert "5 requests running, above the fitted 4" in texts[0]
    assert "500 tokens, outside the fitted 10-100" in texts[1]


def test_a_fit_of_runs_without_tpot_is_one_clear_line(tmp_path: Path) -> None:
    """One-token answers hold no step time: ``sim --fit`` says so (was a StatisticsError)."""
    scenario = tmp_path / "one.toml"
    scenario.write_text(SCENARIO.replace("max_tokens = 30", "max_tokens = 1"))
    run = tmp_path / "run"
    with SimProcess(TRUTH) as sim:
        options = RunOptions(
            scenario=str(scenario),
            endpoint=sim.url,
            concurrency=2,
            requests=6,
            run_dir=str(run),
            tui=False,
            print_results=False,
        )
        run_job(options)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "loadtest",
            "sim",
            "--fit",
            str(run),
            "--write",
            str(tmp_path / "p.toml"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert f"--fit {run}: no request streamed two tokens or more (no TPOT)" in done.stderr
    assert not (tmp_path / "p.toml").exists()
