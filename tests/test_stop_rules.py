"""``[[load.stop]]``: a rule of a registered kind ends the load before its bound.

loadtest's own ``errors`` rule against a simulator that fails half its requests (it must
fire, fail the run and account for every request), against a healthy one (it must not),
and under ``--workers 2`` (each worker judges its own requests on its half of the
evidence). A plugin's rule: ``tests/test_plugins.py``.
"""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from loadtest.cli.main import main
from loadtest.config.scenario import parse_scenario
from loadtest.config.stop_kinds import ERRORS, ErrorBudget
from loadtest.config.stop_rules import RunSoFar
from loadtest.errors import ScenarioError
from loadtest.model.io import run_requests

# Ten prompts: the simulator draws each answer's failure from its prompt, so two would
# fail all or nothing.
_PROMPTS = ", ".join(f'"question {i}"' for i in range(10))


def _scenario(error_rate: float, duration_s: float) -> str:
    return (
        f'name = "budget"\nmax_tokens = 8\n[[sources]]\nkind = "inline"\nprompts = [{_PROMPTS}]\n'
        f"[load]\nconcurrency = 4\nduration_s = {duration_s}\n"
        '[[load.stop]]\nkind = "errors"\nshare = 0.3\nafter = 20\n'
        f"[sim]\nttft_ms = 5.0\nitl_ms = 1.0\nerror_rate = {error_rate}\n"
    )


def _parse(stop: list[dict[str, object]]) -> object:
    data = {"name": "x", "sources": [{"kind": "inline", "prompts": ["a"]}], "load": {"stop": stop}}
    return parse_scenario(data, "x.toml")


def test_a_stop_table_is_checked_naming_file_table_and_key() -> None:
    with pytest.raises(ScenarioError, match=r"x\.toml: load\.stop\[0\]\.kind: .*known: errors"):
        _parse([{"kind": "errorz", "share": 0.5}])
    with pytest.raises(ScenarioError, match=r"load\.stop\[0\]\.share: .*\(0, 1\]"):
        _parse([{"kind": "errors", "share": 1.5}])
    with pytest.raises(ScenarioError, match=r"load\.stop\[0\]\.shares"):
        _parse([{"kind": "errors", "share": 0.5, "shares": 1}])
    with pytest.raises(ScenarioError, match=r"load\.stop\[0\]\.kind: a stop rule needs a kind"):
        _parse([{"share": 0.5}])


def test_the_errors_rule_waits_for_its_evidence_and_splits_it() -> None:
    budget = ErrorBudget(share=0.5, after=20)
    seen = RunSoFar(elapsed_s=1.0, ended=19, ok=0, failed=19, output_tokens=0)
    assert ERRORS.reached(budget, seen) is None  # 19 failures of 19: not yet 20 ended
    seen = RunSoFar(elapsed_s=1.0, ended=20, ok=11, failed=9, output_tokens=0)
    assert ERRORS.reached(budget, seen) is None  # 45% < 50%
    seen = RunSoFar(elapsed_s=1.0, ended=20, ok=10, failed=10, output_tokens=0)
    assert ERRORS.reached(budget, seen) == (
        "errors: 10 of 20 measured requests failed (50% >= 50%)"
    )
    assert ERRORS.share(budget, 0, 3) == ErrorBudget(0.5, 7)  # each its part, rounded up


def _summary(out: Path) -> tuple[dict[str, object], Path]:
    (run_dir,) = out.iterdir()
    return orjson.loads((run_dir / "summary.json").read_bytes()), run_dir


@pytest.mark.parametrize("workers", [1, 2])
def test_a_failing_endpoint_is_stopped_failed_and_every_request_accounted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], workers: int
) -> None:
    scenario = tmp_path / "budget.toml"
    scenario.write_text(_scenario(error_rate=0.5, duration_s=30))
    out = tmp_path / "out"
    argv = ["run", str(scenario), "--no-tui", "--out", str(out), "--workers", str(workers)]
    code = main(argv)
    err = capsys.readouterr().err
    s, run_dir = _summary(out)
    stopped = s["stopped"]
    assert isinstance(stopped, list) and 1 <= len(stopped) <= workers, stopped
    for fired in stopped:
        assert fired["rule"] == "errors" and fired["fails"] is True
        # Each process judged its own requests, after its part of the 20.
        ended = int(fired["reason"].split(" of ")[1].split()[0])
        assert ended >= 20 // workers, fired
    assert code == 1
    assert "stopped early (errors: " in err.splitlines()[-1]
    # The load ended long before its 30 s, and not as an interruption.
    run = s["run"]
    assert isinstance(run, dict) and not run["interrupted"] and run["duration_s"] < 30
    # Every request sent is accounted, each with one outcome.
    req = s["requests"]
    assert isinstance(req, dict)
    assert req["sent"] > 0
    assert sum(1 for _ in run_requests(run_dir)) == req["sent"]


def test_a_healthy_endpoint_runs_to_its_bound(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    scenario = tmp_path / "budget.toml"
    scenario.write_text(_scenario(error_rate=0.0, duration_s=1.5))
    out = tmp_path / "out"
    code = main(["run", str(scenario), "--no-tui", "--out", str(out)])
    capsys.readouterr()
    s, _ = _summary(out)
    assert "stopped" not in s
    requests = s["requests"]
    assert isinstance(requests, dict) and requests["failed"] == 0 and requests["ok"] > 20
    assert code == 0
