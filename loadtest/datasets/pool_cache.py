"""A compact cache of a scenario's prompt pool, so that the first request does not wait
for the data sets to be parsed again.

Building the default scenario's pool parses 12.8 MB of ShareGPT rows twice, 1,058 BFCL
questions and their schemas and HumanEval: most of the time between the command and its
first request (docs/benchmarks.md). The built pool is kept as one msgpack file
(``pools/<key>.msgpack`` under the cache folder), each prompt its own encoded item:
reading it back decodes only the list of items; a prompt is decoded when it is first
drawn (``LazyPrompts``).

The key is everything the pool is made from: the sources' specs, the seed and the
``max_tokens`` rules, the stamp (path, size, mtime) of every file a source reads, and
the stamp of loadtest's own data-set code, so that an edited loader or an updated data
package is never served from an older copy. Only sources whose plugin says what it
reads are cached (loadtest's packaged and file kinds, not a third-party plugin's, not
the lengths cut with an endpoint's tokenizer). Best effort throughout: a cache that
cannot be read or written leaves the run working, uncached.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import overload

import msgspec

from loadtest.config.scenario import Scenario
from loadtest.config.sources import source_plugin
from loadtest.datasets.cache import cache_dir
from loadtest.errors import LoadtestError
from loadtest.model.prompt import Prompt

__all__ = ["LazyPrompts", "pool_key", "read_pool", "write_pool"]

_FORMAT = 1
_KEEP = 8
"""Pool files kept: the newest, one per scenario and data set version a user runs."""
_CODE = Path(__file__).parent
_MODEL = Path(__file__).parents[1] / "model" / "prompt.py"

Groups = list[tuple[float, Sequence[Prompt]]]
_decode_groups = msgspec.msgpack.Decoder(
    tuple[dict[str, int], list[tuple[float, list[msgspec.Raw]]]]
)
_decode_prompt = msgspec.msgpack.Decoder(Prompt)
_encoder = msgspec.msgpack.Encoder()


def file_stamp(path: Path | str) -> str:
    """``path:size:mtime_ns``, what a cache key knows of one input file."""
    st = Path(path).stat()
    return f"{path}:{st.st_size}:{st.st_mtime_ns}"


def pool_key(scenario: Scenario) -> str | None:
    """The cache key of the scenario's pool, or None when a source cannot be cached."""
    parts: list[str] = [f"format {_FORMAT}", repr(scenario.seed)]
    parts += [repr((scenario.max_tokens, scenario.max_tokens_override))]
    try:
        for spec in scenario.sources:
            reads = getattr(source_plugin(spec.kind), "reads", None)
            if reads is None:
                return None
            parts.append(repr(spec))
            parts += reads(spec)
        parts += [file_stamp(p) for p in sorted(_CODE.glob("*.py"))]
        parts.append(file_stamp(_MODEL))
    except (OSError, ImportError, LookupError, ValueError, LoadtestError):
        return None  # an input that cannot be stamped is loaded, and reports its error
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:32]


def _path(key: str) -> Path:
    return cache_dir() / "pools" / f"{key}.msgpack"


def read_pool(key: str) -> tuple[Groups, dict[str, int]] | None:
    """The cached groups (weight, prompts) and counts, or None."""
    try:
        counts, groups = _decode_groups.decode(_path(key).read_bytes())
    except (OSError, msgspec.DecodeError, msgspec.ValidationError):
        return None
    return [(w, LazyPrompts(items)) for w, items in groups], counts


def write_pool(key: str, groups: Groups, counts: dict[str, int]) -> None:
    """Keep the pool under ``key``; the oldest pools beyond the newest few go."""
    path = _path(key)
    body = [(w, [msgspec.Raw(_encoder.encode(p)) for p in ps]) for w, ps in groups]
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")  # two runs, two temporaries
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_bytes(_encoder.encode((counts, body)))
        tmp.replace(path)
        pools = sorted(path.parent.glob("*.msgpack"), key=lambda p: p.stat().st_mtime_ns)
        for old in pools[:-_KEEP]:
            old.unlink()
    except OSError:
        with contextlib.suppress(OSError):
            tmp.unlink()


class LazyPrompts(Sequence[Prompt]):
    """A source's prompts, each decoded the first time it is read."""

    def __init__(self, items: list[msgspec.Raw]) -> None:
        self._items = items
        self._decoded: list[Prompt | None] = [None] * len(items)

    def __len__(self) -> int:
        return len(self._items)

    @overload
    def __getitem__(self, i: int) -> Prompt: ...
    @overload
    def __getitem__(self, i: slice) -> list[Prompt]: ...
    def __getitem__(self, i: int | slice) -> Prompt | list[Prompt]:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        p = self._decoded[i]
        if p is None:
            p = self._decoded[i] = _decode_prompt.decode(self._items[i])
        return p

    def __iter__(self) -> Iterator[Prompt]:
        return (self[i] for i in range(len(self)))
