"""Every shipped scenario runs with ``--workers 2``: a short run each, accounted exactly.

The run makes the same checks ``--check`` does, then sends load from two workers against
the built-in deployment; the merged folder must account every request once. Short on
purpose (8 requests, no warm-up, short answers): the deep checks of each kind (faults
judged once, a trace's times, exact lengths, sessions, turns, a killed worker) are in
``test_workers_scenarios.py``; ``benchmarks/bench_scaleout.py`` compares longer runs of
each scenario with a one-process run, and on Ray.
"""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from tests.conftest import loadtest_here, read_jsonl

ROOT = Path(__file__).resolve().parent.parent
SHIPPED = sorted(p.stem for p in (ROOT / "scenarios").glob("*.toml"))
# llama.cpp's own scenarios need the engine; the llama pass runs them.
SIM = [name for name in SHIPPED if not name.startswith("llama")]


@pytest.mark.parametrize("name", SIM, ids=str)
def test_every_shipped_scenario_runs_with_two_workers_and_accounts_every_request(
    name: str, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    short = ["--requests", "8", "--warmup", "0", "--max-tokens", "16"]
    # A fault window a short run does not reach is "not exercised": reported, not gated.
    flags = ["--workers", "2", *short, "--fail-on", "never", "--slo", "none", "--no-tui", "-q"]
    done = loadtest_here("run", name, *flags, "--out", str(out), cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    (run_dir,) = out.iterdir()
    s = orjson.loads((run_dir / "summary.json").read_bytes())
    r = s["requests"]
    rows = read_jsonl(run_dir / "requests.jsonl")
    assert s["run"]["workers"] == 2
    assert r["sent"] == r["ok"] + r["failed"] + r["cancelled"] == len(rows) > 0
    assert {row["worker"] for row in rows} == {0, 1}  # both workers sent load
    assert not s["run"].get("workers_lost")


def test_the_llama_scenarios_are_the_only_ones_left_out() -> None:
    assert set(SHIPPED) - set(SIM) == {"llama-baseline", "llama-spec"}
