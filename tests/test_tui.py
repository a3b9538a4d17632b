"""The live TUI, driven headless with Textual's pilot against a real simulated run."""

from __future__ import annotations

from pathlib import Path

from textual.widgets import DataTable, Static

from loadtest.datasets import build_pool
from loadtest.metrics import Snapshot
from loadtest.runner import RunConfig, Runner
from loadtest.sim import InProcessSim
from loadtest.tui import LiveApp
from loadtest.tui.app import render_counts
from tests.conftest import FAST_SIM, make_scenario


def test_counts_panel_text() -> None:
    s = Snapshot(
        elapsed_s=3.0,
        sent=10,
        ok=7,
        failed=1,
        cancelled=0,
        in_flight=2,
        warmup=False,
        requests_per_s=4.5,
        output_tokens_per_s=300.0,
        ttft_p50_ms=1,
        ttft_p99_ms=2,
        tpot_p50_ms=1,
        e2e_p50_ms=1,
        e2e_p99_ms=1,
        dispatch_lag_p99_ms=0,
        errors={"http_5xx": 1},
    )
    text = render_counts(s)
    assert "measuring" in text and "ok 7" in text and "http_5xx 1" in text and "4.5 req/s" in text


async def test_live_app_shows_the_run_and_q_stops_it(tmp_path: Path) -> None:
    sc = make_scenario({"mode": "closed", "concurrency": 4, "duration_s": 60, "grace_s": 1})
    pool, _ = build_pool(sc)
    async with InProcessSim(FAST_SIM) as sim:

        async def prepare() -> Runner:
            cfg = RunConfig(scenario=sc, endpoint=sim.url, model="sim-llm", run_dir=tmp_path)
            return Runner(cfg, pool)

        app = LiveApp(prepare)
        async with app.run_test(size=(100, 30)) as pilot:
            await pilot.pause(2.5)
            counts = str(app.query_one("#counts", Static).render())
            assert "measuring" in counts and "ok " in counts
            table = app.query_one("#latency", DataTable)
            assert float(table.get_cell("ttft_p99_ms", "value")) > 0
            assert "TTFT" in app.export_screenshot()
            assert app.runner is not None
            sent_before = app.runner.snapshot().sent
            assert sent_before > 0
            await pilot.press("q")
            await pilot.pause(2.0)
        assert app.outcome is not None
        assert app.outcome.interrupted
        m = app.outcome.metrics
        assert m.sent == m.outcomes["ok"] + m.outcomes["failed"] + m.outcomes["cancelled"]
        assert m.sent >= sent_before - 4
