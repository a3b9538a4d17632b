"""The figure catalogue of docs/metrics.md, read as data: its rows, and the figures of a
result file that none defines.

Every figure loadtest writes (``summary.json``, ``capacity.json``, ``comparison.json``,
``decision.json``) is defined once, in one row of a table under "The catalogue" in
docs/metrics.md. A row's path is a pattern over the file's keys:

- ``a.b`` a key under a key, ``[]`` an item of a list;
- ``*`` any one key (a category, an error class, a source name);
- ``{x,y}`` one of the words listed (``{a,b}.completion_rate``, ``ttft_ms_{p50,p95}``);
- ``<metric>`` one of the names of the metric table, ``<stats>`` one of the keys of a
  statistics block (count, min, mean, p50 ... max), ``<pcts>`` one of p50, p95, p99;
- ``**`` what follows, any depth (a plugin's own object).

The suite walks every result file a test writes (``tests/conftest.py``), so a figure that
appears in none of these rows fails the test that produced it; ``tests/test_catalogue.py``
checks the rows against the published schemas.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import get_args

from loadtest.model.stats import StatKey

ROOT = Path(__file__).resolve().parent.parent
METRICS_MD = ROOT / "docs" / "metrics.md"

FILES = (
    "summary.json",
    "capacity.json",
    "comparison.json",
    "decision.json",
    "server-sweep.json",
)
"""The result files the catalogue covers, each a table of its own."""
COLUMNS = ("path", "printed as", "unit", "source", "window", "resolution", "definition")
NAME_COLUMNS = ("metric", "printed as", "unit", "source", "window", "resolution", "definition")
SOURCES = frozenset(
    {
        "client",
        "server counter",
        "server gauge",
        "server histogram",
        "server timings",
        "process",
        "machine",
        "scenario",
        "derived",
    }
)
"""Where a figure comes from: loadtest's own clock and counts (client), the endpoint's
``/metrics`` (counter, gauge, histogram), its answers' own ``timings``, a managed
deployment's process tree, the machine's energy counters, the scenario or flags as given,
or a calculation over other rows (derived)."""

STATS = tuple(get_args(StatKey))
PCTS = ("p50", "p95", "p99")
_SEP = "\x1f"
"""Between the keys of a path: a key may hold a dot (a file name as a source name)."""


@dataclass(frozen=True, slots=True)
class Row:
    """One figure, or one pattern of figures, as the catalogue defines it."""

    file: str
    path: str
    cells: Mapping[str, str]


@dataclass(frozen=True, slots=True)
class Catalogue:
    """Every row, by file, and the metric names."""

    rows: tuple[Row, ...]
    metrics: tuple[Row, ...]

    @property
    def metric_names(self) -> tuple[str, ...]:
        return tuple(r.path for r in self.metrics)

    def of(self, file: str) -> tuple[Row, ...]:
        return tuple(r for r in self.rows if r.file == file)


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def _code(cell: str) -> str:
    return cell.strip().strip("`")


def parse(text: str) -> Catalogue:
    """The catalogue's tables: one under each ``### `FILE` `` heading, and the metric
    names' table; ``ValueError`` naming the line of a malformed row."""
    rows: list[Row] = []
    metrics: list[Row] = []
    file: str | None = None
    header: tuple[str, ...] | None = None
    in_catalogue = False
    for n, line in enumerate(text.splitlines(), 1):
        if line.startswith("## "):
            in_catalogue = line.strip() == "## The catalogue"
            file = header = None
            continue
        if not in_catalogue:
            continue
        if line.startswith("### "):
            found = re.search(r"`([^`]+\.json)`", line)
            file = found.group(1) if found and found.group(1) in FILES else None
            header = None
            continue
        if not line.startswith("|"):
            header = None
            continue
        cells = _cells(line)
        if header is None:
            header = tuple(cells)
            continue
        if set("".join(cells)) <= set("-: "):
            continue
        if header not in (COLUMNS, NAME_COLUMNS):
            continue  # a table of another kind (the statistics block's keys)
        if len(cells) != len(header):
            raise ValueError(f"docs/metrics.md:{n}: {len(cells)} cells, not {len(header)}")
        values = dict(zip(header, cells, strict=True))
        path = _code(values.pop(header[0]))
        if header == NAME_COLUMNS:
            metrics.append(Row("metric", path, values))
        elif file is not None:
            rows.append(Row(file, path, values))
        else:
            raise ValueError(f"docs/metrics.md:{n}: a row under no `FILE.json` heading")
    return Catalogue(tuple(rows), tuple(metrics))


@functools.cache
def catalogue() -> Catalogue:
    """docs/metrics.md's catalogue, read once."""
    return parse(METRICS_MD.read_text())


def _groups(text: str) -> Iterator[str]:
    """``text`` cut into tokens: a ``{...}`` group whole (groups nest), ``**``, ``*``,
    ``[]``, ``.``, a ``<set>``, or a run of plain characters."""
    i = 0
    while i < len(text):
        if text[i] == "{":
            depth, j = 0, i
            while True:
                depth += {"{": 1, "}": -1}.get(text[j], 0)
                if depth == 0:
                    break
                j += 1
                if j == len(text):
                    raise ValueError(f"docs/metrics.md: {text}: an unclosed {{")
            yield text[i : j + 1]
            i = j + 1
            continue
        found = re.match(r"\*\*|\*|\[\]|\.|<[a-z]+>|[^{*.<\[]+", text[i:])
        if not found:
            raise ValueError(f"docs/metrics.md: {text}: cannot read it at {text[i:]!r}")
        yield found.group(0)
        i += len(found.group(0))


def _top_level(group: str) -> list[str]:
    """A ``{x,y}`` group's alternatives (commas inside a nested group do not split)."""
    parts, depth, start = [], 0, 1
    for i, c in enumerate(group[1:-1], 1):
        depth += {"{": 1, "}": -1}.get(c, 0)
        if c == "," and depth == 0:
            parts.append(group[start:i])
            start = i + 1
    parts.append(group[start:-1])
    return parts


def _regex(path: str, metric_names: tuple[str, ...], schema: bool) -> str:
    named = {"<metric>": metric_names, "<stats>": STATS, "<pcts>": PCTS}
    out = []
    for token in _groups(path):
        if token == ".":
            out.append(_SEP)
        elif token == "[]":
            out.append(_SEP + re.escape("[]"))
        elif token == "**":
            out.append(".+")
        elif token == "*":
            out.append(f"[^{_SEP}]+")
        elif token.startswith("<"):
            if token not in named:
                raise ValueError(f"docs/metrics.md: {path}: no such set as {token}")
            words = [re.escape(w) for w in named[token]]
            # In a schema a mapping's keys are all ``*``: a set of them matches it.
            out.append("(?:" + "|".join(words + [r"\*"] * schema) + ")")
        elif token.startswith("{"):
            alts = [_regex(a, metric_names, schema) for a in _top_level(token)]
            plain = all(re.fullmatch(r"\w+", a) for a in _top_level(token))
            out.append("(?:" + "|".join(alts + [r"\*"] * (schema and plain)) + ")")
        else:
            out.append(re.escape(token))
    return "".join(out)


def pattern(path: str, metric_names: tuple[str, ...], *, schema: bool = False) -> re.Pattern[str]:
    """A row's path as a regular expression over a path's keys joined by ``_SEP``.

    ``schema``: matched against a schema's paths, where a mapping's keys are ``*``: a
    named set or a list of words then matches ``*`` too.
    """
    return re.compile(_regex(path, metric_names, schema))


def expanded(path: str) -> list[str]:
    """A row's path once per alternative of each ``{x,y}`` group, each kept in braces
    (``{x}``: still a word that may be a mapping's key in a schema)."""
    paths = [""]
    for token in _groups(path):
        alts = _top_level(token) if token.startswith("{") else [token]
        wrap = "{%s}" if token.startswith("{") else "%s"
        paths = [p + wrap % alt for p in paths for alt in alts]
    return paths


def shown(keys: tuple[str, ...]) -> str:
    """A path as the catalogue writes it: ``faults[].before.requests``."""
    return ".".join(keys).replace(".[]", "[]")


def leaves(value: object, keys: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    """The path of every number and boolean in a decoded JSON document."""
    if isinstance(value, bool | int | float):
        yield keys
    elif isinstance(value, Mapping):
        for k, v in value.items():
            yield from leaves(v, (*keys, str(k)))
    elif isinstance(value, list):
        for item in value:
            yield from leaves(item, (*keys, "[]"))


def undefined(
    file: str, paths: set[tuple[str, ...]], cat: Catalogue | None = None, *, schema: bool = False
) -> list[str]:
    """The paths no row of ``file``'s table matches, as the catalogue writes them."""
    cat = cat or catalogue()
    compiled = [pattern(r.path, cat.metric_names, schema=schema) for r in cat.of(file)]
    return sorted(shown(p) for p in paths if not any(c.fullmatch(_SEP.join(p)) for c in compiled))


def file_kind(path: Path) -> str | None:
    """Which table of the catalogue a result file's figures are in (None: not a result
    file the catalogue covers). ``comparison-candidate-k4.json`` is a comparison."""
    if path.name.startswith("comparison") and path.suffix == ".json":
        return "comparison.json"
    return path.name if path.name in FILES else None


def schema_leaves(schema: Mapping[str, object]) -> set[tuple[str, ...]]:
    """The path of every number, integer and boolean a JSON Schema (as msgspec writes
    them: ``$defs``, ``$ref``, ``anyOf``) allows; a mapping's keys are ``*``."""
    defs = schema.get("$defs", {})
    assert isinstance(defs, Mapping)
    found: set[tuple[str, ...]] = set()

    def walk(node: Mapping[str, object], keys: tuple[str, ...], seen: frozenset[str]) -> None:
        ref = node.get("$ref")
        if isinstance(ref, str):
            name = ref.rsplit("/", 1)[-1]
            if name not in seen:  # a recursive type is walked once
                walk(defs[name], keys, seen | {name})
            return
        for alts in (node.get("anyOf"), node.get("oneOf")):
            if isinstance(alts, list):
                for alt in alts:
                    walk(alt, keys, seen)
                return
        kind = node.get("type")
        kinds = kind if isinstance(kind, list) else [kind]
        if {"number", "integer", "boolean"} & set(kinds):
            found.add(keys)
        if "object" in kinds:
            props = node.get("properties", {})
            assert isinstance(props, Mapping)
            for k, v in props.items():
                walk(v, (*keys, k), seen)
            more = node.get("additionalProperties")
            if isinstance(more, Mapping) and more:
                walk(more, (*keys, "*"), seen)
        if "array" in kinds:
            items = node.get("items")
            if isinstance(items, Mapping):
                walk(items, (*keys, "[]"), seen)

    walk(schema, (), frozenset())
    return found
