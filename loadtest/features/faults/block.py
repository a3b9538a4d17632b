"""The ``faults`` summary block: one verdict per fault window, judged once by the rig on
the merged records, and its rendering for the run's table and the dashboard's figures
(``fault_figures``: what the kinds print of their entries, then a plugin kind's own
``detail``).

Its model is a list of ``FaultVerdict`` with every registered kind's figures
(``entry.fault_entry``); ``Summary.faults`` names the plain ``FaultVerdict``, which the
model extends, so typed readers read the shared fields and a kind's figures through the
kind's own TypedDict (``own_figures.top_figures``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import GenericAlias
from typing import TYPE_CHECKING

from loadtest.engine.block_text import WIDTH, fit, packed
from loadtest.engine.blocks import BlockBase
from loadtest.features.faults.entry import fault_entry, printed_keys
from loadtest.model.summary import Summary
from loadtest.model.verdict import STATE_OF, FaultVerdict

if TYPE_CHECKING:
    from loadtest.measure.recorders import Metrics

__all__ = ["FAULTS", "fault_figures", "render_faults"]


def _ms(v: float | None) -> str:
    return "-" if v is None else f"{v:.1f}"


def fault_figures(f: FaultVerdict) -> list[str]:
    """``name value`` of each figure a window has, in its kind's order (its
    ``printed_figures``), then its recovery: counts as ints, times as they are; then a
    plugin kind's own numbers (its ``detail``), in the order it wrote them."""
    out = []
    fields: Mapping[str, object] = f
    for k in (*printed_keys(), "recovery_s"):
        v = fields.get(k)
        if v is not None:
            out.append(f"{k} {v}")
    for name, value in f.get("detail", {}).items():
        if isinstance(value, int | float) and not isinstance(value, bool):
            out.append(f"{name} {value}")
    return out


def render_faults(faults: Sequence[FaultVerdict]) -> str:
    """One block per fault window: verdict, reason and before/during/after latency."""
    lines = ["", "faults"]
    for f in faults:
        # The reason on a line of its own: beside the name and times it wrapped every row.
        span = f"{f['start_s']:.1f}-{f['end_s']:.1f} s"
        lines.append(f"  {f['name']:<32} {span:>14}  {f['verdict'].upper()}")
        lines.append(f"    {f['reason']}")
        if STATE_OF[f["verdict"]] == "not_exercised":
            continue  # nothing tried: figures that fell in by chance read as evidence
        b, d, a = f["before"], f["during"], f["after"]
        ttft = f"{_ms(b['ttft_p95_ms'])} / {_ms(d['ttft_p95_ms'])} / {_ms(a['ttft_p95_ms'])}"
        tpot = f"{_ms(b['tpot_p95_ms'])} / {_ms(d['tpot_p95_ms'])} / {_ms(a['tpot_p95_ms'])}"
        both = f"    p95 ms before/during/after: TTFT {ttft}   TPOT {tpot}"
        if len(both) <= WIDTH:
            lines.append(both)
        else:
            lines += [
                f"    TTFT p95 ms before/during/after {ttft}",
                f"    TPOT p95 ms before/during/after {tpot}",
            ]
        acc = f["acceptance"]
        rates = (acc["before"], acc["during"], acc["after"])
        if any(v is not None for v in rates):
            cells = " / ".join("-" if v is None else f"{v:.2f}" for v in rates)
            lines.append(f"    draft acceptance before/during/after {cells}")
        extra = fault_figures(f)
        if extra:
            lines += packed([f"    {extra[0]}", *extra[1:]])
    return fit(lines)


class _Faults(BlockBase):
    """One verdict per fault window: every part's, in order (the rig hands one list)."""

    empty: object = []

    @property
    def model(self) -> object:
        """A list of entries with every registered kind's figures (made on first use:
        it loads every kind)."""
        return GenericAlias(list, (fault_entry(),))  # list[entry], of a type made now

    def merge(self, parts: Sequence[list[FaultVerdict]], metrics: Metrics) -> list[FaultVerdict]:
        return [f for part in parts for f in part]

    def render(self, block: list[FaultVerdict], summary: Summary) -> str | None:
        return render_faults(block) if block else None


FAULTS = _Faults()
