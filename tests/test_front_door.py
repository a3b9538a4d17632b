"""The command line's front door: shared flags, errors that help, flags that win."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from loadtest.cli.main import main
from tests.conftest import read_jsonl

_QUICK = (
    'name = "quick"\nmax_tokens = 8\n[[sources]]\nkind = "inline"\n'
    'prompts = ["a", "b", "c"]\n[load]\nconcurrency = 2\n'
    "[sim]\nttft_ms = 2.0\nitl_ms = 0.5\n"
)


def _quick(tmp_path: Path) -> Path:
    p = tmp_path / "quick.toml"
    p.write_text(_QUICK)
    return p


def test_an_unknown_flag_shows_the_error_once_the_usage_and_a_suggestion(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["run", "--no-tuii"]) == 2
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert lines[0] == "loadtest: unrecognized arguments: --no-tuii; did you mean --no-tui?"
    assert lines[1].startswith("usage: loadtest run ")
    assert "loadtest: loadtest" not in err and err.count("unrecognized") == 1
    assert main(["sweep", "--concurency", "1,2"]) == 2
    assert "did you mean --concurrency?" in capsys.readouterr().err


def test_a_mistyped_command_or_choice_gets_a_suggestion(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["rnu"]) == 2
    first = capsys.readouterr().err.splitlines()[0]
    assert first.startswith("loadtest: argument command: invalid choice: 'rnu' (choose from")
    assert first.endswith("; did you mean run?")
    assert main(["run", "--fail-on", "faild", "--check"]) == 2
    assert "did you mean failed?" in capsys.readouterr().err
    # Nothing close: the choices alone, no guess.
    assert main(["xyzzy"]) == 2
    assert "did you mean" not in capsys.readouterr().err


def test_a_bad_sweep_step_names_the_flag_given_and_the_item(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["sweep", "--rates", "2,x"]) == 2
    assert capsys.readouterr().err == "loadtest: --rates 2,x: 'x' is not a number\n"
    assert main(["sweep", "--concurrency", "1,2.5"]) == 2
    assert "--concurrency 1,2.5: '2.5' is not a whole number" in capsys.readouterr().err


def test_a_flag_of_run_is_a_flag_of_sweep_and_ab(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # --no-tui, --record-chunks and the timeouts were refused by sweep before.
    shared = ["--no-tui", "--record-chunks", "--timeout", "30", "--requests", "4", "-q"]
    out = tmp_path / "out"
    code = main(["sweep", str(_quick(tmp_path)), "--concurrency", "1", "--out", str(out), *shared])
    assert code == 0, capsys.readouterr().err
    # ab stops on fewer than 10 values of a metric a side (its own rule): 12 requests,
    # one run a side (the flags are what is checked, not repeats).
    ab_flags = [*shared[:-3], "--requests", "12", "--repeat", "1", "-q"]
    code = main(["ab", str(_quick(tmp_path)), "--out", str(tmp_path / "ab"), *ab_flags])
    assert code == 0, capsys.readouterr().err
    # -q: the notes (which endpoint) are not said; the results still are, on stdout.
    captured = capsys.readouterr()
    assert "built-in simulator" not in captured.err
    assert "comparison:" in captured.out


def test_max_tokens_wins_over_sources_and_prompts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = [{"messages": [{"role": "user", "content": "hi"}], "max_tokens": 40}] * 3
    (tmp_path / "p.jsonl").write_bytes(b"\n".join(orjson.dumps(r) for r in rows))
    scenario = tmp_path / "own.toml"
    scenario.write_text(
        'name = "own"\nmax_tokens = 30\n'
        '[[sources]]\nkind = "jsonl"\npath = "p.jsonl"\nmax_tokens = 50\n'
        '[[sources]]\nkind = "inline"\nprompts = ["a"]\nmax_tokens = 60\n'
        "[load]\nconcurrency = 2\n"
        # Every answer as long as max_tokens allows: the count is what was asked for.
        "[sim]\nttft_ms = 2.0\nitl_ms = 0.5\nmin_output_fraction = 1.0\n"
    )
    assert main(["run", str(scenario), "--max-tokens", "5", "--check"]) == 0
    plan = capsys.readouterr().out
    assert plan.count("max_tokens 5") == 2 and "max_tokens 50" not in plan
    out = tmp_path / "out"
    argv = ["run", str(scenario), "--max-tokens", "5", "--requests", "20", "--no-tui"]
    assert main([*argv, "--out", str(out)]) == 0
    (run_dir,) = out.iterdir()
    records = read_jsonl(run_dir / "requests.jsonl")
    assert len(records) == 20
    assert {r["output_tokens"] for r in records} == {5}


def test_timeout_flags_override_the_scenario(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["run", str(_quick(tmp_path)), "--check"]
    assert (
        main([*argv, "--timeout", "7", "--first-byte-timeout", "2", "--chunk-timeout", "1.5"]) == 0
    )
    assert "timeouts: total 7 s, first byte 2 s, between chunks 1.5 s" in capsys.readouterr().out
    assert main([*argv, "--chunk-timeout", "0"]) == 2
    assert "--chunk-timeout must be positive" in capsys.readouterr().err


def test_a_first_byte_timeout_fails_requests_as_timeouts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    scenario = tmp_path / "slow.toml"
    scenario.write_text(_QUICK.replace("ttft_ms = 2.0", "ttft_ms = 2000.0"))
    out = tmp_path / "out"
    argv = ["run", str(scenario), "--requests", "2", "--no-tui", "--first-byte-timeout", "0.2"]
    main([*argv, "--out", str(out)])
    capsys.readouterr()
    (run_dir,) = out.iterdir()
    records = read_jsonl(run_dir / "requests.jsonl")
    assert records and all(r["error_class"] == "timeout" for r in records)


def test_a_shipped_scenario_is_found_by_name_from_any_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["run", "tool-calls", "--check"]) == 0
    assert "scenario tool-calls" in capsys.readouterr().out
    assert main(["run", "no-such-scenario", "--check"]) == 2


@pytest.mark.parametrize("command", ["report", "view"])
def test_report_and_view_say_when_the_path_does_not_exist(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    missing = tmp_path / "nothing-here"
    assert main([command, str(missing)]) == 2
    assert f"{missing}: the path does not exist" in capsys.readouterr().err


def test_rate_keeps_the_scenarios_concurrency_as_the_in_flight_cap(tmp_path: Path) -> None:
    # docs/cli.md: "with a rate, the scenario's concurrency becomes an in-flight cap".
    from loadtest.app.options import RunOptions, resolve_scenario

    sc = resolve_scenario(RunOptions(scenario=str(_quick(tmp_path)), rate=20.0))
    assert (sc.load.mode, sc.load.rate, sc.load.concurrency) == ("poisson", 20.0, 2)
