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
from pathlib import Path

from loadtest.errors import MissingExtraError, UsageError

__all__ = ["DEFAULT_DRAFT_LAYERS", "build_early_exit", "ensure_early_exit", "file_sha256"]

DEFAULT_DRAFT_LAYERS = 12
"""Blocks kept by default, of the target's 18: the shallowest exit tried whose drafts the
target accepts often. On two prompts at temperature 0 (32 tokens, 3 drafted per step),
4 and 9 blocks were accepted 0 times, 12 blocks 61%, 14 58%, 16 80%: the blocks before
the last third do not yet speak the output head's language. No early exit of this model
is much cheaper than the target: the shared 262,144 x 640 output head is about 60% of a
token's multiply-adds, and 12 blocks plus the head are about 87% of the target's."""

_SKIPPED_FIELDS = ("GGUF.", "general.architecture")
"""Fields the writer makes itself (header counts, version, the architecture key)."""


def build_early_exit(target: Path, layers: int, out: Path) -> Path:
    """Write to ``out`` a copy of ``target`` that keeps only its first ``layers`` blocks."""
    try:
        from gguf import GGUFReader, GGUFValueType, GGUFWriter
    except ImportError as exc:
        raise MissingExtraError("building a draft model (PyPI gguf)", "llama") from exc

    reader = GGUFReader(target)
    arch_field = reader.get_field("general.architecture")
    if arch_field is None:
        raise UsageError(f"{target} is not a model GGUF (no general.architecture)")
    arch = str(arch_field.contents())
    block_key = f"{arch}.block_count"
    blocks = reader.get_field(block_key)
    if blocks is None:
        raise UsageError(f"{target} has no {block_key}")
    total = int(blocks.contents())
    if not 1 <= layers <= total:
        raise UsageError(f"--draft-layers must be between 1 and {total}, not {layers}")

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
