"""``run --check`` is the run's own validation: it refuses what the run refuses, with the
same exit code and message, and warns of the fault windows the run will not reach."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from loadtest.cli.main import main

_QUICK = (
    'name = "quick"\nmax_tokens = 4\n[[sources]]\nkind = "inline"\nprompts = ["a", "b"]\n'
    "[load]\nconcurrency = 2\nduration_s = 0.5\n[sim]\nttft_ms = 1.0\nitl_ms = 0.2\n"
)


def _scenario(tmp_path: Path, extra: str = "", base: str = _QUICK) -> Path:
    path = tmp_path / "s.toml"
    path.write_text(base + extra)
    return path


def _both(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, int, str]:
    """Exit code and stderr of ``run --check`` and of the run itself."""
    checked = main([*argv, "--check"])
    check_err = capsys.readouterr().err
    ran = main([*argv, "--no-tui", "-q"])
    return checked, check_err, ran, capsys.readouterr().err


@pytest.mark.parametrize(
    ("extra", "flags", "message"),
    [
        # The split itself (split_load): --check said "valid" before.
        ("", ["--workers", "3"], "2 sessions cannot be split over 3 workers"),
        # The deployment plan: a restart needs a target loadtest manages.
        (
            '[[faults.events]]\nkind = "restart"\nat_s = 0.2\n',
            ["--endpoint", "http://127.0.0.1:9"],
            "the scenario restarts its target, but --endpoint names one",
        ),
        # The deployment plan: draft faults need a draft.
        (
            '[[faults.events]]\nkind = "draft_down"\nat_s = 0.2\nduration_s = 0.1\n',
            [],
            "the scenario has draft faults but no draft",
        ),
    ],
)
def test_check_refuses_what_the_run_refuses_with_the_same_message(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    extra: str,
    flags: list[str],
    message: str,
) -> None:
    argv = ["run", str(_scenario(tmp_path, extra)), "--out", str(tmp_path / "out"), *flags]
    checked, check_err, ran, run_err = _both(argv, capsys)
    assert (checked, ran) == (2, 2), (check_err, run_err)
    assert message in check_err
    assert check_err == run_err
    assert not (tmp_path / "out").exists()  # refused before anything was started


def test_check_loads_the_prompts_as_the_run_does(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "p.jsonl").write_text('{"messages": [{"role": "user", "content": "hi"}]}\n{oops\n')
    base = _QUICK.replace(
        'kind = "inline"\nprompts = ["a", "b"]', 'kind = "jsonl"\npath = "p.jsonl"'
    )
    argv = ["run", str(_scenario(tmp_path, base=base)), "--out", str(tmp_path / "out")]
    checked, check_err, ran, run_err = _both(argv, capsys)
    assert checked == ran != 0
    assert "p.jsonl:2" in check_err and check_err == run_err
    (tmp_path / "p.jsonl").write_text('{"messages": [{"role": "user", "content": "hi"}]}\n')
    assert main([*argv, "--check"]) == 0
    assert "prompts loaded: jsonl:jsonl 1" in capsys.readouterr().out


def test_the_default_scenario_cut_to_5_s_warns_that_its_fault_will_not_be_exercised(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # mixed.toml: warm-up 2 s, the draft goes down at 9 s; --duration 5 ends the run at 7 s.
    assert main(["run", "--check", "--duration", "5"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("scenario mixed (") and "valid, 1 warning below" in out
    assert (
        "warning: fault 'draft down 5 s' (draft_down, 9-14 s) will not be exercised: it is "
        "due at or after the load ends at 7 s (2 s warm-up + 5 s measured)"
    ) in out
    assert main(["run", "--check"]) == 0  # 20 s: the window falls inside
    assert "warning" not in capsys.readouterr().out


def test_check_warns_of_windows_in_the_warm_up_cut_short_or_skipped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    events = "".join(
        f'[[faults.events]]\nname = "{name}"\nkind = "{kind}"\nat_s = {at}\nduration_s = {d}\n'
        for name, kind, at, d in (
            ("early", "idle", 0.5, 0.5),
            ("straddles", "idle", 1.5, 1),
            ("late", "idle", 5, 2),
            ("inside", "idle", 3, 1),
            ("draft", "draft_down", 3, 1),
        )
    )
    base = _QUICK.replace("duration_s = 0.5", "duration_s = 4\nwarmup_s = 2")
    path = _scenario(tmp_path, events, base=base)
    assert main(["run", str(path), "--check", "--endpoint", "http://127.0.0.1:9"]) == 0
    warnings = [
        line for line in capsys.readouterr().out.splitlines() if line.startswith("  warning: ")
    ]
    assert len(warnings) == 4, warnings
    assert (
        "'draft' (draft_down) will be skipped: no fault proxy in front of a draft" in (warnings[0])
    )
    early, straddles, late = warnings[1:]
    assert "'early' (idle, 0.5-1 s) lies inside the warm-up (the first 2 s)" in early
    assert "'straddles' (idle, 1.5-2.5 s) starts inside the warm-up" in straddles
    assert "no measured request before it" in straddles
    assert "'late' (idle, 5-7 s) is cut short by the end of the load at 6 s" in late
    # A count ends the run at a time nobody knows ahead: said so, not guessed.
    assert main(["run", str(path), "--check", "--requests", "10", "--endpoint", "http://x:1"]) == 0
    out = capsys.readouterr().out
    assert "the run ends after 10 requests, not at a set time" in out
    assert "will not be exercised" not in out and "cut short" not in out


def test_the_run_warns_as_check_does_and_the_window_ends_not_exercised(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _scenario(tmp_path, '[[faults.events]]\nname = "gap"\nkind = "idle"\nat_s = 5\n')
    out = tmp_path / "out"
    assert main(["run", str(path), "--check"]) == 0
    (warning,) = [ln for ln in capsys.readouterr().out.splitlines() if "warning:" in ln]
    main(["run", str(path), "--no-tui", "--out", str(out)])
    err = capsys.readouterr().err
    assert warning.removeprefix("  warning: ") in err
    (run_dir,) = out.iterdir()
    (fault,) = orjson.loads((run_dir / "summary.json").read_bytes())["faults"]
    assert fault["verdict"] == "not_exercised"


def test_a_split_the_run_accepts_is_shown(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["run", str(_scenario(tmp_path)), "--check", "--workers", "2"]) == 0
    out = capsys.readouterr().out
    assert "valid\n" in out and "  workers: 2 driver processes\n" in out
