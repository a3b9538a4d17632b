"""Crash-safe files: a killed run leaves whole files and whole lines, never half of one.

``write_atomic``: the bytes go to a temporary file in the same folder, are flushed to
disk, and the file is renamed over the target; a rename within one file system is atomic
on POSIX and on Windows (``os.replace``).

``LineLog``: an append-only JSONL file whose lines reach the kernel only whole. A
buffered file flushes when its buffer fills, which can be in the middle of a line; here
lines are queued and handed over in one write of whole lines, so SIGKILL between two
writes cuts between lines.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

__all__ = ["LineLog", "write_atomic"]


def write_atomic(path: Path, data: bytes | str) -> Path:
    """Write ``data`` (str as UTF-8) to ``path`` atomically; returns ``path``."""
    raw = data.encode("utf-8") if isinstance(data, str) else data
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "wb") as f:
            f.write(raw)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    return path


class LineLog:
    """Append whole lines to a file; ``flush()`` hands the queued lines over at once."""

    def __init__(self, path: Path, flush_bytes: int = 1 << 18) -> None:
        self.path = path
        self._f = open(path, "wb", buffering=0)  # noqa: SIM115 - closed in close()
        self._pending: list[bytes] = []
        self._size = 0
        self._flush_bytes = flush_bytes

    def write(self, line: bytes) -> None:
        """Queue one line (it must end in ``\\n``); flushes past ``flush_bytes``."""
        self._pending.append(line)
        self._size += len(line)
        if self._size >= self._flush_bytes:
            self.flush()

    def flush(self) -> None:
        """Write every queued line."""
        if not self._pending:
            return
        data = memoryview(b"".join(self._pending))
        self._pending.clear()
        self._size = 0
        while data:
            n = self._f.write(data)
            data = data[n or 0 :]

    def close(self) -> None:
        """Flush and close."""
        if not self._f.closed:
            self.flush()
            self._f.close()
