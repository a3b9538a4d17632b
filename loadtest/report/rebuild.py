"""The summary of a run that died before writing one, rebuilt from what it streamed.

A run killed hard (SIGKILL, the OOM killer, a CI timeout, a lost machine) writes no
summary.json, but every request it accounted is a line of requests.jsonl, and run.json
says what was run (``report.run_start``). Each line is turned back into its
``RequestRecord`` and counted into ``Metrics`` in the order the run counted them, and
the summary is built by the one function that builds every summary
(``summary_from_head``): the same percentiles, SLO checks and driver verdicts.

requests.jsonl is the record of truth: ``requests.sent`` is its complete lines, a torn
last line is counted as torn. What the lines do not hold comes from beside them: the
chunk gaps and tokens per chunk from histograms.hlog (unless the run recorded chunk
times), the server's peaks from metrics.jsonl. What only the living run could say (its
fault verdicts, agent tasks, stale-connection resends) is listed as not rebuilt, never
filled with a zero. Replayed agent-trace sessions are rebuilt from their lines, which
carry what the split needs of the recording (``features.session_tally``). The summary
carries a ``rebuilt`` block that says all of this.
"""

from __future__ import annotations

import logging
import os
import socket
import time
from dataclasses import dataclass
from pathlib import Path

from loadtest.engine.stop import StopPlan, measured_s
from loadtest.errors import ResultFileError, UsageError
from loadtest.features.scrape import SIM_ENGINE
from loadtest.features.server_summary import summarize_samples
from loadtest.features.session_tally import LineTally, tally_lines
from loadtest.measure.merge import encode_metrics, merge_metrics
from loadtest.measure.recorders import Metrics
from loadtest.measure.slo import SLOSpec, parse_slo_flag
from loadtest.model.io import JsonLines, load_summary
from loadtest.model.json import JsonObject
from loadtest.model.record import RequestRecord
from loadtest.model.summary import (
    RebuiltBlock,
    RunExtra,
    RunHead,
    RunStart,
    ServerBlock,
    Summary,
)
from loadtest.report.hlog import log_start_s, read_hlog
from loadtest.report.rebuild_notes import not_rebuilt
from loadtest.report.run_record import record_parts
from loadtest.report.run_start import read_run_start
from loadtest.report.summary import summary_from_head

__all__ = [
    "REBUILT_NOTE",
    "SUMMARIZED_NOTE",
    "LinesPart",
    "Rebuilt",
    "account_lines",
    "is_run_folder",
    "line_blocks",
    "rebuild_summary",
    "summary_of",
]

log = logging.getLogger("loadtest.report")

_TRACE_KEYS = (
    "trace_id",
    "call",
    "calls",
    "unit",
    "gap_ms",
    "tool_ms",
    "recorded_ms",
    "warmup",
    "outcome",
    "intended_ms",
    "sent_ms",
    "first_token_ms",
    "end_ms",
)
"""What ``session_tally.tally_lines`` reads of an agent-trace line (the rest is not kept)."""
REBUILT_NOTE = "no summary.json: rebuilt from requests.jsonl (the run was killed)"
"""What a reader of a rebuilt run is told first (the log line, the dashboard's notice)."""
SUMMARIZED_NOTE = "summary.json rebuilt by loadtest summarize (the run was killed)"
"""The dashboard's notice where ``summarize`` wrote the rebuilt summary: "no
summary.json" was false there."""
_FROM_HLOG = ("itl_ms", "tokens_per_chunk")
"""Recorded from chunk times, which requests.jsonl has only with ``--record-chunks``."""


@dataclass(frozen=True, slots=True)
class Rebuilt:
    """A rebuilt summary and the metrics it was built from (for the .hgrm files)."""

    summary: Summary
    metrics: Metrics


@dataclass(frozen=True, slots=True)
class LinesPart:
    """What one requests.jsonl (the run's, or one worker's) accounts for."""

    metrics: Metrics
    lines: int
    torn: int
    chunk_times: bool
    duration_s: float
    measured_s: float
    trace_rows: list[JsonObject]
    """The lines of replayed agent-trace calls (``agent_trace`` is rebuilt from them)."""


def is_run_folder(folder: Path) -> bool:
    """Whether ``folder`` is a run's: a summary.json, or requests.jsonl to rebuild one."""
    return (folder / "summary.json").exists() or bool(record_parts(folder))


def summary_of(folder: Path) -> Summary:
    """The run folder's summary.json, or, when its run died before writing one, the
    summary rebuilt from its files (not written: see ``loadtest summarize``);
    ``ResultFileError`` naming the path (and the field) when it is neither."""
    if folder.is_dir() and not is_run_folder(folder):
        raise ResultFileError(
            f"{folder}: no summary.json and no requests.jsonl to rebuild it from: not a run "
            "folder (give out/<run-id>)"
        )
    if (folder / "summary.json").exists() or not is_run_folder(folder):
        return load_summary(folder)  # says what is missing, or which field is wrong
    summary = rebuild_summary(folder).summary
    # Not written: reading a folder must not change it (it may be read-only, or another
    # user's); writing it is what ``summarize`` is for.
    log.warning("%s: %s; loadtest summarize %s writes it", folder, REBUILT_NOTE, folder)
    return summary


def rebuild_summary(folder: Path) -> Rebuilt:
    """Rebuild the summary of the dead run in ``folder`` (nothing is written).

    ``UsageError`` when the folder holds no requests.jsonl or its run still goes;
    ``ResultFileError`` naming the file and line when a line is not a request.
    """
    parts = record_parts(folder)
    if not parts:
        raise UsageError(
            f"{folder}: no summary.json and no requests.jsonl: not a run folder (give out/<run-id>)"
        )
    start = read_run_start(folder) or read_run_start(parts[0])
    if start is not None:
        _refuse_live(folder, start)
    closed_loop = start is not None and start["run"]["load"]["mode"] == "closed"
    spec = _slo(start)
    warmup_s = start["run"]["load"]["warmup_s"] if start else 0.0
    done = [account_lines(p / "requests.jsonl", closed_loop, spec, warmup_s) for p in parts]
    metrics = (
        done[0].metrics
        if len(done) == 1
        else merge_metrics(
            [encode_metrics(d.metrics) for d in done], closed_loop=closed_loop, t0_ns=0
        )
    )
    chunk_times = any(d.chunk_times for d in done)
    hlog_requests = _hlog_into(metrics, parts, () if chunk_times else _FROM_HLOG)
    extra: RunExtra = {"workers": len(parts)} if parts[0] != folder else {}
    head = _head(folder, start, parts)
    server = _server(folder)
    # run.json says so; one written before it did, the simulator's /metrics page does
    # (metrics.jsonl): without either, "0/88 match the expected answer" of random calls.
    if (start is not None and start.get("simulated")) or (
        server is not None and server.get("engine") == SIM_ENGINE
    ):
        extra["simulated"] = True
    summary = summary_from_head(
        head,
        spec,
        metrics,
        duration_s=max(d.duration_s for d in done),
        measured_s=max(d.measured_s for d in done),
        interrupted=True,
        extra=extra,
        blocks={} if server is None else {"server": server},
    )
    rebuilt: RebuiltBlock = {
        "reason": "killed",
        "rebuilt_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "lines": sum(d.lines for d in done),
        "torn_lines": sum(d.torn for d in done),
        "start_record": start is not None,
        "from_hlog": [] if chunk_times or hlog_requests is None else list(_FROM_HLOG),
        "hlog_requests": hlog_requests,
        "not_rebuilt": not_rebuilt(
            start,
            [] if chunk_times or hlog_requests is not None else list(_FROM_HLOG),
            max(d.duration_s for d in done),
        ),
    }
    trace_rows = [r for d in done for r in d.trace_rows]
    if trace_rows:
        counted = tally_lines(trace_rows)
        summary["agent_trace"] = counted.tally.block()
        rebuilt["not_rebuilt"].append(_trace_note(counted))
    summary["rebuilt"] = rebuilt
    return Rebuilt(summary, metrics)


def line_blocks(part: LinesPart) -> dict[str, list[object]]:
    """The summary blocks' parts one requests.jsonl gives back, for a worker that died
    before handing in its own (``HookResult.blocks``): its replayed agent sessions,
    counted from its lines as its replay counted them. Without this the run's
    ``agent_trace`` left out the dead worker's completed sessions that its merged lines
    hold. Its ``sessions_in_trace`` is the traces its lines name: a session of its share
    it never sent is not known here."""
    if not part.trace_rows:
        return {}
    return {"agent_trace": [tally_lines(part.trace_rows).tally.encode()]}


def _trace_note(counted: LineTally) -> str:
    note = (
        "agent_trace: rebuilt from the lines; sessions_in_trace counts the traces they "
        "name (the trace file is not read back)"
    )
    if counted.in_flight:
        note += f"; {counted.in_flight} session(s) cut short by the kill are not counted"
    if counted.unreadable:
        note += (
            f"; {counted.unreadable} session(s) whose lines lack the recorded gaps (an "
            "older loadtest) are not counted"
        )
    return note


def _refuse_live(folder: Path, start: RunStart) -> None:
    pid = start["pid"]
    if start["host"] != socket.gethostname() or pid == os.getpid():
        return  # another machine's run, or this process's own (ended) one
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return
    except PermissionError:
        pass  # alive, another user's
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        cmdline = b"loadtest"  # no /proc to tell: a live pid is taken for the run
    # A zombie has an empty command line; a reused pid another program's.
    if b"loadtest" in cmdline:
        raise UsageError(
            f"{folder}: its run is still going (pid {pid}); its summary.json is written "
            "when it ends"
        )


def _slo(start: RunStart | None) -> SLOSpec:
    if start is None:
        return SLOSpec()
    return SLOSpec(tuple(t for text in start["slo"] for t in parse_slo_flag(text)))


def account_lines(path: Path, closed_loop: bool, spec: SLOSpec, warmup_s: float) -> LinesPart:
    """Every complete line of one requests.jsonl, counted as the run counted it."""
    metrics = Metrics(closed_loop=closed_loop, t0_ns=0, goodput_limits=spec.request_limits())
    lines = JsonLines(path)
    chunk_times = False
    end = 0
    trace_rows: list[JsonObject] = []
    try:
        for row in lines:
            rec = RequestRecord.from_json(row)
            chunk_times = chunk_times or "token_chunk_ms" in row
            if "trace_id" in row:
                trace_rows.append({k: row[k] for k in _TRACE_KEYS if k in row})
            metrics.add(rec)
            end = max(end, rec.end_ns)
    except (KeyError, TypeError, ValueError) as exc:
        raise ResultFileError(
            f"{path}: line {lines.lines}: not a request line (no or bad {exc})"
        ) from exc
    metrics.roll(end / 1e9)  # the recorded values reach the totals
    # Without run.json the warm-up is unknown: the window starts at the first measured
    # send, as an open loop's does.
    plan = StopPlan(int(warmup_s * 1e9))
    return LinesPart(
        metrics,
        lines.lines,
        lines.torn,
        chunk_times,
        duration_s=end / 1e9,
        measured_s=measured_s(
            plan,
            closed_loop=closed_loop,
            first_intended_ns=metrics.measure_start_ns,
            last_end_ns=metrics.last_end_ns,
            end_ns=end,
        ),
        trace_rows=trace_rows,
    )


def _hlog_into(metrics: Metrics, parts: list[Path], names: tuple[str, ...]) -> int | None:
    """Add ``names`` from the parts' histograms.hlog into ``metrics``; the requests the
    logs cover (their end-to-end count), None when there is none to read."""
    logs = [p / "histograms.hlog" for p in parts if (p / "histograms.hlog").exists()]
    if not logs:
        return None
    covered = 0
    for path in logs:
        totals = read_hlog(path)
        e2e = totals.get("e2e_ms")
        covered += e2e.get_total_count() if e2e is not None else 0
        for name in names:
            hist = totals.get(name)
            if hist is None or not hist.get_total_count():
                continue
            metrics.total.hists[name].add(hist)
            # The log keeps no exact sum: the mean is HdrHistogram's, to its resolution.
            metrics.total.sums[name] += hist.get_mean_value() * hist.get_total_count()
    return covered


def _head(folder: Path, start: RunStart | None, parts: list[Path]) -> RunHead:
    # The logs' headers have the run's own start (its workers' earliest, as the run
    # takes); run.json's is a moment before it, which can be the second before.
    walls = [w for p in parts if (w := log_start_s(p / "histograms.hlog")) is not None]
    started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(min(walls))) if walls else None
    if start is not None:
        run = start["run"]
        return {**run, "id": folder.name, "started_at": started or run["started_at"]}
    return {
        "id": folder.name,
        "scenario": "unknown (no run.json)",
        "scenario_path": None,
        "endpoint": "unknown",
        "model": "unknown",
        "api": "unknown",
        "stream": True,
        "started_at": started or "unknown",
        "load": {
            "mode": "unknown",
            "concurrency": None,
            "rate": None,
            "burstiness": None,
            "duration_s": None,
            "requests": None,
            "warmup_s": 0.0,
        },
        "prompts": {},
        "seed": None,
    }


def _server(folder: Path) -> ServerBlock | None:
    """The scraped peaks, from the samples the run streamed to metrics.jsonl."""
    path = folder / "metrics.jsonl"
    return summarize_samples(list(JsonLines(path))) if path.exists() else None
