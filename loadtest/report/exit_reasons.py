"""Why a command exits 1, in words: the closing line that names each reason.

A run that measured nothing, missed an SLO or had a fault window judged as bad as
``--fail-on`` exits 1, as a CI gate expects; without a closing word the only sign was a
``MISSED`` or ``FAILED`` somewhere in the table. The reasons are read off the summaries
(and an ``ab`` comparison) here, by the same rules that set the exit code, so the code
and the words cannot disagree: the command exits 1 exactly when there is a reason.
"""

from __future__ import annotations

from collections.abc import Sequence

from loadtest.model.comparison import Comparison
from loadtest.model.summary import Summary
from loadtest.model.verdict import FailOn, SloCheck, failing_windows, untold_windows
from loadtest.report.compare_checks import CONFOUNDING
from loadtest.report.equivalence import equivalence_failed
from loadtest.report.evidence import run_evidence

__all__ = [
    "comparison_reasons",
    "exit_line",
    "fault_reasons",
    "run_reasons",
    "slo_reasons",
    "stop_reasons",
    "too_few",
]


def run_reasons(summary: Summary, fail_on: FailOn | str) -> list[str]:
    """Every reason a run exits 1: nothing measured, SLOs missed, fault windows failed,
    a stop rule that fails the run fired."""
    return [
        *run_evidence(summary).reasons,
        *slo_reasons(summary),
        *fault_reasons(summary, fail_on),
        *stop_reasons(summary),
    ]


def stop_reasons(summary: Summary) -> list[str]:
    """``stopped early (errors: 12 of 20 measured requests failed (60% >= 50%))`` for
    each distinct reason of a stop rule that fails the run."""
    fired = {s["reason"] for s in summary.get("stopped", []) if s["fails"]}
    return [f"stopped early ({reason})" for reason in sorted(fired)]


def slo_reasons(summary: Summary) -> list[str]:
    """``SLO ttft_ms.p95 missed (612.0 ms > 500 ms)`` for each check not met."""
    warmup = summary["requests"]["warmup"]
    return [_slo_reason(c, warmup) for c in summary["slo"]["checks"] if not c["met"]]


def _slo_reason(check: SloCheck, warmup: int) -> str:
    value, limit = check["value"], check["limit"]
    if value is None:
        return f"SLO {check['slo']} not exercised (no data)"
    if check.get("verdict") == "inconclusive":
        return f"SLO {check['slo']} cannot tell ({too_few(check, warmup)})"
    unit = " ms" if check["slo"].split(".")[0].endswith("_ms") else ""
    shown = f"{value:.1f}" if unit else f"{value:.3g}"
    return f"SLO {check['slo']} missed ({shown}{unit} > {limit:g}{unit})"


def fault_reasons(summary: Summary, fail_on: FailOn | str) -> list[str]:
    """``fault window draft-outage failed`` for each window ``--fail-on`` gates on, and
    ``... inconclusive (too few requests ...)`` for each that could not be told: a gate
    on the fallbacks must not pass when none of them was tried."""
    faults = summary.get("faults", [])
    return [
        *(f"fault window {f['name']} {f['verdict']}" for f in failing_windows(faults, fail_on)),
        *(
            f"fault window {f['name']} {f['verdict'].replace('_', ' ')} ({f['reason']})"
            for f in untold_windows(faults, fail_on)
        ),
    ]


def comparison_reasons(c: Comparison) -> list[str]:
    """Why a comparison fails: what no verdict stands on, unlike sides, other outputs."""
    reasons: list[str] = []
    for f in c["findings"]:
        if f["blocking"] or f["kind"] in CONFOUNDING:
            why = f"comparison: {f['kind']}" + ("" if f["blocking"] else " (confounded)")
            if why not in reasons:  # "too few samples" comes once per metric
                reasons.append(why)
    eq = c["equivalence"]
    if eq is not None and equivalence_failed(eq):
        reasons.append(
            f"outputs differ: B answered {eq['attributed']} of {eq['prompts_compared']} "
            "prompts otherwise, beyond A's own divergence"
        )
    return reasons


def too_few(check: SloCheck, warmup: int = 0) -> str:
    """``30 values; a p99 needs 100``: why an SLO check could not be told.

    The error rate is over every request sent, the warm-up's too (``requests.error_rate``):
    ``warmup`` says how many of them, where ``44 requests`` alone read as measured ones
    on a run that measured 5."""
    stat = check["slo"].partition(".")[2]
    if stat:
        return f"{check.get('values', 0)} values; a {stat} needs {check.get('need', 0)}"
    sent = check.get("values", 0)
    of = f", {warmup} of them warm-up" if warmup else ""
    return f"{sent} requests{of}; an error rate needs {check.get('need', 0)}"


def exit_line(code: int, reasons: Sequence[str]) -> str:
    """``exit 1: SLO ttft_ms.p95 missed (612.0 ms > 500 ms); fault window x failed``."""
    return f"exit {code}: " + "; ".join(reasons)
