"""``loadtest export-trace [--format F] RUN_DIR``: a finished run's requests as a trace.

A format turns a run folder into JSON lines (``TraceFormat``); ``FORMATS`` names them:

- ``jsonl`` (the default, ``trace.jsonl``): one line per request, in the order they were
  meant to be sent: ``timestamp`` (ms from the first), ``input_length`` (the server's
  ``prompt_tokens``), ``output_length`` (the tokens that came back, at least 1), and
  ``messages`` when the run recorded prompts (``record_prompts``), so a ``trace`` source
  sends the very same requests;
- ``otlp`` (``trace.otlp.jsonl``): OpenTelemetry GenAI spans in OTLP JSON, a trace per
  session (``report.otlp``), which Jaeger, Tempo and an ``agent-trace`` source read.
"""

from __future__ import annotations

import calendar
import importlib.metadata
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import orjson

from loadtest.errors import ResultFileError, UsageError
from loadtest.model.io import run_requests
from loadtest.model.json import JsonObject
from loadtest.report.hlog import log_start_s
from loadtest.report.otlp import ExportHead, otlp_documents
from loadtest.report.rebuild import summary_of
from loadtest.report.run_sessions import run_sessions

__all__ = ["FORMATS", "TraceFormat", "export_trace", "otlp_lines", "trace_lines"]


@dataclass(frozen=True, slots=True)
class TraceFormat:
    """One way to write a run as a trace: its lines, and the file they go to by default."""

    default_name: str
    lines: Callable[[Path], list[JsonObject]]
    """The run folder's trace as JSON lines."""


def trace_lines(folder: Path) -> list[JsonObject]:
    """The trace of a run's ``requests.jsonl`` (lines without a send time are skipped)."""
    requests_jsonl = folder / "requests.jsonl"
    try:
        rows = [r for r in run_requests(folder) if isinstance(r.get("intended_ms"), int | float)]
    except ResultFileError as exc:
        raise UsageError(str(exc)) from exc
    rows.sort(key=lambda r: (r["intended_ms"], r.get("index", 0)))
    if not rows:
        raise UsageError(f"{requests_jsonl}: no request to export")
    first = rows[0]["intended_ms"]
    out = []
    for r in rows:
        line: JsonObject = {"timestamp": round(r["intended_ms"] - first, 3)}
        if isinstance(r.get("prompt_tokens"), int) and r["prompt_tokens"] > 0:
            line["input_length"] = r["prompt_tokens"]
        line["output_length"] = max(1, int(r.get("output_tokens") or 0))
        if isinstance(r.get("messages"), list) and r["messages"]:
            line["messages"] = r["messages"]
        elif "input_length" not in line:
            # Neither a length nor the text: a length from its characters keeps the line.
            line["input_length"] = max(1, int(r.get("prompt_chars") or 4) // 4)
        out.append(line)
    return out


def otlp_lines(folder: Path) -> list[JsonObject]:
    """The run's sessions as OTLP JSON documents, one a line (``report.otlp``)."""
    sessions = run_sessions(folder)
    try:
        run = summary_of(folder)["run"]
    except ResultFileError as exc:
        raise UsageError(str(exc)) from exc
    head = ExportHead(
        run_id=run["id"],
        model=run["model"],
        endpoint=run["endpoint"],
        agent=run["scenario"],
        start_unix_ns=_start_unix_ns(folder, run["started_at"]),
        version=_version(),
    )
    return otlp_documents(sessions, head)


def _start_unix_ns(folder: Path, started_at: str) -> int:
    # The interval log's header has the start to the millisecond; the summary's label
    # only to the second.
    s = log_start_s(folder / "histograms.hlog")
    if s is None:
        # A --workers run killed before its merge has its workers' logs only; they
        # started together, and the run's start is the earliest (as the merge takes it).
        walls = [w for p in folder.glob("worker-*") if (w := log_start_s(p / "histograms.hlog"))]
        s = min(walls, default=None)
    if s is None:
        try:
            s = calendar.timegm(time.strptime(started_at, "%Y-%m-%dT%H:%M:%SZ"))
        except ValueError:
            s = (folder / "requests.jsonl").stat().st_mtime
    return round(s * 1e9)


def _version() -> str:
    try:
        return importlib.metadata.version("loadtest")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


FORMATS = {
    "jsonl": TraceFormat("trace.jsonl", trace_lines),
    "otlp": TraceFormat("trace.otlp.jsonl", otlp_lines),
}


def export_trace(run_dir: str | Path, out: str | Path | None = None, fmt: str = "jsonl") -> Path:
    """Write the run's trace in format ``fmt`` (default file: ``RUN_DIR/`` and the
    format's name); returns its path."""
    form = FORMATS.get(fmt)
    if form is None:
        raise UsageError(f"--format {fmt!r}: one of {', '.join(FORMATS)}")
    folder = Path(run_dir)
    if not folder.is_dir():
        raise UsageError(f"{folder}: not a run folder")
    target = Path(out) if out is not None else folder / form.default_name
    lines = form.lines(folder)
    target.write_bytes(b"".join(orjson.dumps(x) + b"\n" for x in lines))
    return target
