"""Reasoning models, baseline against candidate: what speculation did to each part.

A request that reasons has two parts a user waits through: the reasoning (its first
reasoning chunk to its first answer token) and the answer (first answer token to the
last). A draft may predict one far better than the other, so the comparison says per
part: the median duration of each side's requests that reasoned, B against A with the
run bootstrap and a practical threshold (``stats.compare_groups``, as every latency
line), the two parts adjusted together with Holm; and each part's tokens a step (tokens
over the stream chunks that carried them: a verify step arrives as one chunk), which
says *why* a part moved. ``pays_in`` names the parts called faster; a part neither side
measured is ``not exercised``, never "no difference".
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from loadtest.measure.stats import compare_groups, format_p, judge_family
from loadtest.model.comparison import PartLine, PartsComparison

__all__ = ["PARTS", "PartSamples", "compare_parts", "render_parts"]

PARTS = (("reasoning", "reasoning_ms"), ("answer", "answer_ms"))
"""Each part and the per-request duration that measures it (``requests.jsonl``)."""


class PartSamples:
    """One run's requests that reasoned, as the comparison of parts reads them."""

    __slots__ = ("chunks", "durations", "requests", "tokens")

    def __init__(self) -> None:
        self.requests = 0
        self.durations: dict[str, list[float]] = {part: [] for part, _ in PARTS}
        self.tokens = dict.fromkeys((p for p, _ in PARTS), 0)
        self.chunks = dict.fromkeys((p for p, _ in PARTS), 0)

    def add(self, row: dict[str, object]) -> None:
        """One measured ok line of ``requests.jsonl`` (lines without reasoning pass)."""
        if row.get("reasoning_split") not in ("field", "think-tags"):
            return
        self.requests += 1
        for part, key in PARTS:
            value = row.get(key)
            if isinstance(value, int | float):
                self.durations[part].append(float(value))
            tokens, chunks = row.get(f"{part}_tokens"), row.get(f"{part}_chunks")
            if isinstance(tokens, int) and isinstance(chunks, int) and chunks > 0:
                self.tokens[part] += tokens
                self.chunks[part] += chunks


def _per_step(runs: Sequence[PartSamples], part: str) -> float | None:
    chunks = sum(r.chunks[part] for r in runs)
    return round(sum(r.tokens[part] for r in runs) / chunks, 3) if chunks else None


def _rel(v: float, scale: float) -> float | None:
    return round(v / scale, 4) if scale and np.isfinite(v) else None


def compare_parts(
    a: Sequence[PartSamples], b: Sequence[PartSamples], effect: float, resamples: int = 2000
) -> PartsComparison | None:
    """Each part, B against A (None when neither side's requests reasoned)."""
    if not any(r.requests for r in (*a, *b)):
        return None
    tested = []
    for part, _ in PARTS:
        ga = [np.asarray(r.durations[part]) for r in a]
        gb = [np.asarray(r.durations[part]) for r in b]
        tested.append(compare_groups(ga, gb, (50,), resamples=resamples, min_effect=effect))
    present = [c for c in tested if c is not None]
    judged = iter(judge_family(present))
    lines: list[PartLine] = []
    for (part, metric), c in zip(PARTS, tested, strict=True):
        d = next(judged).percentiles[0] if c is not None else None
        lines.append(
            {
                "part": part,
                "metric": metric,
                "a": None if d is None else round(d.a, 3),
                "b": None if d is None else round(d.b, 3),
                "effect": None if d is None else _rel(d.diff, d.a),
                "effect_low": None if d is None else _rel(d.low, d.a),
                "effect_high": None if d is None else _rel(d.high, d.a),
                "p_value": None if d is None else d.p_value,
                "p_holm": None if d is None else d.p_adjusted,
                "verdict": "not exercised" if d is None else d.verdict,
                "tokens_per_step_a": _per_step(a, part),
                "tokens_per_step_b": _per_step(b, part),
            }
        )
    pays = [line["part"] for line in lines if line["verdict"] == "faster"]
    return {
        "requests_a": sum(r.requests for r in a),
        "requests_b": sum(r.requests for r in b),
        "parts": lines,
        "pays_in": pays,
        "text": _said(lines, pays),
    }


def _said(lines: Sequence[PartLine], pays: Sequence[str]) -> str:
    if pays:
        rest = [f"{line['part']} {line['verdict']}" for line in lines if line["part"] not in pays]
        return f"speculation pays in {' and '.join(pays)}" + (
            f" ({', '.join(rest)})" if rest else ""
        )
    said = ", ".join(f"{line['part']} {line['verdict']}" for line in lines)
    return f"speculation pays in neither part ({said})"


def render_parts(p: PartsComparison) -> list[str]:
    """The per-part lines of a comparison: durations, effect, verdict, tokens a step."""

    def ms(v: float | None) -> str:
        return "-" if v is None else f"{v:,.1f}"

    def step(v: float | None) -> str:
        return "-" if v is None else f"{v:.2f}"

    lines = [
        f"reasoning, by part (A {p['requests_a']}, B {p['requests_b']} requests reasoned; "
        "medians, Holm over the parts):",
    ]
    for line in p["parts"]:
        eff = line["effect"]
        low, high = line["effect_low"], line["effect_high"]
        effect = "-" if eff is None else f"{eff:+.0%}"
        if low is not None and high is not None:
            effect += f" [{low:.0%}, {high:.0%}]".replace("%", "")
        lines.append(
            f"  {line['part']}: A {ms(line['a'])} ms, B {ms(line['b'])} ms, {effect}, "
            f"p {format_p(line['p_holm'])}: {line['verdict']}"
        )
        lines.append(
            f"    tokens a step {step(line['tokens_per_step_a'])} -> "
            f"{step(line['tokens_per_step_b'])}"
        )
    lines.append(f"  {p['text']}")
    return lines
