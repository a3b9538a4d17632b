"""Prompt sources: packaged data sets (ShareGPT, BFCL, HumanEval) and a user's files."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from loadtest.config.scenario import Scenario, SourceSpec
from loadtest.config.sources import source_plugin
from loadtest.datasets.language import LANGUAGES, detect_language
from loadtest.datasets.pool_cache import pool_key, read_pool, write_pool
from loadtest.datasets.prompt import Prompt, PromptPool
from loadtest.datasets.tokenizer import Tokenizer
from loadtest.errors import DatasetError

__all__ = ["LANGUAGES", "Prompt", "PromptPool", "build_pool", "detect_language", "load_source"]


def load_source(spec: SourceSpec, tokenizer: Tokenizer | None = None) -> list[Prompt]:
    """Load every prompt of one source, filtered as its spec says: the kind's plugin
    (``loadtest.config.sources``; loadtest's own kinds are in ``datasets.kinds``).

    ``tokenizer`` (the endpoint's, where it has one) cuts synthetic and trace prompts to
    their exact lengths; a source's own ``tokenizer`` file comes first.
    """
    return source_plugin(spec.kind).load(spec, tokenizer)


def build_pool(
    scenario: Scenario, tokenizer: Tokenizer | None = None
) -> tuple[PromptPool, dict[str, int]]:
    """Load every source of a scenario into a seeded pool; also returns counts by source.

    The built pool is cached (``datasets.pool_cache``): a run of the same scenario over
    the same files reads it back instead of parsing the data sets again.
    """
    key = pool_key(scenario) if tokenizer is None else None
    cached = read_pool(key) if key else None
    if cached is not None:
        return PromptPool(cached[0], scenario.seed), cached[1]
    groups: list[tuple[float, Sequence[Prompt]]] = []
    counts: dict[str, int] = {}
    for spec in scenario.sources:
        if spec.kind in ("trace", "conversations"):
            # Drawn at random from a pool, a trace would lose its order and a
            # conversation its turns: they run as units of load (features.workload).
            raise DatasetError(
                f"{scenario.path}: a {spec.kind} source runs through "
                "loadtest.features.workload.workload_for, not a prompt pool"
            )
        prompts = load_source(spec, tokenizer)
        if scenario.max_tokens_override:
            # --max-tokens is the last word, over a prompt's own value too (and over an
            # exact output length's min_tokens, which must not exceed it).
            prompts = [_capped(p, scenario.max_tokens) for p in prompts]
        elif spec.max_tokens is not None:
            prompts = [
                p if p.max_tokens is not None else replace(p, max_tokens=spec.max_tokens)
                for p in prompts
            ]
        counts[f"{spec.kind}:{spec.category}"] = len(prompts)
        groups.append((spec.weight, prompts))
    if key:
        write_pool(key, groups, counts)
    return PromptPool(groups, scenario.seed), counts


def _capped(p: Prompt, max_tokens: int) -> Prompt:
    sampling = p.sampling
    if sampling and "min_tokens" in sampling:
        sampling = {**sampling, "min_tokens": max_tokens}
    return replace(p, max_tokens=max_tokens, sampling=sampling)
