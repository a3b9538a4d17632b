"""The figures of ``bench_llama_overhead``: one sample per request, the tables by client."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

__all__ = ["CLIENTS", "LABELS", "PARTS", "Sample", "report"]

CLIENTS = ("a", "b", "c", "d")
LABELS = {
    "a": "loadtest (Client, its body, pooled)",
    "b": "probe, minimal body, fresh conn",
    "c": "probe, loadtest body, fresh conn",
    "d": "probe, loadtest body, kept alive",
}


@dataclass(frozen=True, slots=True)
class Sample:
    """One timed request."""

    client: str
    prompt: int
    ttft_ms: float
    head_ms: float
    prompt_ms: float
    prompt_n: int
    cache_n: int
    reused: bool
    """Whether the request went on a connection that had served one before."""
    write_ms: float
    """Send start to the request handed to the kernel (a connect included)."""

    @property
    def overhead_ms(self) -> float:
        return self.ttft_ms - self.prompt_ms


PARTS: dict[str, Callable[[Sample], float]] = {
    "overhead": lambda s: s.overhead_ms,
    "send": lambda s: s.write_ms,
    "to_launch": lambda s: s.head_ms - s.write_ms,
    "after_launch": lambda s: s.ttft_ms - s.head_ms - s.prompt_ms,
    "prompt_ms": lambda s: s.prompt_ms,
}
"""What each figure is: TTFT - prompt_ms (overhead) = send (start to request written)
+ to_launch (written to the headers' arrival: the server parsing and launching the task)
+ after_launch (headers to first token, less the prefill)."""


def _paired(rows: list[Sample], base: list[Sample], part: str) -> tuple[float, float, float]:
    """Median of ``part`` minus b's on the same prompt and round, with a bootstrap 95% CI."""
    fig = PARTS[part]
    ref = {(s.prompt, n): fig(s) for n, s in _numbered(base)}
    deltas = np.array([fig(s) - ref[(s.prompt, n)] for n, s in _numbered(rows)])
    rng = np.random.default_rng(0)
    boot = [np.median(rng.choice(deltas, len(deltas))) for _ in range(2000)]
    lo, hi = np.percentile(boot, [2.5, 97.5])
    return float(np.median(deltas)), float(lo), float(hi)


def report(samples: list[Sample]) -> dict[str, dict[str, float]]:
    """Print both tables; the figures by client (medians, p90s, paired deltas against b)."""
    by = {c: [s for s in samples if s.client == c] for c in CLIENTS}
    print(
        f"{'client':37} {'n':>3}  {'overhead p50':>12} {'p90':>6}  {'prompt_ms p50':>13} {'p90':>7}"
        f"  {'send':>5} {'to_launch':>9} {'after':>6}  {'cache_n':>7} {'prompt_n':>8} {'reused':>6}"
    )
    out: dict[str, dict[str, float]] = {}
    for c in CLIENTS:
        rows = by[c]
        med = {k: float(np.median([f(s) for s in rows])) for k, f in PARTS.items()}
        p90 = {k: float(np.percentile([PARTS[k](s) for s in rows], 90)) for k in PARTS}
        cache = max(s.cache_n for s in rows)
        pn = float(np.median([s.prompt_n for s in rows]))
        reused = sum(s.reused for s in rows)
        print(
            f"{c + '  ' + LABELS[c]:37} {len(rows):3}  {med['overhead']:12.2f}"
            f" {p90['overhead']:6.2f}"
            f"  {med['prompt_ms']:13.1f} {p90['prompt_ms']:7.1f}  {med['send']:5.2f}"
            f" {med['to_launch']:9.2f} {med['after_launch']:6.2f}  {'<=' + str(cache):>7}"
            f" {pn:8.0f} {reused:6}"
        )
        out[c] = {f"{k}_p50": v for k, v in med.items()}
        out[c].update({f"{k}_p90": v for k, v in p90.items()})
        out[c].update({"cache_n_max": cache, "prompt_n_p50": pn, "reused": reused, "n": len(rows)})
    print("paired against b (same prompt, same round): median difference [95% CI], ms")
    print(f"{'client':37} " + " ".join(f"{k:>21}" for k in PARTS))
    for c in CLIENTS[:1] + CLIENTS[2:]:
        cells = []
        for k in PARTS:
            m, lo, hi = _paired(by[c], by["b"], k)
            cells.append(f"{m:+6.2f} [{lo:+6.2f},{hi:+6.2f}]")
            out[c][f"{k}_minus_b_p50"] = m
        print(f"{c + '  ' + LABELS[c]:37} " + " ".join(cells))
    return out


def _numbered(rows: list[Sample]) -> list[tuple[int, Sample]]:
    """Each sample with how many times its client had sent that prompt before (its round)."""
    seen: dict[int, int] = {}
    out = []
    for s in rows:
        n = seen.get(s.prompt, 0)
        seen[s.prompt] = n + 1
        out.append((n, s))
    return out
