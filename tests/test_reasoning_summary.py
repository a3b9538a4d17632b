"""The reasoning block of a summary: added up per process, merged exactly over workers,
and the simulator's reasoning settings checked where a scenario names them (#47)."""

from __future__ import annotations

import orjson
import pytest

from loadtest.errors import ScenarioError
from loadtest.measure.merge import encode_metrics, merge_metrics
from loadtest.measure.recorders import Metrics
from loadtest.model.reasoning import ReasoningSplit
from loadtest.model.record import RequestRecord
from tests.conftest import make_scenario

MS = 1_000_000


def _record(i: int, reasoning: ReasoningSplit | None) -> RequestRecord:
    first = 100 * MS + i * MS
    return RequestRecord(
        index=i,
        prompt_id=f"p{i}",
        source="inline",
        category="chat",
        warmup=False,
        intended_ns=0,
        sent_ns=0,
        end_ns=first + 80 * MS,
        outcome="ok",
        first_token_ns=first,
        last_token_ns=first + 80 * MS,
        token_chunk_ns=(first, first + 80 * MS),
        output_tokens=40,
        reasoning=reasoning,
    )


def _split(i: int, tokens: int = 10, disagree: bool = False) -> ReasoningSplit:
    first = 100 * MS + i * MS
    return ReasoningSplit(
        way="field" if i % 2 else "think-tags",
        first_ns=first,
        last_ns=first + 29 * MS,
        chunks=tokens,
        answer_ns=first + 30 * MS,
        answer_chunks=30,
        tokens=tokens,
        counted=tokens,
        reported=None,
        disagree=disagree,
    )


def _metrics(records: list[RequestRecord]) -> Metrics:
    m = Metrics(closed_loop=False, t0_ns=0)
    for rec in records:
        m.add(rec)
    m.roll(1.0)
    return m


def test_the_block_adds_up_and_merges_over_workers_exactly() -> None:
    records = [_record(i, _split(i, 10 + i, disagree=i == 3) if i < 6 else None) for i in range(8)]
    whole = _metrics(records)
    parts = [encode_metrics(_metrics(records[:3])), encode_metrics(_metrics(records[3:]))]
    # Across a process boundary, as a worker's part goes.
    parts = [orjson.loads(orjson.dumps(p)) for p in parts]
    merged = merge_metrics(parts, closed_loop=False, t0_ns=0)
    block = whole.reasoning.summary()
    assert block is not None and merged.reasoning.summary() == block
    assert (block["requests"], block["with_reasoning"], block["share"]) == (8, 6, 0.75)
    assert block["splits"] == {"field": 3, "think-tags": 3, "none": 2}
    assert block["tokens"] == sum(10 + i for i in range(6))
    assert block["answer_tokens"] == 6 * 40 - block["tokens"]
    assert block["tokens_disagree"] == 1
    assert block["reasoning_ms"].get("mean") == 30.0  # first reasoning to first answer
    assert block["answer_ms"].get("mean") == 50.0
    # TTFA is TTFT where nothing reasoned, 30 ms later where it did.
    ttfa, ttft = whole.total.hists["ttfa_ms"], whole.total.hists["ttft_ms"]
    assert ttfa.get_total_count() == ttft.get_total_count() == 8
    assert whole.total.sums["ttfa_ms"] - whole.total.sums["ttft_ms"] == 6 * 30_000


def test_a_run_where_nothing_reasoned_has_no_block() -> None:
    assert _metrics([_record(i, None) for i in range(3)]).reasoning.summary() is None


def test_a_line_carries_the_split_back() -> None:
    rec = _record(1, _split(1))
    back = RequestRecord.from_json(orjson.loads(orjson.dumps(rec.to_json(0))))
    assert back.reasoning == rec.reasoning and back.ttfa_ns == rec.ttfa_ns


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("reasoning_format", "deepseek", "reasoning_format"),
        ("reasoning_usage", "maybe", "reasoning_usage"),
        ("accept_reasoning", 1.5, "accept_reasoning"),
        ("reasoning_tokens", -1, "reasoning_tokens"),
    ],
)
def test_a_scenarios_reasoning_settings_are_checked(key: str, value: object, message: str) -> None:
    with pytest.raises(ScenarioError, match=message):
        make_scenario({"mode": "closed", "concurrency": 1, "requests": 1}, sim={key: value})
