"""Prompt sources: packaged data sets (ShareGPT, BFCL, HumanEval) and a user's files."""

from __future__ import annotations

from dataclasses import replace

from loadtest.config.scenario import Scenario, SourceSpec
from loadtest.datasets.bfcl import load_bfcl
from loadtest.datasets.language import LANGUAGES, detect_language
from loadtest.datasets.prompt import Prompt, PromptPool
from loadtest.datasets.sharegpt import load_sharegpt_rows
from loadtest.datasets.userfiles import (
    load_humaneval,
    load_inline,
    load_jsonl,
    load_sharegpt_file,
)
from loadtest.errors import DatasetError

__all__ = ["LANGUAGES", "Prompt", "PromptPool", "build_pool", "detect_language", "load_source"]


def load_source(spec: SourceSpec) -> list[Prompt]:
    """Load every prompt of one source, filtered as its spec says."""
    if spec.kind == "sharegpt":
        return _sharegpt(spec)
    if spec.kind == "bfcl":
        return load_bfcl(spec.subsets, spec.category, spec.limit)
    if spec.kind == "humaneval":
        return load_humaneval(spec.category, spec.limit)
    if spec.kind == "jsonl":
        assert spec.path is not None
        return load_jsonl(spec.path, spec.category, spec.limit)
    if spec.kind == "sharegpt-file":
        assert spec.path is not None
        return load_sharegpt_file(
            spec.path, spec.category, spec.min_prompt_chars, spec.max_prompt_chars, spec.limit
        )
    if spec.kind == "inline":
        return load_inline(spec.prompts, spec.category)
    raise DatasetError(f"unknown prompt source kind {spec.kind!r}")


def _sharegpt(spec: SourceSpec) -> list[Prompt]:
    unknown = [x for x in (*spec.languages, *spec.exclude_languages) if x not in LANGUAGES]
    if unknown:
        raise DatasetError(
            f"sharegpt source: unknown language code(s) {', '.join(unknown)}; "
            f"known: {', '.join(LANGUAGES)}"
        )
    rows, _ = load_sharegpt_rows()
    keep = set(spec.languages)
    drop = set(spec.exclude_languages)
    prompts = []
    for r in rows:
        if keep and r["lang"] not in keep:
            continue
        if r["lang"] in drop:
            continue
        if not spec.min_prompt_chars <= len(r["prompt"]) <= spec.max_prompt_chars:
            continue
        prompts.append(
            Prompt(
                id=r["id"],
                source="sharegpt",
                category=spec.category,
                messages=({"role": "user", "content": r["prompt"]},),
                language=r["lang"],
            )
        )
        if spec.limit is not None and len(prompts) >= spec.limit:
            break
    if not prompts:
        raise DatasetError(
            f"sharegpt source {spec.category!r}: no prompt passed the filters "
            f"(languages={list(spec.languages)}, exclude={list(spec.exclude_languages)}, "
            f"chars {spec.min_prompt_chars}..{spec.max_prompt_chars})"
        )
    return prompts


def build_pool(scenario: Scenario) -> tuple[PromptPool, dict[str, int]]:
    """Load every source of a scenario into a seeded pool; also returns counts by source."""
    groups = []
    counts: dict[str, int] = {}
    for spec in scenario.sources:
        prompts = load_source(spec)
        if scenario.max_tokens_override:
            # --max-tokens is the last word, over a prompt's own value too.
            prompts = [replace(p, max_tokens=scenario.max_tokens) for p in prompts]
        elif spec.max_tokens is not None:
            prompts = [
                p if p.max_tokens is not None else replace(p, max_tokens=spec.max_tokens)
                for p in prompts
            ]
        counts[f"{spec.kind}:{spec.category}"] = len(prompts)
        groups.append((spec.weight, prompts))
    return PromptPool(groups, scenario.seed), counts
