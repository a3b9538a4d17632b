"""The one registry behind every extension point: protocol and signature checks on load,
plugins turned off by LOADTEST_DISABLE_PLUGINS, and ``loadtest plugins``."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Protocol, runtime_checkable

import pytest

from loadtest.cli.main import main
from loadtest.config.arrivals import ARRIVALS, arrival_process
from loadtest.errors import UsageError
from loadtest.registry import DISABLE_ENV, disabled_plugins, mismatches
from tests.conftest import plugin_site

ROOT = Path(__file__).resolve().parent.parent


@runtime_checkable
class _Greeter(Protocol):
    @property
    def name(self) -> str: ...

    def greet(self, who: str, loud: bool) -> str: ...


class _Fits:
    name = "a"

    def greet(self, who: str, loud: bool, extra: int = 0) -> str:
        return who


class _Wrong:
    def greet(self, who: str) -> str:
        return who


class _Greedy:
    name = "b"

    def greet(self, who: str, loud: bool, times: int) -> str:
        return who * times


def test_a_plugin_is_checked_member_by_member_and_by_how_it_is_called() -> None:
    assert mismatches(_Fits(), _Greeter) == []  # an extra defaulted parameter is fine
    assert mismatches(_Wrong(), _Greeter) == [
        "greet(who) takes 1 arguments (the protocol passes 2)",
        "no name",
    ]
    assert mismatches(_Greedy(), _Greeter) == [
        "greet(who, loud, times) requires 3 arguments (the protocol passes 2)"
    ]


def test_disabled_names_are_read_per_group() -> None:
    env = os.environ.get(DISABLE_ENV)
    try:
        os.environ[DISABLE_ENV] = "pause, arrivals:gamma,loadtest.faults:cancel,tables:"
        assert disabled_plugins("loadtest.faults") == {"pause", "cancel"}
        assert disabled_plugins("loadtest.arrivals") == {"pause", "gamma"}
    finally:
        if env is None:
            del os.environ[DISABLE_ENV]
        else:
            os.environ[DISABLE_ENV] = env


def test_a_plugin_turned_off_is_not_offered_and_says_why(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert arrival_process("gamma") is not None  # loaded (and cached) while on
    monkeypatch.setenv(DISABLE_ENV, "arrivals:gamma")
    assert "gamma" not in ARRIVALS.names() and "poisson" in ARRIVALS.names()
    with pytest.raises(UsageError, match=r"the arrival process 'gamma' is turned off"):
        arrival_process("gamma")
    scenario = tmp_path / "g.toml"
    scenario.write_text(
        'name = "g"\n[[sources]]\nkind = "inline"\nprompts = ["a"]\n'
        '[load]\nmode = "gamma"\nrate = 5\nrequests = 5\n'
    )
    assert main(["run", str(scenario), "--check"]) == 2
    assert "turned off (LOADTEST_DISABLE_PLUGINS)" in capsys.readouterr().err


_BROKEN = """
class _Arrival:
    keys = {}

    def offsets_ns(self, rate):
        yield 0


BROKEN = _Arrival()
"""


@pytest.fixture
def broken_site(tmp_path: Path) -> Path:
    """A folder on PYTHONPATH with a distribution registering an arrival process that
    lacks ``problem`` and takes too few arguments: metadata as pip writes it."""
    return plugin_site(
        tmp_path, "broken_arrival", "loadtest.arrivals", "bursty = broken_arrival:BROKEN", _BROKEN
    )


def _loadtest(
    site: Path, cwd: Path, *args: str, env: Mapping[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``loadtest ARGS`` in a process that sees ``site``, with only ``env``'s plugins off."""
    full = {k: v for k, v in os.environ.items() if k != DISABLE_ENV}
    full.update(env or {}, PYTHONPATH=os.pathsep.join([str(site), str(ROOT)]))
    return subprocess.run(
        [sys.executable, "-m", "loadtest", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=full,
        cwd=cwd,
    )


def test_a_plugin_that_does_not_fit_fails_at_start_naming_itself_and_the_mismatch(
    broken_site: Path, tmp_path: Path
) -> None:
    listed = _loadtest(broken_site, tmp_path, "plugins")
    assert listed.returncode == 1, listed.stdout + listed.stderr
    lines = listed.stdout.splitlines()
    (line,) = [x for x in lines if x.strip().startswith("bursty ")]
    assert "broken-arrival 0.1" in line and "broken_arrival:BROKEN" in line
    said = (
        "the arrival process plugin 'broken_arrival:BROKEN' (bursty) does not fit: "
        "offsets_ns(rate) takes 1 arguments (the protocol passes 3); no problem"
    )
    assert f"failed: {said}" in line, line
    assert any(x.strip().startswith("poisson ") and x.endswith("loaded") for x in lines)
    scenario = tmp_path / "b.toml"
    scenario.write_text(
        'name = "b"\n[[sources]]\nkind = "inline"\nprompts = ["a"]\n'
        '[load]\nmode = "bursty"\nrate = 5\nrequests = 5\n'
    )
    checked = _loadtest(broken_site, tmp_path, "run", str(scenario), "--check")
    assert checked.returncode == 2, checked.stderr
    assert said in checked.stderr and "Traceback" not in checked.stderr
    # Turned off, it is listed as such and no longer fails the listing.
    off = _loadtest(broken_site, tmp_path, "plugins", env={DISABLE_ENV: "arrivals:bursty"})
    assert off.returncode == 0, off.stdout + off.stderr
    listed_off = off.stdout.splitlines()
    assert any("bursty" in x and x.endswith(f"disabled: {DISABLE_ENV}") for x in listed_off)
