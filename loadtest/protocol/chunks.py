"""The fields of a streamed chat or completions chunk that the reader looks at, typed.

``msgspec`` decodes a chunk straight into these structs, checking each field's type as
it goes, faster than ``orjson.loads`` builds the dictionaries (docs/benchmarks.md), and
the reader then reads attributes instead of looking keys up. Fields it does not name
are skipped unread. A chunk that does not fit (a field of another type, an error
object, anything odd) is not judged here: the reader falls back to ``orjson`` and its
dictionary rules, which give the exact error a bad chunk deserves.
"""

from __future__ import annotations

from typing import Any

import msgspec
from msgspec import UNSET, UnsetType

__all__ = ["CHUNK_DECODER", "Chunk", "decode_chunk"]


class Delta(msgspec.Struct, gc=False):
    content: str | None = None
    reasoning_content: str | None = None
    reasoning: str | None = None
    tool_calls: list[dict[str, Any]] | None = None


class Choice(msgspec.Struct, gc=False):
    delta: Delta | None = None
    text: str | None = None
    """The legacy completions API's token text."""
    finish_reason: str | None = None


class Chunk(msgspec.Struct, gc=False):
    id: str | None = None
    choices: list[Choice] | UnsetType | None = UNSET
    usage: dict[str, Any] | None = None
    timings: dict[str, Any] | None = None
    error: msgspec.Raw | UnsetType = UNSET


CHUNK_DECODER = msgspec.json.Decoder(Chunk)
"""``decode_lines`` takes a read's chunks, newline-delimited, in one call."""


def decode_chunk(data: bytes) -> Chunk | None:
    """The chunk's typed view, or None where it does not fit one (then the reader's
    dictionary rules decide what it is)."""
    try:
        return CHUNK_DECODER.decode(data)
    except msgspec.MsgspecError:
        return None
