"""Agent sessions from OpenTelemetry GenAI traces: read, replayed as recorded, time split.

The shipped trace (``fixtures/otel-agent.jsonl``) was made by the OpenAI SDK under
``opentelemetry-instrumentation-openai-v2`` and the SDK's OTLP JSON file exporter
(``fixtures/record_otel_agent.py``); one test records a fresh one the same way.
"""

from __future__ import annotations

import asyncio
import importlib.util
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any, cast

import orjson
import pytest

from loadtest.config.scenario import Scenario
from loadtest.datasets.otel import RecordedSession, read_agent_trace
from loadtest.datasets.tokenizer import EndpointTokenizer
from loadtest.engine.runner import RunConfig, Runner
from loadtest.errors import DatasetError, ScenarioError
from loadtest.features.agent_trace_block import render_agent_trace
from loadtest.features.session_tally import tally_lines
from loadtest.features.workload import needs_tokenizer, plan_lines, prepare_workload
from loadtest.model.summary import AgentTraceBlock
from loadtest.sim import InProcessSim
from loadtest.sim.model import SimConfig
from tests.conftest import blocks, make_scenario, read_jsonl

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = ROOT / "fixtures" / "otel-agent.jsonl"
LAG_BOUND_MS = 250.0
"""Generous: the test machine is shared; a call sent after the wrong answer is far later."""
SLOW = SimConfig(ttft_ms=10.0, itl_ms=8.0, ttft_sigma=0.1, itl_sigma=0.1)
FAST = SimConfig(ttft_ms=10.0, itl_ms=2.0, ttft_sigma=0.1, itl_sigma=0.1)


def trace_scenario(path: Path, load: dict[str, Any] | None = None, **keys: object) -> Scenario:
    src = {"kind": "agent-trace", "path": str(path), **keys}
    return make_scenario(load or {}, sources=[src])


def documents(path: Path) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in path.read_bytes().splitlines() if line.strip()]


def spans_of(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        s for d in docs for rs in d["resourceSpans"] for ss in rs["scopeSpans"] for s in ss["spans"]
    ]


def write_docs(tmp: Path, docs: list[dict[str, Any]], name: str = "t.jsonl") -> Path:
    path = tmp / name
    path.write_bytes(b"".join(orjson.dumps(d) + b"\n" for d in docs))
    return path


def test_the_shipped_trace_reads_as_three_sessions_of_ordered_calls() -> None:
    sessions = read_agent_trace(FIXTURE)
    spans = spans_of(documents(FIXTURE))
    assert len(sessions) == 3
    assert [s.offset_ns for s in sessions] == sorted(s.offset_ns for s in sessions)
    for s in sessions:
        chats = sorted(
            (x for x in spans if x["traceId"] == s.trace_id and x["name"].startswith("chat ")),
            key=lambda x: int(x["startTimeUnixNano"]),
        )
        assert [c.span_id for c in s.calls] == [x["spanId"] for x in chats]
        assert s.tools == sum(
            x["traceId"] == s.trace_id and x["name"].startswith("execute_tool") for x in spans
        )
        for prev, c in zip(s.calls, s.calls[1:], strict=False):
            assert c.start_ns - prev.end_ns == c.gap_ns
            assert 0 < c.tool_ns < c.gap_ns  # a tool ran, then the agent worked a little
        assert s.calls[0].gap_ns == 0
        assert all(c.settings == {"temperature": 0.7} for c in s.calls)
    # Content was captured in the first session only (see the recording script).
    first = sessions[0].calls
    assert all(c.messages is not None for c in first)
    assert first[1].messages is not None and first[1].messages[-1]["role"] == "tool"
    assert first[1].messages[-2]["tool_calls"][0]["function"]["name"] in (
        "search_docs",
        "run_tests",
    )
    assert all(c.messages is None for s in sessions[1:] for c in s.calls)


def _break(tmp: Path, how: str) -> tuple[Path, str, str]:
    docs = documents(FIXTURE)
    spans = spans_of(docs)
    chats = [s for s in spans if s["name"].startswith("chat ")]
    victim = chats[1]
    if how == "parent":
        victim["parentSpanId"] = "00000000deadbeef"
    elif how == "overlap":
        victim["startTimeUnixNano"] = str(int(chats[0]["endTimeUnixNano"]) - 1_000_000)
    else:
        victim["attributes"] = [
            a for a in victim["attributes"] if a["key"] != "gen_ai.usage.output_tokens"
        ]
    return write_docs(tmp, docs, "bad.jsonl"), victim["traceId"], victim["spanId"]


@pytest.mark.parametrize(
    ("how", "problem"),
    [
        ("parent", "parent 00000000deadbeef is not in the trace"),
        ("overlap", "overlapping calls"),
        ("tokens", "no token counts"),
    ],
)
def test_a_bad_trace_is_named_by_file_trace_and_span(
    tmp_path: Path, how: str, problem: str
) -> None:
    path, trace_id, span_id = _break(tmp_path, how)
    with pytest.raises(DatasetError, match=problem) as err:
        read_agent_trace(path)
    assert str(path) in str(err.value)
    assert f"trace {trace_id}, span {span_id}" in str(err.value)


def test_one_pretty_printed_document_reads_like_lines(tmp_path: Path) -> None:
    docs = documents(FIXTURE)
    merged = {"resourceSpans": [rs for d in docs for rs in d["resourceSpans"]]}
    path = tmp_path / "whole.json"
    path.write_bytes(orjson.dumps(merged, option=orjson.OPT_INDENT_2))
    assert read_agent_trace(path) == read_agent_trace(FIXTURE)
    (tmp_path / "junk.json").write_bytes(b"{nope")
    with pytest.raises(DatasetError, match=r"junk\.json: not OTLP JSON"):
        read_agent_trace(tmp_path / "junk.json")
    (tmp_path / "empty.json").write_bytes(b'{"resourceSpans": []}\n')
    with pytest.raises(DatasetError, match="no trace holds a chat span"):
        read_agent_trace(tmp_path / "empty.json")


def test_an_agent_trace_source_wants_a_path_and_only_its_keys() -> None:
    with pytest.raises(ScenarioError, match="needs a path"):
        make_scenario({}, sources=[{"kind": "agent-trace"}])
    with pytest.raises(ScenarioError, match="starts"):
        trace_scenario(FIXTURE, starts="whenever")
    with pytest.raises(ScenarioError, match="unknown key"):
        trace_scenario(FIXTURE, think_time_ms=3)
    sc = trace_scenario(FIXTURE, speedup=2.0)
    assert needs_tokenizer(sc)  # two sessions have lengths only
    assert "3 sessions, 12 model calls, at their recorded starts" in plan_lines(sc)[0]


async def _replay(sc: Scenario, sim_config: SimConfig, run_dir: Path) -> AgentTraceBlock:
    await asyncio.to_thread(run_dir.mkdir)
    async with InProcessSim(sim_config) as sim:
        tok = EndpointTokenizer(sim.url, "sim-llm")
        wl = await asyncio.to_thread(prepare_workload, sc, "sim-llm", tok)
        assert wl is not None
        cfg = RunConfig(scenario=wl.scenario, endpoint=sim.url, model="sim-llm", run_dir=run_dir)
        out = await Runner(cfg, None, hooks=list(wl.hooks), unit=wl.unit).run()
    replayed = blocks(out).get("agent_trace")
    assert replayed is not None
    return cast(AgentTraceBlock, replayed)


def _by_session(run_dir: Path) -> dict[str, list[dict[str, Any]]]:
    lines = read_jsonl(run_dir / "requests.jsonl")
    out: dict[str, list[dict[str, Any]]] = {}
    for x in sorted(lines, key=lambda x: x["sent_ms"]):
        out.setdefault(x["trace_id"], []).append(x)
    return out


async def test_sessions_replay_their_calls_in_order_after_the_recorded_gaps(
    tmp_path: Path,
) -> None:
    sessions = read_agent_trace(FIXTURE)
    block = await _replay(trace_scenario(FIXTURE), SLOW, tmp_path / "run")
    assert (block["completed"], block["failed"], block["calls"]) == (3, 0, 12)
    sent = _by_session(tmp_path / "run")
    for s in sessions:
        lines = sent[s.trace_id]
        assert [x["call"] for x in lines] == [1, 2, 3, 4]
        assert all(x["outcome"] == "ok" for x in lines)
        # The recorded lengths: outputs exact (ignore_eos), cut inputs exact.
        assert [x["output_tokens"] for x in lines] == [c.output_tokens for c in s.calls]
        for x, c in zip(lines, s.calls, strict=True):
            if c.messages is None:
                assert x["prompt_tokens"] == c.input_tokens
        # Each call waited for the previous answer, then the recorded non-model time.
        for prev, x, c in zip(lines, lines[1:], s.calls[1:], strict=False):
            late = x["sent_ms"] - prev["end_ms"] - c.gap_ns / 1e6
            assert -0.5 <= late < LAG_BOUND_MS
    starts = [sent[s.trace_id][0]["intended_ms"] for s in sessions]
    assert starts == pytest.approx([s.offset_ns / 1e6 for s in sessions], abs=0.01)


def _assert_adds_up(row: Any, recorded_other_ms: float | None = None) -> None:
    parts = row["ttft_ms"] + row["decode_ms"] + row["tools_ms"] + row["other_ms"]
    assert parts == pytest.approx(row["session_ms"], abs=0.01)
    assert min(row["ttft_ms"], row["decode_ms"], row["tools_ms"]) > 0
    if recorded_other_ms is not None:
        # Other holds the agent's recorded work, plus no more than the driver's lag.
        assert recorded_other_ms - 0.5 <= row["other_ms"]
        assert row["other_ms"] < recorded_other_ms + 4 * LAG_BOUND_MS


def _recorded_other_ms(s: RecordedSession) -> float:
    return sum(c.gap_ns - c.tool_ns for c in s.calls) / 1e6


async def test_the_time_split_adds_up_and_a_faster_model_saves_no_more_than_generation(
    tmp_path: Path,
) -> None:
    sessions = {s.trace_id: s for s in read_agent_trace(FIXTURE)}
    sc = trace_scenario(FIXTURE, {"mode": "closed", "concurrency": 3}, starts="closed")
    slow = await _replay(sc, SLOW, tmp_path / "slow")
    fast = await _replay(sc, FAST, tmp_path / "fast")
    for block in (slow, fast):
        assert block["total"] is not None and block["recorded"] is not None
        _assert_adds_up(block["total"])
        for row in block["sessions"]:
            s = sessions[row["trace_id"]]
            _assert_adds_up(row, _recorded_other_ms(s))
            assert row["tools_ms"] == pytest.approx(s.tool_ns / 1e6, abs=0.01)
            assert row["recorded_session_ms"] == pytest.approx(s.session_ns / 1e6, abs=0.01)
        assert block["recorded"]["tools_ms"] == block["total"]["tools_ms"]
        assert block["decode_share"] is not None and 0 < block["decode_share"] < 1
    slow_rows = {r["trace_id"]: r for r in slow["sessions"]}
    for row in fast["sessions"]:
        was = slow_rows[row["trace_id"]]
        saved = was["session_ms"] - row["session_ms"]
        assert 0 < saved <= was["ttft_ms"] + was["decode_ms"] + LAG_BOUND_MS
        assert row["decode_ms"] < was["decode_ms"]
    text = render_agent_trace(slow)
    assert "decode holds" in text
    assert max(len(line) for line in text.splitlines()) <= 80


def test_no_completed_session_says_no_data() -> None:
    block: AgentTraceBlock = {
        "sessions_in_trace": 3,
        "replayed": 1,
        "completed": 0,
        "failed": 1,
        "calls": 0,
        "total": None,
        "recorded": None,
        "decode_share": None,
        "generation_share": None,
        "gap_lag_ms_max": None,
        "sessions": [],
        "sessions_listed": 0,
    }
    assert "no data" in render_agent_trace(block)


def test_workers_tallies_add_up_to_one_processs_exactly() -> None:
    """Split by session, the workers' tallies (through their JSON parts) add up to the
    tally of one process that replayed every session: counters and ns sums exact, the
    lag's maximum kept, shares computed once on the sums, and the sessions listed those a
    process lists, the first ``SESSIONS_LISTED`` to end (more than that many here)."""
    import random

    from loadtest.features.agent_trace import (
        SESSIONS_LISTED,
        ReplayTally,
        SessionTimes,
        merge_replays,
    )

    rng = random.Random(5)
    sessions = read_agent_trace(FIXTURE) * 50
    assert len(sessions) > SESSIONS_LISTED
    times = [
        SessionTimes(
            trace_id=s.trace_id,
            calls=len(s.calls),
            session_ns=rng.randrange(10**9, 3 * 10**9),
            ttft_ns=rng.randrange(10**8),
            decode_ns=rng.randrange(5 * 10**8),
            tools_ns=s.tool_ns,
            recorded_ns=s.session_ns,
            recorded_model_ns=s.model_ns,
            gap_lag_ns_max=rng.randrange(10**7),
            end_ns=i * 10**8,  # in the order they are recorded, as a process ends them
        )
        for i, s in enumerate(sessions)
    ]
    whole = ReplayTally(sessions_in_trace=len(sessions))
    shares = [ReplayTally(sessions_in_trace=len(range(w, len(sessions), 3))) for w in range(3)]
    for i, t in enumerate(times):
        whole.record(t)
        shares[i % 3].record(t)
    shares[1].failed = 2
    whole.failed = 2
    merged = merge_replays([x.encode() for x in shares])
    expected = whole.block()
    assert merged == expected
    assert ReplayTally.decode(whole.encode()) == whole


@pytest.mark.skipif(
    importlib.util.find_spec("opentelemetry.instrumentation.openai_v2") is None,
    reason="the dev extra's OpenTelemetry packages are not installed",
)
async def test_a_fresh_recording_by_the_official_instrumentation_replays(
    tmp_path: Path,
) -> None:
    script = ROOT / "fixtures" / "record_otel_agent.py"
    out = tmp_path / "fresh.jsonl"
    proc = await asyncio.create_subprocess_exec(
        sys.executable, str(script), str(out), stderr=asyncio.subprocess.PIPE
    )
    _, err = await asyncio.wait_for(proc.communicate(), 120)
    assert proc.returncode == 0, err.decode()[-2000:]
    sessions = read_agent_trace(out)
    assert len(sessions) == 3
    assert all(len(s.calls) == 4 for s in sessions)  # the sim's agent-steps 3, then text
    assert all(c.messages is not None for c in sessions[0].calls)
    block = await _replay(trace_scenario(out, speedup=4.0), SLOW, tmp_path / "run")
    assert (block["completed"], block["calls"]) == (3, 12)


async def test_a_reasoning_model_gives_the_session_split_its_reasoning_share(
    tmp_path: Path,
) -> None:
    """#47: each call's reasoning (first reasoning token to first answer token) is part
    of its decode; the session split says how much, and so does a rebuild of the run
    from its lines alone (``tally_lines``)."""
    think = replace(SLOW, reasoning_tokens=6, reasoning_sigma=0.0)
    block = await _replay(trace_scenario(FIXTURE), think, tmp_path / "run")
    total = block["total"]
    assert total is not None and block["completed"] == 3
    lines = read_jsonl(tmp_path / "run" / "requests.jsonl")
    assert all(x["reasoning_split"] == "field" for x in lines)
    # The sum of the calls' reasoning, inside their decode, as its share of the sessions.
    reasoning = total.get("reasoning_ms")
    assert reasoning is not None
    assert reasoning == pytest.approx(sum(x["reasoning_ms"] for x in lines), abs=0.01)
    assert 0 < reasoning < total["decode_ms"]
    share = block.get("reasoning_share")
    assert share == pytest.approx(reasoning / total["session_ms"], abs=1e-4)
    # Six tokens of ~8 ms before each answer: at least 5 gaps a call, 12 calls.
    assert reasoning > 12 * 5 * 8 * 0.5
    for row in block["sessions"]:
        assert 0 < row.get("reasoning_ms", 0) < row["decode_ms"]
    rebuilt = tally_lines(lines).tally.block()
    assert rebuilt.get("reasoning_share") == share
    text = render_agent_trace(block)
    assert "    of which reasoning" in text and "reasoning holds " in text
    assert max(len(line) for line in text.splitlines()) <= 80


async def test_without_reasoning_the_split_has_no_reasoning_part(tmp_path: Path) -> None:
    block = await _replay(trace_scenario(FIXTURE), FAST, tmp_path / "run")
    assert block["total"] is not None and "reasoning_ms" not in block["total"]
    assert "reasoning_share" not in block
    assert "reasoning" not in render_agent_trace(block)
