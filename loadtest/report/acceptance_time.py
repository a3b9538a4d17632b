"""Speculative acceptance by draft position and over the run, and a collapse flagged.

**By position**: P(the draft token at position k is accepted). vLLM counts it
(``spec_decode_num_accepted_tokens_per_pos``, read by the scraper into the server
block); where the server does not, it is derived from the distribution of tokens per
verify step that loadtest sees on the stream: a step carries its own token plus the
accepted prefix of the draft, so position k was accepted exactly when the step carried
k + 1 tokens or more, and P(accepted at k) = P(step >= k + 1). The distribution comes
from each request's ``step_tokens`` (chunks per step, the prefill's first token left
out), taken only from requests streamed one chunk a token (llama.cpp; the simulator's
``step_chunks = "burst"``): where a chunk carries a whole step (vLLM, SGLang) the sizes
of single steps are not on the stream, and only the server's counters can tell.

**Over time**: tokens per verify step, (output tokens - 1) / (steps - 1) pooled over
the requests that ended in each of ten equal intervals of a run: this mean is on the
stream however the engine chunks a step.

**A collapse**: speculation that paid at the start of a run (at least ``PAYING``
accepted tokens a step, the median of the first third of intervals) and then, in a
later interval, keeps less than ``KEPT`` of that gain, so it is back to about 1.0
token a step: the failure nobody notices because answers stay right.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from loadtest.model.decision import AcceptanceInterval, RunAcceptance, SideAcceptance

__all__ = [
    "INTERVALS",
    "PLAIN_STEPS",
    "StepRecords",
    "collapse",
    "derived_positions",
    "positions_said",
    "run_acceptance",
    "side_acceptance",
]

INTERVALS = 10
MIN_STEPS = 20
"""An interval with fewer verify steps is shown but not judged."""
PAYING = 0.2
"""Accepted tokens a step at the start of a run for speculation to count as paying."""
KEPT = 0.25
"""A later interval keeping less than this share of the early gain is a collapse."""


@dataclass(slots=True)
class StepRecords:
    """The verify steps of one run's measured ok requests, as ``load_run`` reads them."""

    ends_ms: list[float] = field(default_factory=list)
    tokens: list[int] = field(default_factory=list)
    steps: list[int] = field(default_factory=list)
    """Per request: when it ended, and the tokens and steps after its first token."""
    tallies: list[tuple[int, ...]] = field(default_factory=list)
    """``step_tokens`` of the requests streamed one chunk a token."""
    start_ms: float = math.inf

    def add(self, row: Mapping[str, object]) -> None:
        """One row of ``requests.jsonl`` (measured, ok)."""
        sent, end, tally = row.get("sent_ms"), row.get("end_ms"), row.get("step_tokens")
        out, steps, chunks = (
            row.get("output_tokens"),
            row.get("token_steps"),
            row.get("token_chunks"),
        )
        if isinstance(sent, int | float):
            self.start_ms = min(self.start_ms, float(sent))
        if not isinstance(end, int | float) or not isinstance(out, int):
            return
        if isinstance(steps, int) and steps > 1:
            self.ends_ms.append(float(end))
            self.tokens.append(out - 1)
            self.steps.append(steps - 1)
        if isinstance(tally, list) and tally and chunks == out:
            self.tallies.append(tuple(int(n) for n in tally))


def _pool(tallies: Sequence[tuple[int, ...]]) -> list[int]:
    out: list[int] = []
    for t in tallies:
        out += [0] * (len(t) - len(out))
        for i, n in enumerate(t):
            out[i] += n
    return out


def derived_positions(tallies: Sequence[tuple[int, ...]], positions: int | None) -> list[float]:
    """P(step >= k + 1) for k = 1 .. ``positions`` (default: the longest step seen - 1,
    at least 1: a draft that never got a token accepted shows 0.0 at position 1)."""
    pooled = _pool(tallies)
    steps = sum(pooled)
    if not steps:
        return []
    n = positions if positions is not None else max(len(pooled) - 1, 1)
    return [round(sum(pooled[k:]) / steps, 4) for k in range(1, n + 1)]


def collapse(intervals: Sequence[AcceptanceInterval]) -> str | None:
    """The collapse of a run's acceptance, in words, or None (see the module)."""
    usable = [i for i in intervals if i["steps"] >= MIN_STEPS and i["tokens_per_step"] is not None]
    if len(usable) < 4:
        return None
    head = usable[: math.ceil(len(usable) / 3)]
    early = statistics.median(i["tokens_per_step"] or 0.0 for i in head)
    if early - 1 < PAYING:
        return None
    for i in usable[len(head) :]:
        tps = i["tokens_per_step"] or 0.0
        if tps - 1 < KEPT * (early - 1):
            return (
                f"acceptance collapsed at {i['start_s']:.1f}-{i['end_s']:.1f} s: "
                f"{early:.2f} -> {tps:.2f} tokens a verify step"
            )
    return None


def run_acceptance(folder: str, records: StepRecords) -> RunAcceptance:
    """Tokens per verify step in ``INTERVALS`` equal intervals of the run, and its collapse."""
    intervals: list[AcceptanceInterval] = []
    if records.ends_ms:
        start = min(records.start_ms, min(records.ends_ms))
        span = max(max(records.ends_ms) - start, 1e-3)
        tokens, steps = [0] * INTERVALS, [0] * INTERVALS
        for end, n, s in zip(records.ends_ms, records.tokens, records.steps, strict=True):
            b = min(int((end - start) / span * INTERVALS), INTERVALS - 1)
            tokens[b] += n
            steps[b] += s
        for b in range(INTERVALS):
            tps = tokens[b] / steps[b] if steps[b] else None
            intervals.append(
                {
                    "start_s": round((b * span / INTERVALS) / 1000, 3),
                    "end_s": round(((b + 1) * span / INTERVALS) / 1000, 3),
                    "steps": steps[b],
                    "tokens_per_step": None if tps is None else round(tps, 4),
                }
            )
    return {"folder": folder, "intervals": intervals, "collapse": collapse(intervals)}


PLAIN_STEPS = 1.1
"""Tokens a verify step below which the stream alone cannot tell a draft: the simulator
without speculation reads a little above 1 (two one-token chunks read together count as
one step; docs/benchmarks.md), so a derived acceptance of 0.01-0.03 by position was
printed for sides that draft nothing."""


def side_acceptance(
    load: float,
    draft_max: int | None,
    runs: Sequence[tuple[str, StepRecords, Sequence[float] | None]],
    drafts: bool | None = None,
) -> SideAcceptance:
    """One side at one load: by position (the server's where it counts them, else
    derived), tokens per step, and each run over time. ``runs``: (folder, its steps,
    the server's ``accepted_per_position`` or None); ``drafts``: whether the side is
    known to speculate (a known draft's near-zero acceptance is a finding, shown; a
    side that may draft nothing is not given one below ``PLAIN_STEPS``)."""
    served = [list(p) for _, _, p in runs if p]
    tallies = [t for _, r, _ in runs for t in r.tallies]
    n, s = sum(sum(r.tokens) for _, r, _ in runs), sum(sum(r.steps) for _, r, _ in runs)
    tps = n / s if s else None
    if served and len({len(p) for p in served}) == 1:
        per = [round(statistics.fmean(col), 4) for col in zip(*served, strict=True)]
        source = "server's counts: accepted at each position over drafts"
    elif drafts is False:
        per, source = [], "the side does not speculate"
    elif tallies and tps is not None and tps < PLAIN_STEPS and not drafts:
        per = []
        source = (
            f"{tps:.2f} tokens a verify step: a plain engine's chunks read together give "
            f"up to ~1.07, so a draft cannot be told below {PLAIN_STEPS}"
        )
    elif tallies:
        per = derived_positions(tallies, draft_max)
        source = "derived from the stream's tokens per verify step: P(step >= k + 1)"
    else:
        per, source = [], "no streamed verify steps"
    each = [run_acceptance(folder, r) for folder, r, _ in runs]
    return {
        "load": load,
        "draft_max": draft_max,
        "per_position": per,
        "position_source": source,
        "tokens_per_step": None if tps is None else round(tps, 4),
        "runs": each,
        "collapsed": any(r["collapse"] for r in each),
    }


def positions_said(a: SideAcceptance) -> str:
    """``0.71 0.52 0.38 (server's counts: ...)``, or ``not measured (why)``: one phrase
    for both renderings, which printed "not measured (not measured (...))" once, and
    "(from server (accepted per position over drafts))": a source reads as it is."""
    if not a["per_position"]:
        return f"not measured ({a['position_source']})"
    per = " ".join(f"{p:.2f}" for p in a["per_position"][:8])
    return f"{per} ({a['position_source']})"
