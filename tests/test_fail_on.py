"""``--fail-on``: a fault window's verdict gates the exit code like an SLO does."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from loadtest.cli.main import main

# 2 sessions on 2 slots; every request started in the window is cancelled after 2 tokens,
# and the simulator keeps each cancelled request's slot 1.5 s: the window fails.
_LEAKY = (
    'name = "leaky"\nmax_tokens = 100\n[[sources]]\nkind = "inline"\n'
    'prompts = ["a", "b", "c"]\n[load]\nconcurrency = 2\nduration_s = 3\nwarmup_s = 0\n'
    "[sim]\nttft_ms = 3.0\nitl_ms = 10.0\nmin_output_fraction = 1.0\nmax_running = 2\n"
    "leak_on_disconnect_s = 1.5\n"
    '[[faults.events]]\nkind = "cancel"\nat_s = 0.3\nduration_s = 1.7\nfraction = 1.0\n'
    "after_tokens = 2\nsettle_s = 0.3\n"
)


def _window_name(out: Path) -> str:
    (run_dir,) = out.iterdir()
    return str(orjson.loads((run_dir / "summary.json").read_bytes())["faults"][0]["name"])


def _verdicts(out: Path) -> list[str]:
    (run_dir,) = out.iterdir()
    summary = orjson.loads((run_dir / "summary.json").read_bytes())
    return [f["verdict"] for f in summary["faults"]]


def test_a_failed_window_exits_1_unless_told_never(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    scenario = tmp_path / "leaky.toml"
    scenario.write_text(_LEAKY)
    argv = ["run", str(scenario), "--no-tui", "-q"]
    code = main([*argv, "--out", str(tmp_path / "a")])
    err = capsys.readouterr().err
    assert _verdicts(tmp_path / "a") == ["failed"], err
    assert code == 1  # --fail-on failed is the default: CI sees the leak
    # ... and the last line says why, even with -q (the window has no name: its kind's).
    assert err.splitlines()[-1] == f"exit 1: fault window {_window_name(tmp_path / 'a')} failed"
    code = main([*argv, "--out", str(tmp_path / "b"), "--fail-on", "never"])
    assert _verdicts(tmp_path / "b") == ["failed"]
    assert code == 0
    assert "exit" not in capsys.readouterr().err


def test_fail_on_takes_only_the_known_words(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--fail-on", "sometimes", "--check"]) == 2
    assert "--fail-on" in capsys.readouterr().err


def test_sweep_and_ab_gate_on_the_windows_of_every_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    scenario = tmp_path / "leaky.toml"
    scenario.write_text(_LEAKY)
    shared = ["--no-tui", "-q", "--duration", "2.5"]
    sweep = ["sweep", str(scenario), "--concurrency", "2", "--out", str(tmp_path / "s")]
    assert main([*sweep, *shared]) == 1
    err = capsys.readouterr().err
    assert err.splitlines()[-1].startswith("exit 1: concurrency 2: fault window "), err
    assert err.splitlines()[-1].endswith(" failed")
    sweep[-1] = str(tmp_path / "s2")
    assert main([*sweep, *shared, "--fail-on", "never"]) == 0, capsys.readouterr().err
    # ab also stops on fewer than 10 values of a metric a side, so only the fault gate
    # decides its exit code here if each side has them: one run a side (the gate needs no
    # repeats) of 0.1 s answers, and the window opens at 1.2 s instead of 0.3 s. Before
    # it, each of the 2 sessions completes about (1.2 - 0.1 s of start-up) / 0.1 s = 11
    # answers, 22 a side: 10 would still come with every answer 2.2x slower. The window
    # still closes at 2.0 s, and its first cancelled answer leaks its slot past the settle.
    late = tmp_path / "late.toml"
    late_window = _LEAKY.replace("at_s = 0.3\nduration_s = 1.7", "at_s = 1.2\nduration_s = 0.8")
    assert late_window != _LEAKY
    late.write_text(late_window)
    ab = ["ab", str(late), "--out", str(tmp_path / "ab"), "--max-tokens", "10", "--repeat", "1"]
    assert main([*ab, *shared]) == 1
    err = capsys.readouterr().err
    # Named by the run it came from: A 1/1 (the baseline's first of one).
    assert err.splitlines()[-1].startswith("exit 1: A 1/1: fault window "), err
    assert "; B 1/1: fault window " in err.splitlines()[-1]
    ab[3] = str(tmp_path / "ab2")
    assert main([*ab, *shared, "--fail-on", "never"]) == 0, capsys.readouterr()


def test_a_run_whose_window_was_never_reached_does_not_pass_its_gate(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The window opens at 30 s of a 1.5 s run: nothing was injected, and a gate on the
    # fallbacks would pass on nothing. --fail-on never still asks for no gate.
    scenario = tmp_path / "late.toml"
    scenario.write_text(
        _LEAKY.replace("at_s = 0.3\nduration_s = 1.7", "at_s = 30\nduration_s = 2").replace(
            "duration_s = 3\n", "duration_s = 1.5\n"
        )
    )
    argv = ["run", str(scenario), "--no-tui", "-q"]
    code = main([*argv, "--out", str(tmp_path / "a")])
    err = capsys.readouterr().err
    assert _verdicts(tmp_path / "a") == ["not_exercised"], err
    assert code == 1, err
    last = err.splitlines()[-1]
    assert last.startswith(f"exit 1: fault window {_window_name(tmp_path / 'a')} not exercised (")
    assert main([*argv, "--out", str(tmp_path / "b"), "--fail-on", "never"]) == 0
