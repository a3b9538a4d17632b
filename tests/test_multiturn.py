"""Multi-turn chat: every turn carries the whole history; TTFT is kept by turn number."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import orjson
import pytest

from loadtest.app.run.job import finish_run
from loadtest.config.scenario import Scenario
from loadtest.datasets.conversations import load_conversations, parse_conversation
from loadtest.engine.runner import RunConfig, Runner
from loadtest.errors import DatasetError
from loadtest.features.multiturn import MultiTurn
from loadtest.features.workload import plan_lines, prepare_workload
from loadtest.sim import InProcessSim
from tests.conftest import FAST_SIM, make_scenario, read_jsonl

CONVS: list[dict[str, Any]] = [
    {
        "id": f"c{i}",
        "conversations": [
            {"from": "human", "value": f"question one of {i} " * (i + 3)},
            {"from": "gpt", "value": f"recorded answer one {i} " * 5},
            {"from": "human", "value": f"follow-up two {i} " * 4},
            {"from": "gpt", "value": "recorded answer two " * (i + 2)},
            {"from": "human", "value": f"last question three {i}"},
            {"from": "gpt", "value": "bye"},
        ],
    }
    for i in range(3)
]


def conv_file(tmp: Path) -> Path:
    path = tmp / "convs.jsonl"
    path.write_bytes(b"".join(orjson.dumps(c) + b"\n" for c in CONVS))
    return path


def scenario(tmp: Path, **keys: object) -> Scenario:
    src = {"kind": "conversations", "path": str(conv_file(tmp)), **keys}
    return make_scenario({"mode": "closed", "concurrency": 2, "requests": 6}, sources=[src])


async def run(sc: Scenario, run_dir: Path) -> MultiTurn:
    wl = prepare_workload(sc, "sim-llm", None)
    assert wl is not None
    assert isinstance(wl.unit, MultiTurn)
    async with InProcessSim(FAST_SIM) as sim:
        cfg = RunConfig(scenario=sc, endpoint=sim.url, model="sim-llm", run_dir=run_dir)
        outcome = await Runner(cfg, None, hooks=list(wl.hooks), unit=wl.unit).run()
    finish_run(cfg, outcome, dict(wl.counts), {}, 0, show=False)  # multiturn.json with it
    return wl.unit


def test_both_formats_parse_and_bad_lines_are_named(tmp_path: Path) -> None:
    chat = {
        "messages": [
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": "a"},
            {"role": "assistant", "content": "b"},
            {"role": "user", "content": "c"},
        ]
    }
    conv = parse_conversation(chat, "x")
    assert conv is not None
    assert (conv.users, conv.answers) == (("a",), ("b",))  # an unanswered last turn is dropped
    assert parse_conversation(CONVS[0], "x").turns == 3  # type: ignore[union-attr]
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(orjson.dumps(CONVS[0]) + b"\n" + b'{"messages": 3}\n')
    with pytest.raises(DatasetError, match=r"bad\.jsonl:2: expected"):
        load_conversations(bad, None, 0)
    assert len(load_conversations(conv_file(tmp_path), 2, 0)) == 2


async def test_each_turn_carries_the_whole_recorded_history(tmp_path: Path) -> None:
    sc = scenario(tmp_path, answers="recorded")
    unit = await run(sc, tmp_path)
    lines = read_jsonl(tmp_path / "requests.jsonl")
    assert len(lines) == 18  # 6 conversations of 3 turns
    by_id = {c["id"]: c["conversations"] for c in CONVS}
    for x in lines:
        assert x["outcome"] == "ok"
        turns = by_id[x["conversation"]][: 2 * x["turn"] - 1]
        chars = sum(len(t["value"]) for t in turns)
        # The simulator counts the characters of every message sent (four a token, a
        # shorter last run one more, as its /tokenize): a lost turn shows.
        assert x["prompt_tokens"] == -(-chars // 4), x
    assert [r.turn for r in unit.table()] == [1, 2, 3]
    assert all(r.requests == 6 for r in unit.table())
    block = orjson.loads((tmp_path / "multiturn.json").read_bytes())
    assert block["conversations_completed"] == 6
    assert block["conversations_failed"] == 0
    assert [r["turn"] for r in block["ttft_by_turn"]] == [1, 2, 3]


async def test_the_server_answers_go_into_the_history(tmp_path: Path) -> None:
    sc = scenario(tmp_path, think_time_ms=20.0, max_turns=2)
    await run(sc, tmp_path)
    lines = read_jsonl(tmp_path / "requests.jsonl")
    assert {x["turn"] for x in lines} == {1, 2}
    by_unit: dict[int, dict[int, Any]] = {}
    for x in lines:
        by_unit.setdefault(x["unit"], {})[x["turn"]] = x
    users = {c["id"]: [t["value"] for t in c["conversations"][::2]] for c in CONVS}
    for turns in by_unit.values():
        one, two = turns[1], turns[2]
        u = users[one["conversation"]]
        # Turn 2 = user 1 + the server's answer (its words, 4+ chars a token) + user 2.
        answer_chars = 4 * two["prompt_tokens"] - len(u[0]) - len(u[1])
        assert answer_chars >= 2 * one["output_tokens"] > 0
        # The next turn is meant for the answer's end plus the think time.
        assert two["intended_ms"] >= one["end_ms"] + 20.0 - 0.5


def test_the_plan_names_turns_and_answers(tmp_path: Path) -> None:
    line = plan_lines(scenario(tmp_path, max_turns=2, think_time_ms=500.0))[0]
    assert "3 from" in line and "turns 2..2" in line and "think 500 ms" in line
    sc = scenario(tmp_path)
    with pytest.raises(DatasetError, match="only source"):
        prepare_workload(replace(sc, sources=sc.sources * 2), "m", None)
