"""Features attach through hooks; the engine imports none of them."""

from __future__ import annotations

import ast
from pathlib import Path

import loadtest.engine as engine
from loadtest.engine.hooks import HookResult, RunContext, RunHook
from loadtest.measure.recorders import MetricSet
from loadtest.model.record import RequestRecord
from loadtest.sim import InProcessSim
from tests.conftest import FAST_SIM, make_scenario, read_jsonl, run_against


class Recorder(RunHook):
    """Notes each call, in order; idles the load for a while and orders no cancels."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.records = 0
        self.intervals = 0
        self.t0_ns: int | None = None

    def before_start(self) -> None:
        self.calls.append("before_start")

    async def on_start(self, ctx: RunContext) -> None:
        self.calls.append("on_start")
        self.t0_ns = ctx.t0_ns
        assert ctx.in_flight == 0 and ctx.run_dir.is_dir()

    def on_interval(self, interval: MetricSet, start_s: float, length_s: float) -> None:
        self.intervals += 1

    def on_record(self, rec: RequestRecord) -> None:
        self.records += 1

    async def on_finish(self) -> None:
        self.calls.append("on_finish")

    def result(self, run_dir: Path) -> HookResult:
        self.calls.append("result")
        return HookResult(blocks={"server": {"samples": self.records, "scraped": 0}})


async def test_a_hook_sees_the_run_from_start_to_result(tmp_path: Path) -> None:
    sc = make_scenario({"mode": "closed", "concurrency": 2, "requests": 6})
    hook = Recorder()
    async with InProcessSim(FAST_SIM) as sim:
        runner, out = await run_against(sim, sc, tmp_path, hooks=[hook])
    assert hook.calls == ["before_start", "on_start", "on_finish", "result"]
    assert hook.t0_ns == out.t0_ns
    assert hook.records == out.metrics.sent == len(read_jsonl(tmp_path / "requests.jsonl"))
    assert hook.intervals >= 1  # the last interval rolls at the end
    # The engine collects each block's parts by name; the report merges them.
    assert out.blocks == {"server": ({"samples": 6, "scraped": 0},)}
    assert runner.hook(Recorder) is hook


def test_the_engine_imports_no_feature_dashboard_or_report() -> None:
    allowed = {"loadtest.model.atomic"}  # LineLog: requests.jsonl, whole lines
    for path in Path(engine.__file__).parent.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                mod = node.module
                if mod.startswith(("loadtest.features", "loadtest.tui", "loadtest.report")):
                    assert mod in allowed, f"{path.name} imports {mod}"
