"""SLO thresholds, goodput, and the exit codes CI gates on."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from loadtest.cli.main import main
from loadtest.config.toml_tables import Table
from loadtest.errors import ScenarioError, UsageError
from loadtest.measure.slo import SLOSpec, Threshold, evaluate, parse_slo_flag, parse_slo_table
from tests.test_cli import inline_scenario


def _table(data: dict[str, object]) -> SLOSpec:
    t = Table(data, "s.toml", "slo")
    spec = parse_slo_table(t)
    t.finish()
    return spec


def test_table_forms_new_and_legacy() -> None:
    spec = _table({"ttft_ms": {"p95": 500, "p99": 900}, "tpot_p99_ms": 50, "error_rate": 0.01})
    labels = {t.label: t.limit for t in spec.thresholds}
    assert labels == {
        "ttft_ms.p95": 500.0,
        "ttft_ms.p99": 900.0,
        "tpot_ms.p99": 50.0,
        "error_rate": 0.01,
    }
    assert spec.request_limits() == {"ttft_ms": 500.0, "tpot_ms": 50.0}


@pytest.mark.parametrize(
    ("data", "fragment"),
    [
        ({"ttfb_ms": {"p95": 1}}, "slo.ttfb_ms: unknown metric"),
        ({"ttft_ms": {"p97": 1}}, "unknown statistic 'p97'"),
        ({"ttft_ms": {"p95": "fast"}}, "expected a number"),
        ({"ttft_ms": {"p95": -1}}, "limit >= 0"),
        ({"ttft_ms": 500}, "expected a table of limits such as ttft_ms.p95 = 500"),
    ],
)
def test_bad_tables_name_the_key(data: dict[str, object], fragment: str) -> None:
    with pytest.raises(ScenarioError, match=r"s\.toml") as err:
        _table(data)
    assert fragment in str(err.value)


def test_flags() -> None:
    assert parse_slo_flag("ttft_ms.p95=500, error_rate=0.02") == (
        Threshold("ttft_ms", "p95", 500.0),
        Threshold("error_rate", None, 0.02),
    )
    for bad in ("ttft_ms.p95", "ttft_ms.p95=soon", "nope.p95=1", "error_rate.p50=1"):
        with pytest.raises(UsageError, match="--slo"):
            parse_slo_flag(bad)


def test_flags_override_the_scenario_by_label() -> None:
    spec = SLOSpec((Threshold("ttft_ms", "p95", 500.0),))
    merged = spec.merged((Threshold("ttft_ms", "p95", 100.0), Threshold("e2e_ms", "p99", 9.0)))
    assert {t.label: t.limit for t in merged.thresholds} == {
        "ttft_ms.p95": 100.0,
        "e2e_ms.p99": 9.0,
    }


def test_evaluate_met_missed_and_missing() -> None:
    metrics = {"ttft_ms": {"count": 30, "p95": 400.0}, "tool_call_ms": {"count": 0}}
    error_rate = 0.05
    spec = SLOSpec(
        (
            Threshold("ttft_ms", "p95", 500.0),
            Threshold("error_rate", None, 0.01),
            Threshold("tool_call_ms", "p95", 1000.0),
        )
    )
    res = evaluate(spec, metrics, error_rate)
    assert [c["met"] for c in res["checks"]] == [True, False, False]
    # No tool calls at all: the objective was not exercised (and so not met).
    assert [c["verdict"] for c in res["checks"]] == ["met", "missed", "not_exercised"]
    assert res["met"] is False


def test_a_tail_or_a_rate_on_too_few_values_is_inconclusive_and_not_met() -> None:
    # A p99 of 30 values is near their slowest; an error rate of 0/30 cannot vouch for
    # 1%: neither is met, whichever side of the limit the figure fell on.
    metrics = {"ttft_ms": {"count": 30, "p99": 400.0, "p90": 380.0, "max": 420.0}}
    spec = SLOSpec(
        (
            Threshold("ttft_ms", "p99", 500.0),
            Threshold("ttft_ms", "p99", 100.0),
            Threshold("error_rate", None, 0.01),
            Threshold("ttft_ms", "p90", 500.0),
            Threshold("ttft_ms", "max", 500.0),
        )
    )
    res = evaluate(spec, metrics, 0.0, sent=30)
    verdicts = [c["verdict"] for c in res["checks"]]
    assert verdicts == ["inconclusive", "inconclusive", "inconclusive", "met", "met"]
    assert [c.get("need") for c in res["checks"][:3]] == [100, 100, 100]
    assert res["met"] is False
    enough = evaluate(spec, {"ttft_ms": {**metrics["ttft_ms"], "count": 100}}, 0.0, sent=100)
    assert [c["verdict"] for c in enough["checks"]] == ["met", "missed", "met", "met", "met"]


def test_a_run_too_short_for_its_p99_exits_1_and_says_why(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, summary = _run(tmp_path, "ttft_ms.p99=60000")
    assert code == 1
    (check,) = summary["slo"]["checks"]  # type: ignore[index]
    assert check["verdict"] == "inconclusive" and check["met"] is False
    assert (check["values"], check["need"]) == (30, 100)
    out = capsys.readouterr()
    assert "CANNOT TELL (30 values; a p99 needs 100)" in out.out
    assert "SLO ttft_ms.p99 cannot tell (30 values; a p99 needs 100)" in out.err + out.out


def _run(tmp_path: Path, *slo: str) -> tuple[int, dict[str, object]]:
    out = tmp_path / "out"
    scenario = inline_scenario(tmp_path, "requests = 30\n")
    argv = ["run", str(scenario), "--out", str(out), "--no-tui"]
    for s in slo:
        argv += ["--slo", s]
    code = main(argv)
    (run_dir,) = out.iterdir()
    return code, orjson.loads((run_dir / "summary.json").read_bytes())


def test_a_met_slo_exits_0_and_counts_goodput(tmp_path: Path) -> None:
    code, summary = _run(tmp_path, "ttft_ms.p90=60000", "e2e_ms.p50=60000")
    slo = summary["slo"]
    assert isinstance(slo, dict)
    assert code == 0 and slo["met"] is True
    ok = summary["requests"]["ok"]  # type: ignore[index]
    assert slo["goodput"]["requests"] == ok == 30
    assert slo["goodput"]["share"] == 1.0


def test_a_missed_slo_exits_1_and_no_request_is_goodput(tmp_path: Path) -> None:
    code, summary = _run(tmp_path, "ttft_ms.p50=0.001")
    slo = summary["slo"]
    assert isinstance(slo, dict)
    assert code == 1 and slo["met"] is False
    assert slo["checks"][0]["slo"] == "ttft_ms.p50" and slo["checks"][0]["met"] is False
    assert slo["goodput"]["requests"] == 0
