"""Reading and writing ``summary.json`` through the model, and its JSON Schema.

Every reader goes through ``load_summary``: a file that is not JSON or breaks the model
fails here, once, with the file and the field named, instead of as a ``KeyError`` deep
in a report. ``summary_schema`` is generated from the same types, so the published
schema (``docs/summary.schema.json``) cannot drift from what the code writes.

``JsonLines`` is the one reader of the JSONL files a run streams (``requests.jsonl``,
``metrics.jsonl``): a killed run can leave its last line torn, and every reader must
count that line the same way rather than each crash on it or skip it silently.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TypeVar, cast

import msgspec
import orjson

from loadtest.errors import ResultFileError
from loadtest.model.blocks import summary_type
from loadtest.model.decision import Decision
from loadtest.model.json import JsonObject
from loadtest.model.search import SearchResult
from loadtest.model.summary import RunStart, Summary
from loadtest.model.sweep import CapacityResult

__all__ = [
    "JsonLines",
    "decision_schema_bytes",
    "dump_summary",
    "load_capacity",
    "load_decision",
    "load_run_start",
    "load_search",
    "load_summary",
    "parse_summary",
    "run_requests",
    "summary_schema",
    "summary_schema_bytes",
]

T = TypeVar("T")


def _parse(data: bytes | JsonObject, kind: type[T], source: str, what: str) -> T:
    try:
        if isinstance(data, bytes):
            return msgspec.json.decode(data, type=kind)
        return msgspec.convert(data, kind)
    except msgspec.ValidationError as exc:
        # msgspec says "Expected `int`, got `str` - at `$.requests.sent`".
        raise ResultFileError(f"{source}: not a loadtest {what}: {exc}") from exc
    except msgspec.DecodeError as exc:
        raise ResultFileError(f"{source}: not JSON: {exc}") from exc


def _read(path: Path, what: str) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise ResultFileError(f"{path}: cannot read the {what}: {exc.strerror or exc}") from exc


def parse_summary(data: bytes | JsonObject, source: str = "summary.json") -> Summary:
    """A summary from JSON bytes or an already decoded object; ``ResultFileError`` naming
    ``source`` and the offending field when it breaks the model (``Summary`` with every
    registered block's own: ``model.blocks.summary_type``)."""
    return cast(Summary, _parse(data, summary_type(), source, "summary"))


def load_summary(path: str | Path) -> Summary:
    """Read and validate a ``summary.json`` (or a run folder holding one)."""
    p = Path(path)
    if p.is_dir():
        p = p / "summary.json"
    return parse_summary(_read(p, "summary"), str(p))


def load_capacity(path: str | Path) -> CapacityResult:
    """Read and validate a sweep's ``capacity.json``."""
    p = Path(path)
    return _parse(_read(p, "capacity table"), CapacityResult, str(p), "capacity table")


def load_search(path: str | Path) -> SearchResult:
    """Read and validate a capacity search's ``capacity.json`` (``sweep --search``)."""
    p = Path(path)
    return _parse(_read(p, "capacity search"), SearchResult, str(p), "capacity search")


def load_decision(path: str | Path) -> Decision:
    """Read and validate an ab sweep's ``decision.json`` (or its folder)."""
    p = Path(path)
    if p.is_dir():
        p = p / "decision.json"
    return _parse(_read(p, "decision"), Decision, str(p), "decision")


def load_run_start(path: Path) -> RunStart:
    """Read and validate a run's ``run.json`` (``RunStart``)."""
    return _parse(_read(path, "start record"), RunStart, str(path), "start record")


class JsonLines:
    """The JSON objects of a JSONL file, in order; iterate once, then read the counts.

    Lines are written whole (``model.atomic.LineLog``), so only the last can be cut
    short, by a kill in the middle of a write. A last line without its newline that is a
    whole JSON object lost only the newline and is read; any other is ``torn``: counted
    there, never read as a request. A bad line before the last is not a kill's doing:
    ``ResultFileError`` naming the file and the line.
    """

    def __init__(self, path: Path, sent: int | None = None) -> None:
        self.path = path
        self.sent = sent
        """The requests a finished run's summary.json counts (``run_requests``): fewer
        whole lines is a file cut short after the run, ``ResultFileError`` once read."""
        self.lines = 0
        """Complete lines read (blank lines are not lines)."""
        self.torn = 0
        """A last line cut short: 0 or 1."""

    def __iter__(self) -> Iterator[JsonObject]:
        try:
            with open(self.path, "rb") as f:
                for n, raw in enumerate(f, 1):
                    if not raw.strip():
                        continue
                    row = self._row(raw, n)
                    if row is None:
                        self.torn += 1
                        continue
                    self.lines += 1
                    yield row
        except OSError as exc:
            raise ResultFileError(f"{self.path}: cannot read it: {exc.strerror or exc}") from exc
        if self.sent is not None and self.lines < self.sent:
            raise ResultFileError(
                f"{self.path}: {self.lines} whole lines, but summary.json beside it counts "
                f"{self.sent} requests sent: the file was cut short after the run"
            )

    def _row(self, raw: bytes, n: int) -> JsonObject | None:
        whole = raw.endswith(b"\n")
        try:
            row = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            if not whole:
                return None
            raise ResultFileError(f"{self.path}:{n}: not a JSON line ({exc})") from exc
        if not isinstance(row, dict):
            if not whole:
                return None
            raise ResultFileError(f"{self.path}:{n}: not a JSON object")
        return row


def run_requests(folder: Path) -> JsonLines:
    """The ``requests.jsonl`` of a run folder, checked against its ``summary.json``.

    A folder with a summary.json is complete (it is written last), so every request it
    counts has its line; one with fewer was damaged after the run, and a reader would
    otherwise draw partial figures from it without a word. A folder without a readable
    summary.json (a killed run's, to be rebuilt from these very lines) is not checked:
    its readers say what is wrong with the summary themselves.
    """
    sent: int | None = None
    try:
        data = orjson.loads((folder / "summary.json").read_bytes())
        count = data["requests"]["sent"]
        if "rebuilt" not in data and isinstance(count, int):
            sent = count
    except (OSError, orjson.JSONDecodeError, KeyError, TypeError):
        pass
    return JsonLines(folder / "requests.jsonl", sent)


def dump_summary(summary: Summary) -> bytes:
    """The bytes of ``summary.json``: indented, keys sorted (stable diffs between runs)."""
    return orjson.dumps(summary, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS)


def _schema(kind: type, title: str) -> JsonObject:
    schema = msgspec.json.schema(kind)
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = title
    return schema


def _published(schema: JsonObject) -> bytes:
    # As checked in: sorted, indented, with a final newline.
    return orjson.dumps(schema, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS) + b"\n"


def summary_schema() -> JsonObject:
    """The JSON Schema (2020-12) of ``summary.json``, generated from ``Summary`` with every
    registered block's model (``model.blocks.summary_type``: loadtest's and installed
    plugins')."""
    return _schema(summary_type(), "loadtest summary.json")


def summary_schema_bytes() -> bytes:
    """``docs/summary.schema.json`` as it is checked in (sorted, indented, newline)."""
    return _published(summary_schema())


def decision_schema_bytes() -> bytes:
    """``docs/decision.schema.json``: the schema of ``ab --sweep``'s ``decision.json``."""
    return _published(_schema(Decision, "loadtest decision.json"))
