"""What must be said before a comparison's verdicts: did it measure anything, alike?

A comparison that measured nothing must not pass quietly: a side without completed
requests, or with fewer than ``MIN_SAMPLES`` values of a metric the other side has, is a
*blocking* finding (the command exits non-zero). Where the drain at the end of a run
cancelled most requests, the load was beyond the endpoint, and the finding says so.
Sides that ran different load shapes (closed 32 against open 50 req/s), or whose prompt
caches served different shares of the prompts, differ in more than the deployment: their
verdicts are marked *confounded* (kept, so the figures stay readable, but not attributed
to the deployment) and the command exits non-zero.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from loadtest.measure.stats import MIN_SAMPLES
from loadtest.model.comparison import FindingJson
from loadtest.model.summary import Summary
from loadtest.report.evidence import beyond_endpoint

__all__ = [
    "CONFOUNDING",
    "CacheUse",
    "Finding",
    "LoadShape",
    "SideCounts",
    "findings",
    "load_shape",
]

FindingKind = Literal[
    "no completed requests",
    "too few samples",
    "beyond the endpoint",
    "load shapes differ",
    "prompt caches differ",
    "rebuilt summaries",
]

CONFOUNDING: tuple[FindingKind, ...] = ("load shapes differ", "prompt caches differ")
"""The findings that mark the verdicts confounded: the sides differ in more than the
deployment."""

CACHE_SHARE_TOLERANCE = 0.1
"""Sides whose prompt-cache hit shares differ by more than this are flagged."""


@dataclass(frozen=True, slots=True)
class Finding:
    """One thing a reader must know before the verdicts."""

    kind: FindingKind
    message: str
    blocking: bool
    """True: no verdict of the comparison stands (nothing, or too little, was measured)."""

    @property
    def confounds(self) -> bool:
        """True when the sides differ in more than the deployment."""
        return self.kind in CONFOUNDING

    def to_json(self) -> FindingJson:
        """A JSON-ready dict."""
        return {"kind": self.kind, "message": self.message, "blocking": self.blocking}


@dataclass(frozen=True, slots=True)
class LoadShape:
    """How the load was offered: what must be equal for latencies to be comparable."""

    mode: str
    concurrency: int | None
    rate: float | None
    params: tuple[tuple[str, float | int | str | bool], ...] = ()
    """The arrival process's own keys (``burstiness``, a plugin's), sorted."""

    def __str__(self) -> str:
        if self.mode == "closed":
            return f"closed loop, concurrency {self.concurrency}"
        if self.rate is None:  # a summary rebuilt without run.json: mode "unknown"
            return f"{self.mode} load"
        own = "".join(
            f", {k} {v:g}" if isinstance(v, float) else f", {k} {v}" for k, v in self.params
        )
        return f"{self.mode} arrivals at {self.rate:g} req/s{own}"


@dataclass(frozen=True, slots=True)
class CacheUse:
    """Prompt tokens the engine served from its cache: llama.cpp's ``timings.cache_n``
    per answer, or vLLM's prefix-cache counters over the measured window."""

    cached: int = 0
    computed: int = 0
    """Prompt tokens evaluated anew (``timings.prompt_n``; vLLM: queries - hits)."""
    source: str = "timings"
    """``timings`` (llama.cpp) or ``prefix-cache counters`` (vLLM's /metrics)."""

    @staticmethod
    def pooled(uses: Iterable[CacheUse]) -> CacheUse:
        """The sums over several runs (the first run's source names them)."""
        got = list(uses)
        return CacheUse(
            sum(u.cached for u in got),
            sum(u.computed for u in got),
            got[0].source if got else "timings",
        )

    @property
    def share(self) -> float | None:
        """Cached share of all prompt tokens (None: the engine said nothing)."""
        total = self.cached + self.computed
        return self.cached / total if total else None


@dataclass(frozen=True, slots=True)
class SideCounts:
    """Per side: measured requests and how they ended, values per metric, cache use."""

    name: str
    sent: int
    ok: int
    drained: int
    """Measured requests cancelled by the end-of-run drain (not by a fault)."""
    values: dict[str, int]
    shapes: tuple[LoadShape, ...]
    cache: CacheUse
    rebuilt: int = 0
    """Runs killed before they wrote a summary, theirs rebuilt from requests.jsonl."""


def _sources(a: CacheUse, b: CacheUse) -> str:
    names = {"timings": "llama.cpp's timings", "prefix-cache counters": "vLLM's counters"}
    return " and ".join(dict.fromkeys(names.get(c.source, c.source) for c in (a, b)))


def load_shape(summary: Summary) -> LoadShape:
    """The load shape of one run's summary."""
    load = summary["run"]["load"]
    mode = load["mode"]
    # Summaries written before arrival processes were plugins name only burstiness.
    params = load.get("arrival")
    if params is None:
        params = {"burstiness": load["burstiness"]} if load["burstiness"] is not None else {}
    return LoadShape(
        mode,
        load["concurrency"] if mode == "closed" else None,
        load["rate"] if mode != "closed" else None,
        tuple(sorted(params.items())),
    )


def findings(a: SideCounts, b: SideCounts, metrics: Sequence[str]) -> list[Finding]:
    """Everything to say before the verdicts, blocking findings first."""
    out: list[Finding] = []
    for side in (a, b):
        if side.ok == 0:
            out.append(
                Finding(
                    "no completed requests",
                    f"{side.name} completed no measured request ({side.sent} sent): "
                    "nothing to compare",
                    True,
                )
            )
        if beyond_endpoint(side.drained, side.sent):
            # What completed is the fast part of a censored sample: no verdict stands on it.
            out.append(
                Finding(
                    "beyond the endpoint",
                    f"{side.name}: {side.drained} of {side.sent} measured requests were "
                    "cancelled by the drain at the end of the run: the load was beyond "
                    "what the endpoint serves (lower it, or raise load.grace_s)",
                    True,
                )
            )
    if a.ok and b.ok:
        for m in metrics:
            na, nb = a.values.get(m, 0), b.values.get(m, 0)
            if (na or nb) and min(na, nb) < MIN_SAMPLES:
                out.append(
                    Finding(
                        "too few samples",
                        f"{m}: {na} values on {a.name}, {nb} on {b.name}; a verdict needs "
                        f"at least {MIN_SAMPLES} on each side",
                        True,
                    )
                )
    if set(a.shapes) != set(b.shapes) or len(set(a.shapes)) > 1:
        out.append(
            Finding(
                "load shapes differ",
                f"load shapes differ ({a.name}: {' + '.join(sorted(map(str, set(a.shapes))))}; "
                f"{b.name}: {' + '.join(sorted(map(str, set(b.shapes))))}): latency depends "
                "on the load, so the verdicts below are marked confounded, not attributed "
                "to the deployment",
                False,
            )
        )
    for side in (a, b):
        if side.rebuilt:
            out.append(
                Finding(
                    "rebuilt summaries",
                    f"{side.name}: {side.rebuilt} run(s) killed before writing a summary; "
                    "theirs were rebuilt from requests.jsonl (requests in flight at the kill "
                    "are not in it)",
                    False,
                )
            )
    sa, sb = a.cache.share, b.cache.share
    if sa is not None and sb is not None and abs(sa - sb) > CACHE_SHARE_TOLERANCE:
        out.append(
            Finding(
                "prompt caches differ",
                f"the prompt cache served {sa:.0%} of {a.name}'s prompt tokens and {sb:.0%} "
                f"of {b.name}'s ({_sources(a.cache, b.cache)}): TTFT differs by cache state, "
                "the verdicts are marked confounded (send cache_prompt = false under "
                "[sampling] to llama.cpp; start vLLM with --no-enable-prefix-caching, or "
                "fresh, to compare engines)",
                False,
            )
        )
    return sorted(out, key=lambda f: not f.blocking)
