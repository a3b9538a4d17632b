"""What a summary rebuilt from a killed run's lines cannot give back, said per figure:
a reader of a rebuilt summary is told which of its sections are missing and why, and a
fault window planned after the kill is told apart from one that opened unjudged."""

from __future__ import annotations

from loadtest.model.summary import RunStart

__all__ = ["not_rebuilt"]


def not_rebuilt(start: RunStart | None, lost: list[str], lasted_s: float) -> list[str]:
    """What the rebuilt summary of a run lacks, and why: ``lost``, the chunk figures
    neither its lines nor a histograms.hlog hold; ``lasted_s``, when its last line ended."""
    out = []
    if lost:
        out.append(
            f"{', '.join(lost)}: requests.jsonl has no chunk times (--record-chunks) "
            "and there is no histograms.hlog"
        )
    if start is None:
        out.append(
            "scenario, endpoint, model and SLOs: the folder has no run.json (an older "
            "loadtest, or killed before the load started); corrected figures taken as "
            "an open loop's, from each line's intended send"
        )
    elif start["fault_windows"]:
        out += _fault_notes(start["fault_windows"], start.get("fault_starts_s"), lasted_s)
    if start is not None and start["agent"]:
        out.append("agent tasks: tasks.jsonl is not read back")
    out.append("resent_stale_connection: counted by the run's client only")
    return out


def _fault_notes(labels: list[str], starts: list[float] | None, lasted_s: float) -> list[str]:
    """A window planned after the run's last recorded request was most likely never
    reached (the kill came first); said as what the lines show, since a window that
    stalls the load (a blackhole, an idle burst) ends no request either. One that
    opened has no verdict. Without planned starts (an older run.json), every window is
    said to have none. Windows are told apart by place, not by their (user-given) names."""
    later = (
        [i for i, at in enumerate(starts) if at > lasted_s]
        if starts is not None and len(starts) == len(labels)
        else []
    )
    opened = [w for i, w in enumerate(labels) if i not in later]
    out = []
    if opened:
        out.append(
            f"fault window{'s' * (len(opened) > 1)} {', '.join(opened)}: no verdict, as "
            "one needs the times the fault really began and ended, which only a run "
            "that finishes writes"
        )
    if later:
        assert starts is not None
        names = ", ".join(labels[i] for i in later)
        first = min(starts[i] for i in later)
        last = (
            f"the run's last recorded request ended at {lasted_s:.1f} s"
            if lasted_s > 0
            else "the run recorded no request"
        )
        out.append(
            f"fault window{'s' * (len(later) > 1)} {names}: not reached, by its lines "
            f"({last}, before {first:g} s)"
        )
    return out
