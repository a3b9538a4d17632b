"""Agent sessions end to end against the simulator: steps, retries, tools, traces."""

from __future__ import annotations

import itertools
import json
import socket
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from loadtest.config.feature_specs import AGENT, TASKS
from loadtest.config.scenario import Scenario, parse_scenario
from loadtest.engine.runner import RunConfig, Runner, RunOutcome
from loadtest.errors import DatasetError, ScenarioError
from loadtest.features.agent.driver import AgentDriver
from loadtest.features.agent.tasks import call_name, load_agent_jsonl, load_bfcl_multi_turn
from loadtest.features.agent.taskspec import AgentSpec, build_tasks, parse_tasks
from loadtest.sim import InProcessSim, SimConfig
from tests.conftest import blocks, read_jsonl

ROOT = Path(__file__).resolve().parent.parent
SESSIONS = ROOT / "scenarios" / "data" / "agent-sessions.jsonl"
SIM = SimConfig(ttft_ms=3.0, itl_ms=0.5, ttft_sigma=0.1, itl_sigma=0.1, agent_steps=2)


RECORDED = {"kind": "agent-jsonl", "path": str(SESSIONS), "category": "recorded"}
# Many distinct conversations: the simulator draws validity per request body.
BFCL = {"kind": "bfcl-multi-turn", "limit": 40, "category": "bfcl"}


def _scenario(
    agent: dict[str, Any], tasks: int, source: dict[str, Any], api: str = "chat"
) -> Scenario:
    return parse_scenario(
        {
            "name": "agents",
            "api": api,
            "max_tokens": 24,
            "agent": agent,
            "tasks": [source],
            "load": {"concurrency": 4, "requests": tasks},
        },
        "agents.toml",
    )


async def _run(
    sim_cfg: SimConfig,
    agent: dict[str, Any],
    tmp: Path,
    tasks: int = 8,
    source: dict[str, Any] = RECORDED,
    api: str = "chat",
) -> tuple[RunOutcome, list[dict[str, Any]], list[dict[str, Any]]]:
    sc = _scenario(agent, tasks, source, api)
    spec = AGENT.get(sc)
    assert spec is not None
    pool = build_tasks(TASKS.of(sc), sc.seed)
    async with InProcessSim(sim_cfg) as sim:
        driver = AgentDriver(spec, pool, sc.seed)
        runner = Runner(RunConfig(sc, sim.url, "sim-llm", tmp), None, unit=driver)
        outcome = await runner.run()
    return outcome, read_jsonl(tmp / "tasks.jsonl"), read_jsonl(tmp / "requests.jsonl")


async def test_sessions_take_the_known_number_of_steps(tmp_path: Path) -> None:
    outcome, tasks, requests = await _run(SIM, {"tool": "fixed", "tool_ms": 5}, tmp_path)
    assert len(tasks) == 8
    for t in tasks:
        assert t["outcome"] == "completed", t
        # agent_steps = 2: two calls and an answer per turn.
        assert t["steps"] == t["requests"] == 3 * t["turns"]
        assert t["retries"] == 0 and len(t["valid_call_ms"]) == 2 * t["turns"]
        assert t["expected_total"] == {"weather-2": 2, "trip-1": 3}[t["task_id"]]
    assert len(requests) == sum(t["requests"] for t in tasks)
    assert {r["task"] for r in requests} == {t["index"] for t in tasks}
    agent = blocks(outcome).get("agent")
    assert agent is not None
    assert agent["tasks"] == 8 and agent["completed"] == 8 and agent["completion_rate"] == 1.0
    assert agent["time_to_valid_call_ms"]["count"] == sum(len(t["valid_call_ms"]) for t in tasks)
    assert agent["steps"]["count"] == 8 and agent["validity_rate"] == 1.0
    shares = agent["time_shares"]
    parts = {"queue", "network", "reasoning", "generation", "validation", "retry", "tool"}
    assert set(shares) == parts
    assert shares["retry"] == {"p50": 0.0, "p95": 0.0}  # nothing was retried
    assert shares["reasoning"] == {"p50": 0.0, "p95": 0.0}  # nor reasoned
    assert shares["tool"]["p50"] > 0 and shares["generation"]["p50"] > 0
    assert agent["by_category"]["recorded"]["completed"] == 8


async def test_invalid_calls_are_re_asked_and_counted(tmp_path: Path) -> None:
    cfg = SimConfig(
        ttft_ms=3.0, itl_ms=0.5, ttft_sigma=0.1, itl_sigma=0.1, agent_steps=2, invalid_tool_rate=0.3
    )
    agent = {"tool": "fixed", "tool_ms": 1, "max_retries": 6, "max_steps": 40}
    _, tasks, requests = await _run(cfg, agent, tmp_path, 30, BFCL)
    retries = sum(t["retries"] for t in tasks)
    invalid = [r for r in requests if r["error_class"] == "invalid_output"]
    assert retries > 0 and len(invalid) == retries + sum(
        1 for t in tasks if t["error_class"] == "invalid_output"
    )
    for t in tasks:
        assert t["requests"] == t["steps"] + t["retries"]
    # Calls are drawn invalid with p = 0.3 per distinct request body (the simulator's
    # seeded draw). The bodies now follow from the seed (call ids from the request's
    # bytes, tool results numbered per session), but the bound is derived as if the count
    # were random, for 1e-4: given the V valid calls the sessions needed, the invalid ones
    # before them are I ~ NegBin(V, 0.7): mean 3V/7, variance 0.3V/0.49 = 0.612V; with
    # its right skew (~0.18 at V = 180), z = 4.1 keeps each tail near 5e-5 (a task given
    # up after 7 invalid calls in a row only truncates I). With V = 180 (one run: I was
    # 84) that is I in [33, 121]: a simulator that ignored the rate (I = 0) or a client
    # that counted each invalid call twice (I ~ 154) still fails.
    attempts = sum(1 for r in requests if r["tool_calls"])
    valid = attempts - len(invalid)
    assert valid > 100, valid  # 30 sessions of BFCL turns, two calls each
    expected, sd = valid * 0.3 / 0.7, (0.3 * valid / 0.49) ** 0.5
    assert abs(len(invalid) - expected) < 4.1 * sd, (len(invalid), valid)


async def test_simulated_tool_results_number_each_sessions_own_calls() -> None:
    # Per session, so a session's request bodies do not depend on how sessions interleave.
    from loadtest.features.agent.tools import ToolRunner
    from loadtest.protocol.openai import ToolCall

    runner = ToolRunner(AgentSpec(tool="fixed", tool_ms=0.0))
    one, two = runner.for_session(), runner.for_session()
    call = ToolCall(index=0, name="get_weather", arguments="{}", id="c", completed_ns=0)
    assert [json.loads(await f(call, None))["call"] for f in (one, two, one, two)] == [1, 1, 2, 2]
    assert await one(call, "recorded") == "recorded"


async def test_sessions_run_over_the_responses_api(tmp_path: Path) -> None:
    # The history goes out as input items (function_call / function_call_output with the
    # call ids), so the simulator counts the tool results and answers after two calls.
    cfg = SimConfig(
        ttft_ms=3.0, itl_ms=0.5, ttft_sigma=0.1, itl_sigma=0.1, agent_steps=2, invalid_tool_rate=0.3
    )
    agent = {"tool": "fixed", "tool_ms": 1, "max_retries": 6, "max_steps": 40}
    outcome, tasks, requests = await _run(cfg, agent, tmp_path, 8, api="responses")
    assert [t["outcome"] for t in tasks] == ["completed"] * 8
    for t in tasks:
        assert t["steps"] == 3 * t["turns"] and t["requests"] == t["steps"] + t["retries"]
        assert len(t["valid_call_ms"]) == 2 * t["turns"]
    assert sum(t["retries"] for t in tasks) > 0  # rejections went back as call outputs
    assert all(r["response_id"].startswith("resp-") for r in requests)
    done = blocks(outcome).get("agent")
    assert done is not None and done["completed"] == 8


async def test_retries_run_out_and_the_task_fails_as_invalid_output(tmp_path: Path) -> None:
    cfg = SimConfig(ttft_ms=3.0, itl_ms=0.5, agent_steps=2, invalid_tool_rate=1.0)
    outcome, tasks, _ = await _run(
        cfg, {"tool": "fixed", "tool_ms": 1, "max_retries": 2}, tmp_path, 3
    )
    assert [t["outcome"] for t in tasks] == ["failed"] * 3
    assert all(t["error_class"] == "invalid_output" and t["requests"] == 3 for t in tasks)
    agent = blocks(outcome).get("agent")
    assert agent is not None and agent["errors"] == {"invalid_output": 3}


async def test_the_trace_spans_add_up_to_the_task_time(tmp_path: Path) -> None:
    cfg = SimConfig(ttft_ms=3.0, itl_ms=0.5, agent_steps=2, invalid_tool_rate=0.3)
    await _run(cfg, {"tool": "lognormal", "tool_ms": 4, "max_retries": 6}, tmp_path, 6)
    events = json.loads((tmp_path / "trace.json").read_text())
    tasks = {e["tid"]: e for e in events if e.get("cat") == "task"}
    assert len(tasks) == 6
    for tid, task in tasks.items():
        spans = [e for e in events if e.get("tid") == tid and e.get("cat") not in ("task", None)]
        assert {s["cat"] for s in spans} >= {"queue", "network", "generation", "tool"}
        total = sum(s["dur"] for s in spans)
        assert total == pytest.approx(task["dur"], abs=0.01)  # µs, rounding only
        # Contiguous: each span starts where the previous ended.
        spans.sort(key=lambda s: s["ts"])
        for a, b in itertools.pairwise(spans):
            assert b["ts"] == pytest.approx(a["ts"] + a["dur"], abs=0.01)


async def test_a_failing_tool_url_fails_the_task_with_class_tool(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    agent = {"tool": "url", "tool_url": f"http://127.0.0.1:{port}/tool", "tool_timeout_s": 2}
    outcome, tasks, requests = await _run(SIM, agent, tmp_path, 3)
    assert all(t["outcome"] == "failed" and t["error_class"] == "tool" for t in tasks)
    assert all(t["requests"] == 1 for t in tasks)  # the first call's tool failed
    assert all(r["outcome"] == "ok" for r in requests)  # the requests themselves were fine
    done = blocks(outcome).get("agent")
    assert done is not None and done["errors"] == {"tool": 3}


async def test_a_real_tool_url_answers_the_calls(tmp_path: Path) -> None:
    seen: list[dict[str, Any]] = []

    async def tool(request: web.Request) -> web.Response:
        seen.append(await request.json())
        return web.json_response({"temp_c": 21})

    app = web.Application()
    app.router.add_post("/tool", tool)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        _, tasks, _ = await _run(
            SIM, {"tool": "url", "tool_url": f"http://127.0.0.1:{port}/tool"}, tmp_path, 3
        )
    finally:
        await runner.cleanup()
    assert all(t["outcome"] == "completed" for t in tasks)
    assert len(seen) == sum(2 * t["turns"] for t in tasks)
    assert all(isinstance(s["arguments"], dict) and s["name"] for s in seen)


def test_recorded_sessions_split_into_turns_with_expected_calls() -> None:
    tasks = {t.id: t for t in load_agent_jsonl(SESSIONS, "recorded", None)}
    trip = tasks["trip-1"]
    assert len(trip.turns) == 2 and len(trip.system) == 1
    assert trip.expected == (("get_weather", "search_flights"), ("book_flight",))
    assert trip.results is not None and len(trip.results[0]) == 2


def test_bad_session_files_name_the_line(tmp_path: Path) -> None:
    bad = tmp_path / "s.jsonl"
    bad.write_text('{"messages": [{"role": "user", "content": "x"}], "tools": []}\n')
    with pytest.raises(DatasetError, match=r"s\.jsonl:1: 'tools' must be a non-empty list"):
        load_agent_jsonl(bad, "c", None)
    bad.write_text("{not json\n")
    with pytest.raises(DatasetError, match=r"s\.jsonl:1: not valid JSON"):
        load_agent_jsonl(bad, "c", None)


def test_scenario_errors() -> None:
    with pytest.raises(ScenarioError, match="tasks"):
        parse_scenario({"tasks": [{"kind": "bfcl-multi-turn"}]}, "a.toml")
    with pytest.raises(ScenarioError, match="agent-jsonl needs the path"):
        parse_tasks([{"kind": "agent-jsonl"}], "a.toml", Path("."))
    with pytest.raises(ScenarioError, match="tool_url"):
        parse_scenario({"agent": {"tool": "url"}, "tasks": [{}]}, "a.toml")
    sc = parse_scenario({"agent": {"max_steps": 5}, "tasks": [{"limit": 3}]}, "a.toml")
    assert AGENT.get(sc) == AgentSpec(max_steps=5) and TASKS.of(sc)[0].kind == "bfcl-multi-turn"


def test_bfcl_multi_turn_tasks_carry_turns_tools_and_expected_names() -> None:
    tasks = load_bfcl_multi_turn(("multi_turn_base",), "bfcl", 5)
    assert len(tasks) == 5
    t = tasks[0]
    assert len(t.turns) >= 2 and t.tools and t.expected is not None
    assert len(t.expected) == len(t.turns)
    names = {tool["function"]["name"] for tool in t.tools}
    assert set(t.expected[0]) <= names
    assert call_name("mv(source='a', destination='b')") == "mv"


async def test_a_reasoning_model_splits_the_time_to_a_valid_call(tmp_path: Path) -> None:
    """#47: a model that reasons before its tool call: each request's span between the
    first byte and the first answer token (the call) is ``reasoning``, the rest of its
    generation is the call itself; the spans still add up to the task time, and the
    summary's shares carry the reasoning part."""
    cfg = SimConfig(ttft_ms=3.0, itl_ms=2.0, agent_steps=2, reasoning_tokens=8)
    outcome, tasks, _ = await _run(cfg, {"tool": "fixed", "tool_ms": 2}, tmp_path, 4)
    events = json.loads((tmp_path / "trace.json").read_text())
    task_events = {e["tid"]: e for e in events if e.get("cat") == "task"}
    for tid, task in task_events.items():
        spans = sorted(
            (e for e in events if e.get("tid") == tid and e.get("cat") not in ("task", None)),
            key=lambda s: s["ts"],
        )
        names = [s["cat"] for s in spans]
        # Every request: queue, network, reasoning, generation, validation; then tools.
        assert names.count("reasoning") == names.count("generation") >= 1, names
        for a, b in itertools.pairwise(spans):
            assert b["ts"] == pytest.approx(a["ts"] + a["dur"], abs=0.01)
        assert sum(s["dur"] for s in spans) == pytest.approx(task["dur"], abs=0.01)
        # Eight tokens ~2 ms apart before each call: the reasoning span holds them.
        assert all(s["dur"] >= 7 * 2 * 1000 * 0.5 for s in spans if s["cat"] == "reasoning")
    agent = blocks(outcome)["agent"]
    assert isinstance(agent, dict)
    shares = agent["time_shares"]
    assert shares["reasoning"]["p50"] > 0.1, shares
    assert all(t["shares"]["reasoning"] > 0 for t in tasks if t["outcome"] == "completed")
