"""Whether a run measured anything: said before any figure, and a CI gate on nothing fails.

A run whose measured requests all failed or were cancelled still writes a table of
empty percentiles and an SLO block with nothing to judge; read alone, that passes for a
result. These lines come first instead, and ``loadtest run`` (and ``sweep``) exit 1 when a
blocking one is there: nothing measured, or most measured requests cut off by the grace
period (what completed is then the fast part of a censored sample). First of all comes
whether the summary is the run's own or was rebuilt after the run died (``rebuilt_note``).
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass

from loadtest.model.summary import Summary

__all__ = ["DRAINED_SHARE", "Evidence", "beyond_endpoint", "rebuilt_note", "run_evidence"]

DRAINED_SHARE = 0.5
"""More than this share of measured requests cut off by the grace period: the load was
beyond what the endpoint could finish, and what completed is a biased sample."""


def beyond_endpoint(drained: int, sent: int) -> bool:
    """Whether more than ``DRAINED_SHARE`` of ``sent`` measured requests were cut off by
    the grace period (the one rule of ``run``, ``compare`` and ``ab``)."""
    return sent > 0 and drained > DRAINED_SHARE * sent


@dataclass(frozen=True, slots=True)
class Evidence:
    """What a run's figures stand on: lines to print first, and whether they block."""

    lines: tuple[str, ...]
    blocking: bool
    reasons: tuple[str, ...] = ()
    """The blocking lines in a few words, for the command's closing ``exit 1:`` line."""


def rebuilt_note(summary: Summary) -> str | None:
    """What a rebuilt summary stands on, in words, wrapped to 80 columns; None for a
    run's own summary."""
    rebuilt = summary.get("rebuilt")
    if rebuilt is None:
        return None
    torn = rebuilt["torn_lines"]
    text = (
        f"REBUILT: the run was killed before it wrote its summary; rebuilt from the "
        f"{rebuilt['lines']} lines of requests.jsonl"
        + (f" ({torn} torn last line not counted)" if torn else "")
        + f", {summary['run']['measured_s']:.1f} s measured; requests in flight at the "
        "kill have no line and are not counted"
    )
    # The windows it cannot judge are said here, not only left out of the table.
    unjudged = [n for n in rebuilt["not_rebuilt"] if n.startswith("fault window")]
    lines = textwrap.wrap(text, 80)
    for note in unjudged:
        lines += textwrap.wrap(f"FAULTS NOT JUDGED: {note}", 80)
    return "\n".join(lines)


def run_evidence(summary: Summary) -> Evidence:
    """The lines that must come before a run's figures (empty when it measured enough)."""
    r = summary["requests"]
    rebuilt = rebuilt_note(summary)
    lines: list[str] = [] if rebuilt is None else rebuilt.splitlines()
    reasons: list[str] = []
    blocking = r.get("measured_ok", r["ok"]) == 0
    if blocking:
        reasons.append("nothing measured (no measured request completed)")
        lines.append(
            f"STOP: no measured request completed ({r['sent']} sent, {r['failed']} failed, "
            f"{r['cancelled']} cancelled): this run measured nothing"
        )
    measured = r["sent"] - r["warmup"]
    drained = min(r.get("cancelled_by", {}).get("grace_expired", 0), measured)
    if beyond_endpoint(drained, measured):
        # The SLO checks would judge the fast part of a censored sample: not evidence.
        blocking = True
        reasons.append(
            f"load beyond the endpoint ({drained} of {measured} measured requests cut off)"
        )
        lines.append(
            f"STOP: {drained} of {measured} measured requests were still running when the "
            "grace period ended: the load was beyond the endpoint (lower --concurrency or "
            "--rate, or raise [load] grace_s)"
        )
    return Evidence(tuple(lines), blocking, tuple(reasons))
