"""The simulator's prefix cache: which prompt prefixes it has seen, and what a hit saves.

A repeated prefix (the first 1 KB of the prompt) pays only ``prefix_hit_factor`` of its
prefill, and the prompt tokens it did not pay for are the plan's ``cached_tokens``. The
counters are vLLM's, in tokens (``vllm:prefix_cache_queries`` counts the prompt tokens
looked up, ``vllm:prefix_cache_hits`` those the cache served); without a cache nothing
is looked up, so both stay 0, as in a vLLM started without prefix caching.
"""

from __future__ import annotations

import collections
import dataclasses
import hashlib

import orjson

from loadtest.model.json import JsonObject
from loadtest.sim.model import ResponsePlan

__all__ = ["PrefixCache"]

_KEEP = 10_000


class PrefixCache:
    """The prefixes seen lately (the last 10,000), and the lookups counted in tokens."""

    __slots__ = ("_seen", "enabled", "hit_factor", "hit_tokens", "hits", "misses", "query_tokens")

    def __init__(self, enabled: bool, hit_factor: float) -> None:
        self.enabled = enabled
        self.hit_factor = hit_factor
        self.hits = 0
        """Requests whose prefix was found."""
        self.misses = 0
        self.query_tokens = 0
        """Prompt tokens looked up (``vllm:prefix_cache_queries``)."""
        self.hit_tokens = 0
        """Prompt tokens the cache served (``vllm:prefix_cache_hits``)."""
        self._seen: collections.OrderedDict[bytes, None] = collections.OrderedDict()

    def clear(self) -> None:
        """Forget every prefix (a server that went cold)."""
        self._seen.clear()

    def apply(self, plan: ResponsePlan, req: JsonObject) -> tuple[ResponsePlan, int]:
        """The plan and its TTFT after the cache: a repeated prefix pays only part of its
        prefill. The plan's own offsets stay: the stream is shifted by the TTFT returned."""
        if not self.enabled:
            return plan, plan.ttft_ns
        self.query_tokens += plan.prompt_tokens
        key = hashlib.blake2b(_prefix_text(req), digest_size=12).digest()
        if key in self._seen:
            self._seen.move_to_end(key)
            self.hits += 1
            served = 1.0 - self.hit_factor
            # The prefill is linear in prompt tokens, so the share of its time saved is
            # the share of the prompt the cache served.
            cached = int(plan.prompt_tokens * served)
            self.hit_tokens += cached
            hit = dataclasses.replace(plan, cached_tokens=cached)
            return hit, plan.ttft_ns - int(plan.prefill_ns * served)
        self.misses += 1
        self._seen[key] = None
        if len(self._seen) > _KEEP:
            self._seen.popitem(last=False)
        return dataclasses.replace(plan, cached_tokens=0), plan.ttft_ns


def _prefix_text(req: JsonObject) -> bytes:
    """The first 1 KB of the prompt: what a prefix cache would find again."""
    prompt = req.get("prompt")
    if isinstance(prompt, str):
        return prompt[:1024].encode()
    return orjson.dumps(req.get("messages"))[:1024]
