"""Multi-turn chat as a unit of load: one conversation replayed turn by turn.

Each turn sends the whole history so far; the history carries the server's own answer
(``answers = "server"``) or the recorded one (``"recorded"``: every run sends the same
bytes). Between an answer and the next turn the user thinks ``think_time_ms``; the next
turn's intended time is the answer's end plus that, so its lag is its own.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import cast

from loadtest.config.scenario import Scenario, SourceSpec
from loadtest.config.workload_tables import ConversationKeys
from loadtest.datasets.conversations import Conversation
from loadtest.engine.blocks import BlockBase
from loadtest.engine.hooks import HookResult, RunContext, RunHook
from loadtest.engine.request_unit import raise_if_cancelling
from loadtest.measure.hdr import percentile
from loadtest.measure.recorders import Metrics
from loadtest.model.json import JsonObject
from loadtest.model.prompt import Prompt
from loadtest.protocol.openai import build_payload

__all__ = ["MULTITURN", "MultiTurn", "TurnRow", "multiturn_block"]

_perf = time.perf_counter_ns


@dataclass(frozen=True, slots=True)
class TurnRow:
    """TTFT of one turn number across conversations (ms, measured requests only)."""

    turn: int
    requests: int
    ttft_p50_ms: float
    ttft_p90_ms: float
    ttft_max_ms: float
    prompt_tokens_mean: float | None


def _q(values: list[float], q: float) -> float:
    p = percentile(values, q * 100)
    assert p is not None  # callers pass only non-empty lists
    return p


class MultiTurn(RunHook):
    """Replays conversations: unit ``i`` is conversation ``i`` (mod their number)."""

    def __init__(
        self, scenario: Scenario, model: str, convs: list[Conversation], spec: SourceSpec
    ) -> None:
        self._scenario = scenario
        self._model = model
        self._convs = convs
        self._spec = spec
        self._requests = 0
        self._ttft: dict[int, list[float]] = {}
        self._prompt_tokens: dict[int, list[int]] = {}
        self._done_ms: list[float] = []
        self.completed = 0
        self.failed = 0

    async def run_unit(self, ctx: RunContext, index: int, intended_ns: int) -> float | None:
        """Run conversation ``index``; returns a Retry-After if a turn was told one."""
        conv = self._convs[index % len(self._convs)]
        w = self._spec.own(ConversationKeys)
        turns = conv.turns if w.max_turns is None else min(conv.turns, w.max_turns)
        warmup = ctx.warming_up_at(intended_ns)
        messages: list[JsonObject] = []
        at = intended_ns
        for k in range(turns):
            messages.append({"role": "user", "content": conv.users[k]})
            prompt = Prompt(
                id=f"{conv.id}#{k + 1}",
                source="conversations",
                category=self._spec.category,
                messages=tuple(messages),
            )
            self._requests += 1
            rec, reader = await ctx.client.exchange(
                index=self._requests - 1,
                prompt=prompt,
                body=self._body(messages),
                intended_ns=at,
                warmup=warmup,
            )
            ctx.account(rec, prompt, {"turn": k + 1, "conversation": conv.id, "unit": index})
            if rec.outcome != "ok":
                self.failed += 1
                if rec.outcome == "cancelled":
                    raise_if_cancelling()
                return rec.retry_after_s
            if not warmup and rec.first_token_ns is not None:
                self._ttft.setdefault(k + 1, []).append((rec.first_token_ns - rec.sent_ns) / 1e6)
                if rec.prompt_tokens is not None:
                    self._prompt_tokens.setdefault(k + 1, []).append(rec.prompt_tokens)
            answer = reader.text if w.answers == "server" else conv.answers[k]
            messages.append({"role": "assistant", "content": answer or ""})
            at = _perf()
            if w.think_time_ms > 0 and k + 1 < turns:
                at += int(w.think_time_ms * 1e6)
                await asyncio.sleep(w.think_time_ms / 1e3)
        self.completed += 1
        if not warmup:
            self._done_ms.append((_perf() - intended_ns) / 1e6)
        return None

    def _body(self, messages: list[JsonObject]) -> bytes:
        sc = self._scenario
        return build_payload(
            api=sc.api,
            model=self._model,
            messages=messages,
            text=None,
            stream=sc.stream,
            max_tokens=self._spec.max_tokens or sc.max_tokens,
            sampling=sc.sampling,
            tools=None,
        )

    def state(self) -> JsonObject:
        """The measured values behind ``multiturn.json``: a worker's part, for the merge
        (percentiles of parts do not add; their values do)."""
        return {
            "ttft": {str(k): v for k, v in self._ttft.items()},
            "prompt_tokens": {str(k): v for k, v in self._prompt_tokens.items()},
            "done_ms": self._done_ms,
            "completed": self.completed,
            "failed": self.failed,
        }

    def table(self) -> list[TurnRow]:
        """TTFT by turn number."""
        return turn_table(self._ttft, self._prompt_tokens)

    def result(self, run_dir: Path) -> HookResult:
        """This process's part of the ``multiturn`` block: its measured values
        (``state``), from which the block builds ``multiturn.json`` over every worker."""
        return HookResult(blocks={"multiturn": self.state()})


def turn_table(ttft: dict[int, list[float]], prompt_tokens: dict[int, list[int]]) -> list[TurnRow]:
    """TTFT by turn number, from every measured value."""
    rows = []
    for turn in sorted(ttft):
        v = sorted(ttft[turn])
        pt = prompt_tokens.get(turn)
        rows.append(
            TurnRow(
                turn=turn,
                requests=len(v),
                ttft_p50_ms=round(_q(v, 0.5), 3),
                ttft_p90_ms=round(_q(v, 0.9), 3),
                ttft_max_ms=round(v[-1], 3),
                prompt_tokens_mean=round(sum(pt) / len(pt), 1) if pt else None,
            )
        )
    return rows


def multiturn_block(states: Sequence[JsonObject]) -> JsonObject:
    """``multiturn.json`` from one or more ``MultiTurn.state()`` (a run's workers): their
    values together, not a mean of their percentiles."""
    ttft: dict[int, list[float]] = {}
    tokens: dict[int, list[int]] = {}
    done: list[float] = []
    completed = failed = 0
    for st in states:
        for k, v in cast(dict[str, list[float]], st["ttft"]).items():
            ttft.setdefault(int(k), []).extend(v)
        for k, n in cast(dict[str, list[int]], st["prompt_tokens"]).items():
            tokens.setdefault(int(k), []).extend(n)
        done.extend(cast(list[float], st["done_ms"]))
        completed += cast(int, st["completed"])
        failed += cast(int, st["failed"])
    done.sort()
    return {
        "conversations_completed": completed,
        "conversations_failed": failed,
        "conversation_ms_p50": round(_q(done, 0.5), 3) if done else None,
        "conversation_ms_p90": round(_q(done, 0.9), 3) if done else None,
        "ttft_by_turn": [
            {k: getattr(r, k) for k in TurnRow.__dataclass_fields__}
            for r in turn_table(ttft, tokens)
        ],
    }


class _MultiTurnBlock(BlockBase):
    """``multiturn.json``: TTFT by turn and conversation times, from every process's
    measured values together (percentiles of parts do not add; their values do)."""

    model = JsonObject
    in_summary = False

    def merge(self, parts: Sequence[JsonObject], metrics: Metrics) -> JsonObject:
        return multiturn_block(parts)


MULTITURN = _MultiTurnBlock()
