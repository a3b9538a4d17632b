"""Files derived from packaged data sets, kept under the cache folder, keyed by content.

A derived file (the first turns of ShareGPT, its multi-turn conversations) is named by
what it is made from: the SHA-256 of the source file's bytes, not its path or mtime, so
that every virtual environment holding the same data set shares one cached copy. When a
new copy is written, the older copies of the same derived data (another source version,
an older naming) are removed.

Hashing the 125 MB ShareGPT file costs several times what reading the derived file does
(docs/benchmarks.md): each source's digest is remembered in ``digests.json`` by its
path, size and mtime, so it is computed once per installed file (a first run also pays
seconds of parsing), not at every start.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
from pathlib import Path

import orjson

from loadtest.errors import DatasetError

__all__ = ["cache_dir", "derived_path", "read_derived", "source_digest", "write_derived"]

_DIGESTS = "digests.json"
_DIGEST_CHARS = 16
"""Of the hex SHA-256 in a file name: 64 bits tell data set versions apart."""


def cache_dir() -> Path:
    """Where loadtest keeps derived data (``$LOADTEST_CACHE`` or the XDG cache)."""
    env = os.environ.get("LOADTEST_CACHE")
    if env:
        return Path(env)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "loadtest"


def source_digest(path: Path) -> str:
    """The hex SHA-256 of ``path``'s bytes, remembered while its size and mtime hold."""
    st = path.stat()
    stamp = [st.st_size, st.st_mtime_ns]
    key = str(path.resolve())
    known = _read_digests()
    entry = known.get(key)
    if isinstance(entry, dict) and entry.get("stamp") == stamp:
        digest = entry.get("sha256")
        if isinstance(digest, str):
            return digest
    with open(path, "rb") as f:
        digest = hashlib.file_digest(f, "sha256").hexdigest()
    # Sources that are gone (a deleted venv) are forgotten here, so the file stays small.
    kept = {k: v for k, v in known.items() if k != key and Path(k).exists()}
    kept[key] = {"stamp": stamp, "sha256": digest}
    _write_atomically(cache_dir() / _DIGESTS, orjson.dumps(kept))
    return digest


def derived_path(name: str, version: int, source: Path) -> Path:
    """The cache file of derived data ``name`` (format ``version``) made from ``source``.

    ``DatasetError`` naming ``source`` when it cannot be read.
    """
    try:
        digest = source_digest(source)
    except OSError as exc:
        raise DatasetError(f"{source}: cannot read the file ({exc.strerror})") from exc
    return cache_dir() / f"{name}-v{version}-{digest[:_DIGEST_CHARS]}.json"


def read_derived(path: Path) -> bytes | None:
    """The cached bytes, or None when there are none (or they cannot be read)."""
    try:
        return path.read_bytes()
    except OSError:
        return None


def write_derived(name: str, path: Path, data: bytes) -> None:
    """Write ``path`` atomically, then remove the other copies of the same derived data.

    Best effort: a read-only cache folder leaves the run working, just uncached.
    """
    if not _write_atomically(path, data):
        return
    # ``name-v<version>-<key>.json``: this naming and the older size-mtime one; another
    # data set's files (``sharegpt-conv-...`` beside ``sharegpt-...``) do not match.
    stale = re.compile(rf"{re.escape(name)}-v\d+-[0-9a-f-]+\.json")
    for other in path.parent.iterdir():
        if other != path and stale.fullmatch(other.name):
            with contextlib.suppress(OSError):
                other.unlink()


def _read_digests() -> dict[str, object]:
    try:
        known = orjson.loads((cache_dir() / _DIGESTS).read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return {}
    return known if isinstance(known, dict) else {}


def _write_atomically(path: Path, data: bytes) -> bool:
    # A temporary name of this process: two runs filling the cache at once do not
    # write into one file; each renames a whole one into place.
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_bytes(data)
        tmp.replace(path)
    except OSError:
        with contextlib.suppress(OSError):
            tmp.unlink()
        return False
    return True
