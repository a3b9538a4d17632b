"""llama.cpp's prefill, read off a run: what it costs, and how much of it a decode waits.

llama.cpp processes a prompt whole, in one step with the other slots' decode tokens, and
its ``timings.prompt_ms`` says how long that took (it ends at the first token):

- **the prefill's cost** is a line in a prompt's tokens, through the prefills of every
  run that overlapped no other and no other stream's decode (prompts batched together,
  or queued behind another, report times the line of one does not give; a decode's
  tokens in the step cost what the step line says), robust to the few a loaded machine
  slowed: the median of the pairwise slopes (Theil-Sen);
- **the stall**: where a prompt's prefill ran while another request was decoding, the
  gaps of that request across the prefill are longer than the fitted step of the
  streams beside it; what they hold beyond it, as a share of the prefill's
  ``prompt_ms``, is what a decoding stream waits out of another's prefill
  (``prefill_stall``; the median over all such pairs; ``_held`` says why that step).
  Without chunk stamps (``--record-chunks``) it falls back to the slope of each
  request's decode time on the prefills that began during it.
"""

from __future__ import annotations

import itertools
import statistics
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["Window", "prefill_line", "stall_share", "stalls"]

_SAME_STEP_MS = 15.0
"""First tokens this close came out of one prefill batch (a decode step of the llama.cpp
server it was set on is several times longer; docs/benchmarks.md)."""
_MIN_PREFILLS = 4
"""Fewer lone prefills than this cannot draw the prefill's line."""


@dataclass(frozen=True, slots=True)
class Window:
    """One request as the prefill sees it (ms from the run's start)."""

    first_ms: float
    end_ms: float
    prompt_ms: float
    """The engine's own prefill time (``timings.prompt_ms``)."""
    gaps: int
    tokens: int = 0
    """Its prompt's tokens, as the simulator counts them."""
    chunks_ms: tuple[float, ...] = ()
    """When each of its token chunks came (ms from the run's start; empty unless the
    run recorded them)."""

    @property
    def prefill_start_ms(self) -> float:
        return self.first_ms - self.prompt_ms


def stalls(run: tuple[Window, ...]) -> list[float]:
    """Per request: the other requests' prefill time that began during its decode."""
    return [
        sum(o.prompt_ms for o in run if o is not w and w.first_ms <= o.prefill_start_ms < w.end_ms)
        for w in run
    ]


def _decoding(run: tuple[Window, ...], other: Window) -> int:
    """The streams decoding when ``other``'s prefill began (it is not one of them)."""
    start = other.prefill_start_ms
    return max(1, sum(1 for w in run if w is not other and w.first_ms <= start < w.end_ms))


def _held(w: Window, other: Window, step_ms: float) -> float | None:
    """The share of ``other``'s prefill that ``w``'s decode waited out, read off ``w``'s
    chunk stamps (None unless the prefill began and ended inside ``w``'s decode).

    The twin holds one gap of a decoding stream by the stall, and the stream steps on
    at the pace of the streams beside the prefill (``step_ms``) until it is over;
    llama.cpp's decoded a few fast steps beside the starting slot, then waited. Either
    way, its gaps from the prefill's start to its first token, less that step for each,
    are what it waited: the twin's stream then has as many tokens at the prefill's end
    as llama.cpp's had. Not less ``w``'s median gap: beside a prefilling slot fewer
    streams decode, and llama.cpp's 1-slot step was a quarter of its 2-slot one here,
    so the median would count the fast steps as a negative stall."""
    chunks = w.chunks_ms
    if len(chunks) < 4 or other.prompt_ms <= 0:
        return None
    start, end = other.prefill_start_ms, other.first_ms
    if not chunks[0] + _SAME_STEP_MS < start or not end < chunks[-1]:
        return None
    gaps = [b - a for a, b in itertools.pairwise(chunks)]
    # The gaps that end after the prefill began and start before its first token.
    held = [g for g, a, b in zip(gaps, chunks, chunks[1:], strict=False) if b > start and a < end]
    return sum(g - step_ms for g in held) / other.prompt_ms if held else None


def _isolated(run: tuple[Window, ...], alone: bool) -> list[tuple[float, float]]:
    """(tokens, prompt_ms) of the prefills that overlapped no other prefill (batched or
    queued ones share their time in ways ``prompt_ms`` does not say), and with
    ``alone`` no other stream's decode either: the decode tokens in a prefill's step
    cost what the step line says they do, and the twin adds that itself."""

    def overlaps(w: Window, o: Window) -> bool:
        if o.prefill_start_ms < w.first_ms and w.prefill_start_ms < o.first_ms:
            return True  # their prefills overlapped
        return alone and o.first_ms < w.first_ms and w.prefill_start_ms < o.end_ms

    return [
        (float(w.tokens), w.prompt_ms)
        for w in run
        if not any(o is not w and overlaps(w, o) for o in run)
    ]


def stall_share(runs: list[tuple[Window, ...]], step_ms: Callable[[int], float]) -> float | None:
    """The share of an overlapping prefill a decode waits out, 0 to 1 (None: no run
    with prefills overlapping a decode, so nothing to read it from). ``step_ms(d)``: the
    fitted step with ``d`` streams decoding."""
    direct = [
        s
        for run in runs
        for w in run
        for o in run
        if o is not w and (s := _held(w, o, step_ms(_decoding(run, o)))) is not None
    ]
    if direct:
        return min(1.0, max(0.0, statistics.median(direct)))
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


def prefill_line(runs: list[tuple[Window, ...]]) -> tuple[float, float] | None:
    """The prefill's intercept and cost per token (ms), from every run's prefills that
    overlapped nothing else (no other prefill, no other stream's decode), else, with too
    few of those, no other prefill (None: too few of them, or prompts all alike)."""
    points = [p for run in runs for p in _isolated(run, alone=True)]
    if len(points) < _MIN_PREFILLS:
        points = [p for run in runs for p in _isolated(run, alone=False)]
    slopes = [
        (y2 - y1) / (x2 - x1)
        for i, (x1, y1) in enumerate(points)
        for x2, y2 in points[i + 1 :]
        if x2 != x1
    ]
    if len(points) < _MIN_PREFILLS or not slopes:
        return None
    slope = max(0.0, statistics.median(slopes))
    return max(0.0, statistics.median(y - slope * x for x, y in points)), slope
