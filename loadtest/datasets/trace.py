"""Request traces: JSONL, one request per line, replayed at their own timestamps.

A line is ``{"timestamp": ms, "input_length": n, "output_length": m}`` with optional
``hash_ids`` (shared prefix blocks of ``block_size`` tokens: the Mooncake trace format,
taken as is), or carries the request itself (``prompt`` text or chat ``messages``;
``output_length`` or ``max_tokens`` for the answer). Requests keep their order in time;
a line out of order is sorted in place, ties keep the file's order.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import orjson

from loadtest.datasets.synthetic import Corpus, exact_prompt
from loadtest.datasets.tokenizer import Tokenizer
from loadtest.errors import DatasetError
from loadtest.model.prompt import Prompt

__all__ = ["TraceEntry", "read_trace", "trace_prompts"]

_SLACK = 32


@dataclass(frozen=True, slots=True)
class TraceEntry:
    """One request of a trace."""

    line: int
    timestamp_ms: float
    input_length: int | None = None
    output_length: int | None = None
    hash_ids: tuple[int, ...] = ()
    prompt: str | None = None
    messages: tuple[dict[str, Any], ...] | None = None

    @property
    def needs_tokenizer(self) -> bool:
        """True when the text is to be made from lengths (not given in the line)."""
        return self.prompt is None and self.messages is None


def read_trace(path: Path, limit: int | None = None) -> list[TraceEntry]:
    """Parse a trace file, in time order; errors name the file and line."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise DatasetError(f"{path}: cannot read the trace ({exc.strerror})") from exc
    entries = []
    for lineno, line in enumerate(raw.splitlines(), start=1):
        if not line.strip():
            continue
        entries.append(_entry(line, f"{path}:{lineno}", lineno))
        if limit is not None and len(entries) >= limit:
            break
    if not entries:
        raise DatasetError(f"{path}: the trace holds no request")
    entries.sort(key=lambda e: e.timestamp_ms)  # stable: ties keep the file's order
    return entries


def _entry(line: bytes, where: str, lineno: int) -> TraceEntry:
    try:
        obj = orjson.loads(line)
    except orjson.JSONDecodeError as exc:
        raise DatasetError(f"{where}: not JSON ({exc})") from exc
    if not isinstance(obj, dict):
        raise DatasetError(f"{where}: expected a JSON object")
    ts = obj.get("timestamp")
    if isinstance(ts, bool) or not isinstance(ts, int | float) or ts < 0:
        raise DatasetError(f"{where}: 'timestamp' must be a number of ms >= 0, got {ts!r}")
    n_in = _length(obj, "input_length", where)
    n_out = _length(obj, "output_length", where) or _length(obj, "max_tokens", where)
    hashes = obj.get("hash_ids", [])
    if not isinstance(hashes, list) or not all(
        isinstance(h, int) and not isinstance(h, bool) for h in hashes
    ):
        raise DatasetError(f"{where}: 'hash_ids' must be a list of integers")
    prompt = obj.get("prompt")
    if prompt is not None and not isinstance(prompt, str):
        raise DatasetError(f"{where}: 'prompt' must be a string")
    messages = obj.get("messages")
    if messages is not None and not (
        isinstance(messages, list) and messages and all(isinstance(m, dict) for m in messages)
    ):
        raise DatasetError(f"{where}: 'messages' must be a non-empty list of objects")
    if prompt is None and messages is None and n_in is None:
        raise DatasetError(f"{where}: a line needs 'input_length', 'prompt' or 'messages'")
    return TraceEntry(
        line=lineno,
        timestamp_ms=float(ts),
        input_length=n_in,
        output_length=n_out,
        hash_ids=tuple(hashes),
        prompt=prompt,
        messages=tuple(messages) if messages is not None else None,
    )


def _length(obj: dict[str, Any], key: str, where: str) -> int | None:
    v = obj.get(key)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int) or v < 1:
        raise DatasetError(f"{where}: {key!r} must be an integer >= 1, got {v!r}")
    return v


def trace_prompts(
    entries: list[TraceEntry], tok: Tokenizer | None, block_size: int, origin: str
) -> list[Prompt]:
    """One prompt per entry, in order: given text as is, else text of the exact length.

    Equal ``hash_ids`` give equal blocks of text, so requests that shared a prefix in the
    trace share it here; the tokens past the blocks are the request's own.
    """
    corpus = None
    if any(e.needs_tokenizer for e in entries):
        if tok is None:
            raise DatasetError(f"{origin}: lines with lengths only need a tokenizer")
        longest = max(e.input_length or 0 for e in entries)
        corpus = Corpus.build(tok, max(4 * longest, 20_000) + _SLACK)
    rng = random.Random(origin)
    return [_prompt(e, tok, corpus, block_size, rng, origin) for e in entries]


def _prompt(
    e: TraceEntry,
    tok: Tokenizer | None,
    corpus: Corpus | None,
    block_size: int,
    rng: random.Random,
    origin: str,
) -> Prompt:
    base = Prompt(
        id=f"trace-{e.line}",
        source="trace",
        category="trace",
        messages=(),
        max_tokens=e.output_length,
        sampling={"ignore_eos": True, "min_tokens": e.output_length} if e.output_length else None,
    )
    if e.messages is not None:
        return replace(base, messages=e.messages)
    if e.prompt is not None:
        return replace(base, messages=({"role": "user", "content": e.prompt},), text=e.prompt)
    assert tok is not None
    assert corpus is not None
    assert e.input_length is not None
    n = e.input_length
    ids: list[int] = []
    for h in e.hash_ids:
        if len(ids) >= n:
            break
        # A block's text depends on its hash id only.
        ids += corpus.slice(random.Random(h).randrange(len(corpus.ids)), block_size)
    ids = ids[:n] + corpus.slice(rng.randrange(len(corpus.ids)), max(0, n - len(ids)) + _SLACK)
    text = exact_prompt(tok, ids, n, f"{origin}:{e.line}")
    return replace(base, messages=({"role": "user", "content": text},), text=text, input_tokens=n)
