"""Trace replay: lines parsed (errors name file and line), sent in order at their times."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path

import orjson
import pytest

from loadtest.app.options import RunOptions, apply_overrides
from loadtest.app.run.export_trace import trace_lines
from loadtest.cli.main import main
from loadtest.config.scenario import Scenario, load_scenario
from loadtest.config.workload_tables import TraceKeys
from loadtest.datasets.tokenizer import EndpointTokenizer
from loadtest.datasets.trace import read_trace, trace_prompts
from loadtest.engine.runner import RunConfig, Runner
from loadtest.engine.schedule import ArrivalPlan, arrival_offsets_ns, trace_offsets_ns
from loadtest.errors import DatasetError
from loadtest.features.workload import plan_lines, prepare_workload
from loadtest.sim import InProcessSim
from tests.conftest import FAST_SIM, make_scenario, read_jsonl

FIXTURE = Path(__file__).parent.parent / "scenarios" / "data" / "trace-small.jsonl"
LAG_BOUND_MS = 250.0
"""Generous: the test machine is shared; a request sent out of its turn is far later."""

MOONCAKE = [
    {"timestamp": 0, "input_length": 40, "output_length": 5, "hash_ids": [7, 8]},
    {"timestamp": 30, "input_length": 36, "output_length": 3, "hash_ids": [7, 8]},
    {"timestamp": 30, "input_length": 20, "output_length": 4, "hash_ids": [9]},
    {"timestamp": 95, "input_length": 12, "output_length": 2},
]


def write(tmp: Path, lines: list[object], name: str = "t.jsonl") -> Path:
    path = tmp / name
    path.write_bytes(b"".join(orjson.dumps(x) + b"\n" for x in lines))
    return path


def trace_scenario(path: Path, **keys: object) -> Scenario:
    src = {"kind": "trace", "path": str(path), "block_size": 16, **keys}
    return make_scenario({"mode": "closed"}, sources=[src])


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        (b"{not json", "not JSON"),
        (b'{"input_length": 3}', "'timestamp'"),
        (b'{"timestamp": -1, "input_length": 3}', "'timestamp'"),
        (b'{"timestamp": 1}', "needs 'input_length'"),
        (b'{"timestamp": 1, "input_length": 0}', "'input_length'"),
        (b'{"timestamp": 1, "input_length": 4, "hash_ids": ["a"]}', "'hash_ids'"),
        (b'{"timestamp": 1, "messages": []}', "'messages'"),
    ],
)
def test_a_bad_line_is_named_by_file_and_line(tmp_path: Path, line: bytes, problem: str) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_bytes(b'{"timestamp": 0, "prompt": "ok"}\n\n' + line + b"\n")
    with pytest.raises(DatasetError, match=rf"bad\.jsonl:3: .*{problem}"):
        read_trace(path)


def test_mooncake_lines_are_taken_as_they_are_and_kept_in_time_order(tmp_path: Path) -> None:
    lines = [MOONCAKE[3], MOONCAKE[0], MOONCAKE[1], MOONCAKE[2]]
    entries = read_trace(write(tmp_path, lines))
    assert [e.line for e in entries] == [2, 3, 4, 1]  # ties keep the file's order
    assert entries[0].hash_ids == (7, 8)
    assert trace_offsets_ns([e.timestamp_ms for e in entries], 2.0) == (0, 15e6, 15e6, 47.5e6)
    plan = ArrivalPlan("trace", 1.0, offsets_ns=(0, 5, 9))
    assert list(arrival_offsets_ns(plan, 0)) == [0, 5, 9]
    with pytest.raises(ValueError, match="back in time"):
        ArrivalPlan("trace", 1.0, offsets_ns=(0, 5, 4))


async def test_shared_hash_ids_share_their_text(tmp_path: Path) -> None:
    entries = read_trace(write(tmp_path, MOONCAKE))
    async with InProcessSim(FAST_SIM) as sim:
        tok = EndpointTokenizer(sim.url, "sim-llm")
        prompts = await asyncio.to_thread(trace_prompts, entries, tok, 16, "t")
    texts = [str(p.messages[0]["content"]) for p in prompts]
    assert [len(t) for t in texts] == [4 * e.input_length for e in entries if e.input_length]
    assert texts[0][: 4 * 32] == texts[1][: 4 * 32]  # blocks 7 and 8: 2 x 16 tokens
    assert texts[0][4 * 32 :] != texts[1][4 * 32 :]
    assert texts[2][:64] != texts[0][:64]
    assert [p.max_tokens for p in prompts] == [5, 3, 4, 2]


async def test_a_trace_is_sent_in_order_at_its_own_times(tmp_path: Path) -> None:
    sc = trace_scenario(FIXTURE, speedup=2.0)
    entries = read_trace(FIXTURE)
    offsets = trace_offsets_ns([e.timestamp_ms for e in entries], 2.0)
    assert "40 requests over" in plan_lines(sc)[0]
    async with InProcessSim(FAST_SIM) as sim:
        wl = prepare_workload(sc, "sim-llm", None)
        assert wl is not None
        cfg = RunConfig(scenario=wl.scenario, endpoint=sim.url, model="sim-llm", run_dir=tmp_path)
        runner = Runner(cfg, None, hooks=list(wl.hooks), unit=wl.unit)
        out = await runner.run()
    lines = sorted(read_jsonl(tmp_path / "requests.jsonl"), key=lambda x: x["index"])
    assert len(lines) == len(entries) == out.metrics.sent
    assert all(x["outcome"] == "ok" for x in lines)
    # Line i went out as unit i, with its own text and the trace's own time.
    for x, e, off in zip(lines, entries, offsets, strict=True):
        assert x["prompt_id"] == f"trace-{e.line}"
        assert x["trace_index"] == x["index"]
        assert x["intended_ms"] == pytest.approx(off / 1e6, abs=0.01)
        assert 0 <= x["dispatch_lag_ms"] < LAG_BOUND_MS
        assert x["output_tokens"] <= (e.output_length or 0)
    sent = [x["sent_ms"] for x in lines]
    assert sent == sorted(sent)


def test_export_trace_writes_a_replayable_trace(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "run"
    run.mkdir()
    rows = [
        {
            "index": 1,
            "intended_ms": 50.0,
            "prompt_tokens": 30,
            "output_tokens": 7,
            "prompt_chars": 99,
        },
        {
            "index": 0,
            "intended_ms": 10.0,
            "prompt_tokens": None,
            "output_tokens": 0,
            "prompt_chars": 40,
        },
        {
            "index": 2,
            "intended_ms": 50.0,
            "prompt_tokens": 5,
            "output_tokens": 2,
            "messages": [{"role": "user", "content": "hi"}],
        },
    ]
    write(run, rows, "requests.jsonl")
    out = tmp_path / "trace.jsonl"
    assert main(["export-trace", str(run), "-o", str(out)]) == 0
    assert str(out) in capsys.readouterr().out
    entries = read_trace(out)
    assert [e.timestamp_ms for e in entries] == [0.0, 40.0, 40.0]
    assert [e.input_length for e in entries] == [10, 30, 5]
    assert [e.output_length for e in entries] == [1, 7, 2]
    assert entries[2].messages == ({"role": "user", "content": "hi"},)
    assert trace_lines(run)[0]["timestamp"] == 0.0


def test_the_shipped_fixture_is_a_valid_trace() -> None:
    entries = read_trace(FIXTURE)
    assert len(entries) == 40
    assert all(e.messages for e in entries)
    ts = [e.timestamp_ms for e in entries]
    assert ts == sorted(ts) and ts[0] == 0.0


def test_a_trace_source_wants_a_path_and_only_its_keys(tmp_path: Path) -> None:
    from loadtest.errors import ScenarioError

    with pytest.raises(ScenarioError, match="needs a path"):
        make_scenario({"mode": "closed"}, sources=[{"kind": "trace"}])
    with pytest.raises(ScenarioError, match="unknown key"):
        trace_scenario(FIXTURE, max_turns=3)
    sc = trace_scenario(FIXTURE, speedup=4.0)
    assert replace(sc).sources[0].own(TraceKeys).speedup == 4.0


def test_duration_and_requests_flags_bound_a_replay() -> None:
    # A trace with no bound of its own is replayed whole, unless a flag bounds it.
    sc = load_scenario(FIXTURE.parent.parent / "trace.toml")
    assert sc.bound_defaulted
    whole = prepare_workload(apply_overrides(sc, RunOptions()), "m", None)
    timed = prepare_workload(apply_overrides(sc, RunOptions(duration=0.3)), "m", None)
    counted = prepare_workload(apply_overrides(sc, RunOptions(requests=7)), "m", None)
    assert whole is not None and timed is not None and counted is not None
    assert (whole.scenario.load.requests, whole.scenario.load.duration_s) == (40, None)
    assert timed.scenario.load.duration_s == 0.3
    assert counted.scenario.load.requests == 7
