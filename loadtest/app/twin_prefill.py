"""How much of another prompt's prefill a decoding stream waits out, read off a run.

llama.cpp processes a prompt whole, in one step with the other slots' decode tokens, so
in principle every decoding stream waits the whole prefill (``prefill_stall`` 1). What a
sweep shows can be less: streams that start and end together prefill together, outside
each other's decode. llama.cpp's ``timings.prompt_ms`` says when each prefill ran (it
ends at the first token), so each request's decode can be set against the prefills that
began during it: the slope of decode time on that overlap, within each run (so that a
run on a slower machine does not make one), is the share the twin reproduces.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

__all__ = ["Window", "stall_share", "stalls", "tpot_without_stalls"]


@dataclass(frozen=True, slots=True)
class Window:
    """One request as the prefill stalls see it (ms from the run's start)."""

    first_ms: float
    end_ms: float
    prompt_ms: float
    """The engine's own prefill time (``timings.prompt_ms``)."""
    gaps: int

    @property
    def prefill_start_ms(self) -> float:
        return self.first_ms - self.prompt_ms


def stalls(run: tuple[Window, ...]) -> list[float]:
    """Per request: the other requests' prefill time that began during its decode."""
    return [
        sum(o.prompt_ms for o in run if o is not w and w.first_ms <= o.prefill_start_ms < w.end_ms)
        for w in run
    ]


def stall_share(runs: list[tuple[Window, ...]]) -> float | None:
    """The share of an overlapping prefill a decode waits out, 0 to 1 (None: no run
    with prefills overlapping a decode, so nothing to read it from)."""
    xy = xx = 0.0
    for run in runs:
        held = stalls(run)
        if len(run) < 3 or not any(held):
            continue
        decode = [w.end_ms - w.first_ms for w in run]
        mx, my = statistics.mean(held), statistics.mean(decode)
        xy += sum((x - mx) * (y - my) for x, y in zip(held, decode, strict=True))
        xx += sum((x - mx) ** 2 for x in held)
    if xx <= 0:
        return None
    return min(1.0, max(0.0, xy / xx))


def tpot_without_stalls(run: tuple[Window, ...], share: float) -> float:
    """The run's median TPOT with ``share`` of each overlapping prefill taken off."""
    held = stalls(run)
    return statistics.median(
        max(0.0, (w.end_ms - w.first_ms - share * h)) / max(1, w.gaps)
        for w, h in zip(run, held, strict=True)
    )
