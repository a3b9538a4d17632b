"""The fault windows while a run goes: what the rig hands out, and the timeline a live
view (the dashboard) makes of it in its own process.

The rig's ``live_feed`` gives a ``FaultFeed`` (its plan and what it has observed so far,
plain data, pickled to the dashboard); ``FaultTimeline`` keeps the latest, judges the
windows on the requests so far with the judge summary.json's verdicts come from
(``judge_so_far``: the live outputs use it too), takes the run's own verdicts at its end,
and gives one ``FaultRow`` per window as of a moment, for the timeline panel
(``render_timeline``). A replay's rows come from the summary's verdicts (``fault_rows``).
The requests are read back from ``requests.jsonl`` (``request_rows``), by the rig at the
run's end too: nothing per request is kept in memory.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from loadtest.features.faults.block import fault_figures
from loadtest.features.faults.plan import FaultPlan
from loadtest.features.faults.verdict import after_span_s, judge_windows
from loadtest.model.io import JsonLines
from loadtest.model.json import JsonObject
from loadtest.model.verdict import FaultVerdict, Observed, RequestRow

__all__ = [
    "FaultFeed",
    "FaultRow",
    "FaultTimeline",
    "fault_row",
    "fault_rows",
    "fault_state",
    "judge_so_far",
    "render_timeline",
    "request_rows",
    "window_begun",
]


@dataclass(frozen=True, slots=True)
class FaultFeed:
    """What the rig has of its windows now (``FaultRig.live_feed``)."""

    plan: FaultPlan
    observed: tuple[Observed, ...]
    """What it observed of each window so far (copies: its loop goes on writing)."""


@dataclass(frozen=True, slots=True)
class FaultRow:
    """One fault window on the timeline."""

    name: str
    kind: str
    start_s: float
    end_s: float
    state: str
    """``upcoming``, ``active``, ``recovering`` (its after-phase runs) or ``ended``."""
    verdict: str | None = None
    reason: str | None = None
    figures: tuple[str, ...] = ()
    """``name value`` of the window's figures, as the printed summary shows them."""
    provisional: bool = False
    """The verdict of the rows so far: the run goes on, the final one may differ."""


def judge_so_far(
    plan: FaultPlan,
    observed: Sequence[Observed],
    rows: Sequence[RequestRow],
    samples: Sequence[JsonObject],
) -> tuple[FaultVerdict, ...]:
    """The windows as the summary would judge them on the requests so far; none before
    a window began (there is nothing yet to say of any)."""
    if not window_begun(plan, observed):
        return ()
    return tuple(judge_windows(plan, list(observed), rows, samples))


def window_begun(plan: FaultPlan, observed: Sequence[Observed]) -> bool:
    """Whether a window of the plan has begun: before, there is nothing to judge (and
    the requests need not be read)."""
    return bool(plan.events) and any("start_s" in o for o in observed)


class FaultTimeline:
    """The fault windows of one live run, as its dashboard shows them."""

    def __init__(self) -> None:
        self.feed: FaultFeed | None = None
        self.verdicts: tuple[FaultVerdict, ...] = ()
        self.final = False

    def take(self, feed: FaultFeed) -> None:
        """The rig's latest."""
        self.feed = feed

    @property
    def begun(self) -> bool:
        """Whether a window has begun: before, there is nothing to judge."""
        return self.feed is not None and window_begun(self.feed.plan, self.feed.observed)

    def judge(self, rows: Sequence[RequestRow], samples: Sequence[JsonObject]) -> None:
        """Provisional verdicts on the requests so far (kept until the next)."""
        if self.feed is not None and not self.final:
            self.verdicts = judge_so_far(self.feed.plan, self.feed.observed, rows, samples)

    def end(self, verdicts: Sequence[FaultVerdict]) -> None:
        """The run's own verdicts, those its summary writes."""
        self.verdicts, self.final = tuple(verdicts), True

    def rows(self, now_s: float) -> tuple[FaultRow, ...]:
        """Each window as of ``now_s`` (the run's clock); every one ended after the run."""
        if self.verdicts:
            now = float("inf") if self.final else now_s
            return fault_rows(self.verdicts, now, provisional=not self.final)
        if self.feed is None:
            return ()
        return tuple(  # not judged yet: the timeline alone
            FaultRow(
                ev.label,
                ev.kind,
                ev.at_s,
                ev.end_s,
                fault_state(ev.at_s, ev.end_s, after_span_s(ev.at_s, ev.end_s), now_s),
            )
            for ev in self.feed.plan.events
        )


def fault_row(entry: FaultVerdict, state: str, provisional: bool, shown: bool) -> FaultRow:
    """The timeline row of a judged window (``judge_windows``' entry, or the summary's);
    its verdict and figures only when ``shown``."""
    return FaultRow(
        entry["name"] or entry["kind"],
        entry["kind"],
        entry["start_s"],
        entry["end_s"],
        state,
        entry["verdict"] if shown else None,
        entry["reason"] if shown else None,
        tuple(fault_figures(entry)) if shown else (),
        provisional and shown,
    )


def fault_rows(
    entries: Sequence[FaultVerdict], now_s: float, provisional: bool
) -> tuple[FaultRow, ...]:
    """Timeline rows of judged windows as of ``now_s``: the state from the same after-phase
    the verdicts use, the verdict as the judge gave it.

    A provisional verdict (live) shows from the window's start; a final one replayed
    shows once its window has ended, as it would have appeared.
    """
    rows = []
    for e in entries:
        start, end = e["start_s"], e["end_s"]
        state = fault_state(start, end, after_span_s(start, end), now_s)
        shown = state != "upcoming" if provisional else state == "ended"
        rows.append(fault_row(e, state, provisional, shown))
    return tuple(rows)


def fault_state(start_s: float, end_s: float, after_s: float, now_s: float) -> str:
    """Where ``now_s`` is relative to a window and its after-phase of ``after_s``."""
    if now_s < start_s:
        return "upcoming"
    if now_s < end_s:
        return "active"
    if now_s < end_s + after_s:
        return "recovering"
    return "ended"


def render_timeline(rows: Sequence[FaultRow], note: str | None = None) -> str:
    """The fault timeline: each window, its state and its verdict when known; ``note``
    stands for the windows where there are none (a rebuilt run's)."""
    if not rows:
        return note or "no fault windows"
    lines = []
    for w in rows:
        verdict = f"  {w.verdict.upper()}" if w.verdict else ""
        if w.verdict and w.provisional:
            verdict += " (so far)"
        lines.append(f"{w.name} ({w.kind}) {w.start_s:.1f}-{w.end_s:.1f}s {w.state}{verdict}")
        if w.reason and w.verdict:
            lines.append(f"    {w.reason}")
        if w.figures:
            lines.append("    " + "  ".join(w.figures))
    return "\n".join(lines)


def request_rows(run_dir: Path) -> list[RequestRow]:
    """The fields of ``requests.jsonl`` the window verdicts read, one row per request.

    Only whole lines count: the dashboard reads the file while the run still writes it.
    """
    rows: list[RequestRow] = []
    path = run_dir / "requests.jsonl"
    if path.exists():
        # JsonLines leaves a last line being written (or torn by a kill) out.
        for r in JsonLines(path):
            rows.append(
                {
                    "sent_ms": r["sent_ms"],
                    "end_ms": r["end_ms"],
                    "first_token_ms": r.get("first_token_ms"),
                    "ttft_ms": r.get("ttft_ms"),
                    "tpot_ms": r.get("tpot_ms"),
                    "outcome": r["outcome"],
                    "warmup": bool(r.get("warmup")),
                    "error_class": r.get("error_class"),
                    "injected_cancel": r.get("injected_cancel"),
                    "cancel_close_ms": r.get("cancel_close_ms"),
                }
            )
    return rows
