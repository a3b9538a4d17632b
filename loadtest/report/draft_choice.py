"""Which draft length gives the shortest time to a correct action, at each load.

With ``ab --sweep ... --draft-max 1,2,4`` every K is a candidate of its own, judged
against the baseline. This module asks the second question: per category and load,
which K is fastest on the time to a correct action (``tool_call_ms`` where the category
calls tools, else ``e2e_ms``)? The K with the lowest median is tested against each
other K (the run bootstrap of the medians, as every latency cell); those p-values join
the decision's Holm family, so the extra comparisons are paid for. A K is named best
only when every other K is called slower than it; otherwise the answer is the set of
Ks that could not be told apart from the fastest ("K=1, K=4 indistinguishable").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from loadtest.measure.stats import practical_effect
from loadtest.model.decision import DraftPair, DraftPick
from loadtest.report.decision_cells import RunSamples, Test, judged, latency_test

__all__ = ["PairKey", "pair_tests", "picks"]

PairKey = tuple[int, str, int, int]
"""(step index, category, fastest K, other K)."""
LABELS = {"tool_call_ms": "tool call", "e2e_ms": "e2e"}


def _median(runs: Sequence[RunSamples], category: str, metric: str) -> float | None:
    values = [r.by_category.get(category, {}).get(metric, np.empty(0)) for r in runs]
    pooled = np.concatenate(values) if values else np.empty(0)
    return float(np.median(pooled)) if pooled.size else None


def pair_tests(
    steps: Sequence[tuple[float, str | None, Mapping[int, Sequence[RunSamples]]]],
    metrics: Mapping[str, str],
    min_effect: float,
    resamples: int,
) -> dict[PairKey, Test]:
    """The fastest K against each other K, per step (load, blocked, runs per K) and
    category (``metrics``: its time to a correct action). Nothing for a step whose
    comparison cannot stand, or a sweep of one K (pure)."""
    out: dict[PairKey, Test] = {}
    for i, (_, blocked, draft) in enumerate(steps):
        if blocked is not None or len(draft) < 2:
            continue
        for cat, metric in metrics.items():
            medians = {k: _median(runs, cat, metric) for k, runs in draft.items()}
            known = [k for k, m in medians.items() if m is not None]
            if not known:
                continue
            best = min(known, key=lambda k: (medians[k], k))
            for k in sorted(draft):
                if k == best:
                    continue
                effect = practical_effect(len(draft[best]), len(draft[k]), min_effect)
                out[i, cat, best, k] = latency_test(
                    draft[best], draft[k], cat, metric, effect, resamples
                )
    return out


def picks(
    tests: Mapping[PairKey, Test],
    adjusted: Mapping[PairKey, float | None],
    loads: Sequence[float],
    values: Sequence[int],
    metrics: Mapping[str, str],
) -> list[DraftPick]:
    """One pick per step and category that had pair tests, judged after Holm."""
    groups: dict[tuple[int, str], list[PairKey]] = {}
    for key in tests:
        groups.setdefault((key[0], key[1]), []).append(key)
    out: list[DraftPick] = []
    for (i, cat), keys in sorted(groups.items()):
        best = keys[0][2]
        pairs: list[DraftPair] = []
        medians: dict[int, float | None] = {best: tests[keys[0]].a}
        for key in keys:
            cell = judged(tests[key], adjusted.get(key))
            cell["metric"] = metrics[cat]
            pairs.append({"k": key[3], "cell": cell})
            medians[key[3]] = tests[key].b
        slower = [p for p in pairs if p["cell"]["verdict"] == "slower"]
        tied = sorted([best, *(p["k"] for p in pairs if p["cell"]["verdict"] != "slower")])
        label = LABELS.get(metrics[cat], metrics[cat])

        def said(p: DraftPair, label: str = label) -> str:
            c = p["cell"]
            e, lo, hi = c["effect"], c["effect_low"], c["effect_high"]
            if e is None:
                return f"K={p['k']} {c['verdict']}"
            head = f"K={p['k']} {label} {e * 100:+.0f}%"
            return head + (
                f" [{lo * 100:.0f},{hi * 100:.0f}]" if lo is not None and hi is not None else ""
            )

        if len(tied) == 1:
            text = f"K={best} fastest ({', '.join(said(p) for p in pairs)})"
        else:
            text = ", ".join(f"K={k}" for k in tied) + f" indistinguishable on {label}"
            if slower:
                text += f"; slower than K={best}: " + ", ".join(said(p) for p in slower)
        out.append(
            {
                "category": cat,
                "load": loads[i],
                "metric": metrics[cat],
                "medians_ms": [
                    None if medians.get(k) is None else round(float(medians[k] or 0.0), 4)
                    for k in values
                ],
                "best": best if len(tied) == 1 else None,
                "tied": tied,
                "text": text,
                "pairs": pairs,
            }
        )
    return out
