"""Output equivalence of baseline and candidate, net of each side's own repeatability.

At temperature 0 a deployment should answer a prompt the same way every time, but an
engine's batching can change its own answers (floating-point order differs with the batch),
with or without speculation. So each side's own divergence is measured on prompts it
answered more than once, and only divergence beyond the baseline's own is laid at the
candidate's door: a verdict that speculation changed the output must not rest on
non-determinism the engine has anyway.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from loadtest.model.comparison import Equivalence, OwnDivergence

__all__ = ["Answers", "equivalence", "equivalence_failed"]


class Answers(Protocol):
    """What equivalence reads of one run (``compare.RunData`` has it)."""

    @property
    def outputs(self) -> dict[str, set[str]]:
        """Per prompt id, the digests of its answers."""

    @property
    def answered(self) -> dict[str, int]:
        """Per prompt id, how many answers were recorded."""

    @property
    def heads(self) -> dict[str, str]:
        """Per prompt id, the head of one answer."""


def _pooled(runs: Sequence[Answers]) -> tuple[dict[str, set[str]], dict[str, int]]:
    digests: dict[str, set[str]] = {}
    counts: dict[str, int] = {}
    for r in runs:
        for pid, d in r.outputs.items():
            digests.setdefault(pid, set()).update(d)
            counts[pid] = counts.get(pid, 0) + r.answered.get(pid, len(d))
    return digests, counts


def _self_divergence(digests: dict[str, set[str]], counts: dict[str, int]) -> OwnDivergence:
    repeated = [p for p, n in counts.items() if n > 1]
    own = [p for p in repeated if len(digests[p]) > 1]
    return {
        "prompts_repeated": len(repeated),
        "divergent": len(own),
        "rate": round(len(own) / len(repeated), 4) if repeated else None,
    }


def equivalence(a: Sequence[Answers], b: Sequence[Answers]) -> Equivalence | None:
    """Match rate of answers to the same prompt; None unless both sides recorded them.

    Each side's own repeatability (a prompt answered more than once, differently) is
    measured too: an engine whose batching changes its own answers diverges without any
    candidate. Only prompts the baseline always answered alike, and the candidate
    answered otherwise, count against the candidate (``attributed``); ``beyond_baseline``
    is their share above the baseline's own divergence rate, and fails the check when
    positive.
    """
    oa, na = _pooled(a)
    ob, nb = _pooled(b)
    common = sorted(set(oa) & set(ob))
    if not common:
        return None
    heads_a = {k: v for r in a for k, v in r.heads.items()}
    heads_b = {k: v for r in b for k, v in r.heads.items()}
    # With temperature 0 every answer to a prompt must be the same, within a side too.
    divergent = [p for p in common if len(oa[p] | ob[p]) > 1]
    attributed = [p for p in divergent if len(oa[p]) == 1 and ob[p] - oa[p]]
    own_a, own_b = _self_divergence(oa, na), _self_divergence(ob, nb)
    attributed_rate = len(attributed) / len(common)
    return {
        "prompts_compared": len(common),
        "matching": len(common) - len(divergent),
        "match_rate": round(1 - len(divergent) / len(common), 4),
        "own_divergence": {"a": own_a, "b": own_b},
        "attributed": len(attributed),
        "beyond_baseline": round(attributed_rate - (own_a["rate"] or 0.0), 4),
        "divergent": [
            {
                "prompt_id": p,
                "a": heads_a.get(p, ""),
                "b": heads_b.get(p, ""),
                "own_a": p not in attributed,
            }
            for p in divergent[:50]
        ],
    }


def equivalence_failed(eq: Equivalence | None) -> bool:
    """True when the candidate diverges beyond the baseline's own divergence."""
    return eq is not None and eq["attributed"] > 0 and eq["beyond_baseline"] > 0
