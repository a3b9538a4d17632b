"""A draft model for the shipped target, built from the target itself (an early exit).

Nobody ships a small model that shares Gemma 3 270M's vocabulary, so the draft is cut
from the target: the metadata copied, ``<arch>.block_count`` set to N, the first N
transformer blocks (``blk.{i}.*`` for i < N) and every non-block tensor (the shared
token embedding, which is also the output head, and the final norm) copied raw with their
quantization types. The vocabulary is then the target's own, which llama.cpp requires of
a draft. The file is written with ggml's own reader and writer (PyPI ``gguf``), once,
into the same cache as the target, named by the target's hash and N.
"""

from __future__ import annotations

import hashlib
import os
import struct
from pathlib import Path
from typing import BinaryIO

from loadtest.errors import MissingExtraError, UsageError

__all__ = [
    "DEFAULT_DRAFT_LAYERS",
    "block_count",
    "build_early_exit",
    "ensure_early_exit",
    "file_sha256",
]

DEFAULT_DRAFT_LAYERS = 12
"""Blocks kept by default, of the target's 18: the shallowest exit tried whose drafts the
target accepts often (how often each depth tried was accepted: docs/llama.md and
docs/benchmarks.md): the blocks before the last third do not yet speak the output head's
language. No early exit of this model is much cheaper than the target: the shared
262,144 x 640 output head is about 60% of a token's multiply-adds, and 12 blocks plus
the head are about 87% of the target's."""

_SKIPPED_FIELDS = ("GGUF.", "general.architecture")
"""Fields the writer makes itself (header counts, version, the architecture key)."""


_SCALARS = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
"""Bytes of each fixed-size GGUF value type (uint8 ... float64, bool); 8 is a string and
9 an array."""


def _skip_value(f: BinaryIO, vtype: int) -> None:
    if vtype in _SCALARS:
        f.seek(_SCALARS[vtype], os.SEEK_CUR)
    elif vtype == 8:
        (n,) = struct.unpack("<Q", f.read(8))
        f.seek(n, os.SEEK_CUR)
    elif vtype == 9:
        item, count = struct.unpack("<IQ", f.read(12))
        if item in _SCALARS:
            f.seek(_SCALARS[item] * count, os.SEEK_CUR)
        else:
            for _ in range(count):
                _skip_value(f, item)
    else:
        raise ValueError(f"unknown GGUF value type {vtype}")


def block_count(target: Path) -> tuple[str, int]:
    """(architecture, transformer blocks) from the GGUF header, reading no tensor data.

    ggml's reader parses the whole vocabulary first (many seconds for Gemma 3's 262,144
    tokens; docs/benchmarks.md): a bad ``--draft-layers`` is said before that. GGUF v2+:
    magic, version, tensor and key counts, then (key, type, value) triples, little-endian.
    """
    arch: str | None = None
    found: dict[str, int] = {}
    try:
        with target.open("rb") as f:
            magic, _version, _tensors, n_kv = struct.unpack("<4sIQQ", f.read(24))
            if magic != b"GGUF":
                raise UsageError(f"{target} is not a GGUF file")
            for _ in range(n_kv):
                (klen,) = struct.unpack("<Q", f.read(8))
                key = f.read(klen).decode("utf-8", "replace")
                (vtype,) = struct.unpack("<I", f.read(4))
                if key == "general.architecture" and vtype == 8:
                    (n,) = struct.unpack("<Q", f.read(8))
                    arch = f.read(n).decode()
                elif key.endswith(".block_count") and vtype in (4, 5, 10, 11):
                    fmt = {4: "<I", 5: "<i", 10: "<Q", 11: "<q"}[vtype]
                    found[key] = struct.unpack(fmt, f.read(_SCALARS[vtype]))[0]
                else:
                    _skip_value(f, vtype)
                if arch is not None and f"{arch}.block_count" in found:
                    return arch, found[f"{arch}.block_count"]
    except (struct.error, ValueError, UnicodeDecodeError) as exc:
        raise UsageError(f"{target} is not a readable GGUF file: {exc}") from exc
    if arch is None:
        raise UsageError(f"{target} is not a model GGUF (no general.architecture)")
    raise UsageError(f"{target} has no {arch}.block_count")


def build_early_exit(target: Path, layers: int, out: Path) -> Path:
    """Write to ``out`` a copy of ``target`` that keeps only its first ``layers`` blocks."""
    try:
        from gguf import GGUFReader, GGUFValueType, GGUFWriter
    except ImportError as exc:
        raise MissingExtraError("building a draft model (PyPI gguf)", "llama") from exc

    arch, total = block_count(target)
    if not 1 <= layers <= total:
        raise UsageError(f"--draft-layers must be between 1 and {total}, not {layers}")
    block_key = f"{arch}.block_count"
    reader = GGUFReader(target)

    tmp = out.with_name(f"{out.name}.{os.getpid()}.partial")
    writer = GGUFWriter(tmp, arch)
    try:
        for name, field in reader.fields.items():
            if name.startswith(_SKIPPED_FIELDS):
                continue
            value = layers if name == block_key else field.contents()
            vtype = field.types[0]
            sub = field.types[-1] if vtype == GGUFValueType.ARRAY else None
            writer.add_key_value(name, value, vtype, sub_type=sub)
        for t in reader.tensors:
            if t.name.startswith("blk.") and int(t.name.split(".")[1]) >= layers:
                continue
            # Raw bytes with the tensor's own type: quantized blocks are not re-encoded.
            writer.add_tensor(t.name, t.data, raw_dtype=t.tensor_type)
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_tensors_to_file()
    finally:
        writer.close()
    os.replace(tmp, out)  # readers never see a half-written file
    return out


def file_sha256(path: Path, memo_dir: Path) -> str:
    """The file's sha256, remembered in ``memo_dir`` by path, size and mtime."""
    st = path.stat()
    stamp = f"{st.st_size} {st.st_mtime_ns}"
    memo = memo_dir / (hashlib.sha1(str(path.resolve()).encode()).hexdigest() + ".sha256")
    if memo.exists():
        known_stamp, _, digest = memo.read_text().strip().rpartition(" ")
        if known_stamp == stamp:
            return digest
    h = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    memo_dir.mkdir(parents=True, exist_ok=True)
    memo.write_text(f"{stamp} {h.hexdigest()}\n")
    return h.hexdigest()


def ensure_early_exit(target: Path, cache_dir: Path, layers: int = DEFAULT_DRAFT_LAYERS) -> Path:
    """The early-exit draft of ``target``, built into ``cache_dir`` at first use."""
    folder = cache_dir
    digest = file_sha256(target, folder / "hashes")
    out = folder / f"{target.stem}.{digest[:16]}.early{layers}.gguf"
    if not out.exists():
        build_early_exit(target, layers, out)
    return out
