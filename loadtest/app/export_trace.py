"""``loadtest export-trace RUN_DIR``: a finished run's requests as a replayable trace.

One line per request, in the order they were meant to be sent: ``timestamp`` (ms from
the first), ``input_length`` (the server's ``prompt_tokens``), ``output_length`` (the
tokens that came back, at least 1), and ``messages`` when the run recorded prompts
(``record_prompts``), so a replay sends the very same requests.
"""

from __future__ import annotations

from pathlib import Path

import orjson

from loadtest.errors import ResultFileError, UsageError
from loadtest.model.io import JsonLines
from loadtest.model.json import JsonObject

__all__ = ["export_trace", "trace_lines"]


def trace_lines(requests_jsonl: Path) -> list[JsonObject]:
    """The trace of a run's ``requests.jsonl`` (lines without a send time are skipped)."""
    try:
        rows = [
            r for r in JsonLines(requests_jsonl) if isinstance(r.get("intended_ms"), int | float)
        ]
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


def export_trace(run_dir: str | Path, out: str | Path | None = None) -> Path:
    """Write the run's trace (default ``RUN_DIR/trace.jsonl``); returns its path."""
    folder = Path(run_dir)
    target = Path(out) if out is not None else folder / "trace.jsonl"
    lines = trace_lines(folder / "requests.jsonl")
    target.write_bytes(b"".join(orjson.dumps(x) + b"\n" for x in lines))
    return target
