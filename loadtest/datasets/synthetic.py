"""Prompts of exact token lengths, cut from real text (the packaged ShareGPT prompts).

Each prompt starts at its own place in the text, so prompts share no prefix by chance;
a source with ``prefix_tokens`` starts every prompt with the same run of tokens instead
(a prefix-cache workload). A fixed output length asks the engine not to stop early
(``ignore_eos``, ``min_tokens``: llama.cpp and vLLM take both; others ignore them).
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from loadtest.config.scenario import SourceSpec
from loadtest.config.workload_tables import LengthSpec, SyntheticKeys
from loadtest.datasets.sharegpt import load_sharegpt_rows
from loadtest.datasets.tokenizer import Tokenizer, cut_to_tokens
from loadtest.errors import DatasetError
from loadtest.model.prompt import Prompt

__all__ = ["DEFAULT_SYNTHETIC_PROMPTS", "Corpus", "exact_prompt", "load_synthetic"]

DEFAULT_SYNTHETIC_PROMPTS = 256
"""Prompts a synthetic source makes when it names no ``limit``."""
_SLACK = 32
"""Tokens beyond the cut, so that the cut can move forward."""
_CHUNK_CHARS = 16_000


@dataclass(frozen=True, slots=True)
class Corpus:
    """A run of real text as token ids, long enough for the longest prompt asked for."""

    ids: tuple[int, ...]

    @classmethod
    def build(cls, tok: Tokenizer, tokens: int) -> Corpus:
        """Tokenize English ShareGPT prompts until there are ``tokens`` of them."""
        rows, _ = load_sharegpt_rows()
        texts = [r["prompt"] for r in rows if r.get("lang") == "en"] or [r["prompt"] for r in rows]
        ids: list[int] = []
        chunk: list[str] = []
        size = 0
        for text in texts:
            chunk.append(text)
            size += len(text)
            if size >= _CHUNK_CHARS:
                ids += tok.encode("\n\n".join(chunk) + "\n\n")
                chunk, size = [], 0
                if len(ids) >= tokens:
                    break
        if chunk and len(ids) < tokens:
            ids += tok.encode("\n\n".join(chunk))
        if len(ids) < tokens:
            raise DatasetError(f"the ShareGPT text holds {len(ids)} tokens; {tokens} needed")
        return cls(tuple(ids))

    def slice(self, start: int, n: int) -> list[int]:
        """``n`` ids from ``start``, wrapping around the end."""
        start %= len(self.ids)
        out = list(self.ids[start : start + n])
        while len(out) < n:
            out += self.ids[: n - len(out)]
        return out


def exact_prompt(tok: Tokenizer, ids: list[int], n: int, origin: str) -> str:
    """The text of ``ids`` cut to exactly ``n`` tokens; a ``DatasetError`` if it will not."""
    text, count = cut_to_tokens(tok, ids, n)
    if count != n:
        raise DatasetError(f"{origin}: could not cut the text to {n} tokens (got {count})")
    return text


def load_synthetic(spec: SourceSpec, tok: Tokenizer) -> list[Prompt]:
    """The prompts of a ``synthetic`` source: lengths drawn (seeded by the source)."""
    w = spec.own(SyntheticKeys)
    n_prompts = spec.limit or DEFAULT_SYNTHETIC_PROMPTS
    rng = random.Random(f"synthetic:{spec.category}")
    corpus = Corpus.build(tok, max(4 * w.input_tokens.max, 20_000) + _SLACK)
    prefix = corpus.slice(0, w.prefix_tokens)
    prompts = []
    for i in range(n_prompts):
        n_in = w.input_tokens.draw(rng)
        start = w.prefix_tokens + rng.randrange(len(corpus.ids))
        ids = prefix + corpus.slice(start, n_in - w.prefix_tokens + _SLACK)
        text = exact_prompt(tok, ids, n_in, f"synthetic source {spec.category!r}")
        prompts.append(_prompt(f"synthetic-{i}", spec.category, text, n_in, w.output_tokens, rng))
    return prompts


def _prompt(
    pid: str, category: str, text: str, n_in: int, out: LengthSpec | None, rng: random.Random
) -> Prompt:
    n_out = out.draw(rng) if out is not None else None
    return Prompt(
        id=pid,
        source="synthetic",
        category=category,
        messages=({"role": "user", "content": text},),
        text=text,
        max_tokens=n_out,
        sampling={"ignore_eos": True, "min_tokens": n_out} if n_out is not None else None,
        input_tokens=n_in,
    )
