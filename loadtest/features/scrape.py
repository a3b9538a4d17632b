"""Server metrics: poll Prometheus ``/metrics`` of vLLM, SGLang, llama.cpp (or ours).

``read_page`` (pure) maps each engine's names onto one set of fields, and reads vLLM's
per-position acceptance counter and its TTFT and inter-token histograms; ``Scraper``
polls on an interval, writes the timeline to ``metrics.jsonl`` and keeps it (one small
dict per second) for the fault verdicts and the summary. The histograms go only into
the rows scraped at the measured window's edges (its start, after any warm-up, and the
run's end), whose difference is what the run added.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import aiohttp
import orjson
from prometheus_client.parser import text_string_to_metric_families

from loadtest.features.histograms import Buckets, family_buckets
from loadtest.transport.side import Fetched, SideHttp, get_text

__all__ = [
    "FIELDS",
    "SIM_ENGINE",
    "Page",
    "Scraper",
    "parse_metrics",
    "read_page",
]

SIM_ENGINE = "loadtest-sim"
"""The engine name of a page served by loadtest's simulator (``loadtest sim`` or built in)."""

# Sample name -> field. Counters keep their ``_total`` suffix in sample names.
_NAMES: dict[str, str] = {
    # vLLM (v0 and v1 names)
    "vllm:num_requests_running": "running",
    "vllm:num_requests_waiting": "waiting",
    "vllm:kv_cache_usage_perc": "kv_cache_usage",
    "vllm:gpu_cache_usage_perc": "kv_cache_usage",
    "vllm:spec_decode_num_draft_tokens_total": "draft_tokens",
    "vllm:spec_decode_num_accepted_tokens_total": "accepted_tokens",
    "vllm:spec_decode_num_drafts_total": "drafts",
    # In tokens. Not the deprecated vllm:gpu_prefix_cache_* beside them (0.9, 0.10):
    # the same counts under two names would add up twice.
    "vllm:prefix_cache_queries_total": "prefix_cache_queries",
    "vllm:prefix_cache_hits_total": "prefix_cache_hits",
    # Output tokens and finished requests (every finished_reason): with the accepted
    # drafts they give the engine's decode steps (server_summary.accepted_per_step).
    "vllm:generation_tokens_total": "generation_tokens",
    "vllm:request_success_total": "finished_requests",
    # Running requests evicted when the KV cache was full (recomputed later).
    "vllm:num_preemptions_total": "preemptions",
    # SGLang
    "sglang:num_running_reqs": "running",
    "sglang:num_queue_reqs": "waiting",
    "sglang:token_usage": "kv_cache_usage",
    "sglang:spec_accept_length": "accept_length",
    # llama.cpp server
    "llamacpp:requests_processing": "running",
    "llamacpp:requests_deferred": "waiting",
    "llamacpp:kv_cache_usage_ratio": "kv_cache_usage",
    "llamacpp:spec_decode_num_draft_tokens_total": "draft_tokens",
    "llamacpp:spec_decode_num_accepted_tokens_total": "accepted_tokens",
    # loadtest's simulator
    "loadtest_sim_draft_fallbacks_total": "fallbacks",
    "loadtest_sim_cancellations_total": "cancellations",
    "loadtest_sim_speculating": "speculating",
    # DCGM exporter (per GPU: summed)
    "DCGM_FI_DEV_FB_USED": "gpu_memory_mib",
    "DCGM_FI_DEV_POWER_USAGE": "gpu_power_w",
}
_MAXED = frozenset({"kv_cache_usage", "accept_length", "speculating"})
FIELDS = tuple(sorted(set(_NAMES.values())))
_PER_POSITION = "vllm:spec_decode_num_accepted_tokens_per_pos_total"
# Histogram families -> key. vLLM 0.11 renamed the inter-token histogram and serves the
# old name beside it (first on the page) with the same observations: the new name wins.
_HISTOGRAMS = {
    "vllm:time_to_first_token_seconds": "ttft",
    "vllm:inter_token_latency_seconds": "itl",
    "vllm:time_per_output_token_seconds": "itl",
    # Where a request's time went on the server: waiting, its prefill, its decode.
    "vllm:request_queue_time_seconds": "queue",
    "vllm:request_prefill_time_seconds": "prefill",
    "vllm:request_decode_time_seconds": "decode",
}
_OLD_NAMES = frozenset({"vllm:time_per_output_token_seconds"})


@dataclass(frozen=True, slots=True)
class Page:
    """What one scrape found."""

    fields: dict[str, float]
    """The known fields (labels summed over)."""
    accepted_per_position: list[float]
    """vLLM's accepted drafts by position (0..k-1); empty where it has no such counter."""
    histograms: dict[str, Buckets]
    """``ttft`` and ``itl`` where the server has them."""


def read_page(text: str) -> Page:
    """Read a Prometheus text exposition; raises ValueError when it is not one."""
    out: dict[str, float] = {}
    positions: dict[int, float] = {}
    histograms: dict[str, Buckets] = {}
    for family in text_string_to_metric_families(text):
        key = _HISTOGRAMS.get(family.name)
        if key is not None and family.type == "histogram":
            found = family_buckets(family)
            if found is not None and not (family.name in _OLD_NAMES and key in histograms):
                histograms[key] = found
            continue
        for sample in family.samples:
            if sample.name == _PER_POSITION and sample.labels.get("position", "").isdigit():
                at = int(sample.labels["position"])
                positions[at] = positions.get(at, 0.0) + float(sample.value)
                continue
            field = _NAMES.get(sample.name)
            if field is None:
                continue
            value = float(sample.value)
            if field not in out:
                out[field] = value
            elif field in _MAXED:
                out[field] = max(out[field], value)
            else:  # the same count for several labels (models, GPUs): add them up
                out[field] += value
    per_position = [positions.get(i, 0.0) for i in range(max(positions, default=-1) + 1)]
    return Page(out, per_position, histograms)


def parse_metrics(text: str) -> dict[str, float]:
    """The known fields found in a Prometheus text exposition (labels summed over)."""
    return read_page(text).fields


def _engine(text: str) -> str:
    for prefix, name in (
        ("loadtest_sim", SIM_ENGINE),  # first: it borrows vLLM's names
        ("vllm:", "vllm"),
        ("sglang:", "sglang"),
        ("llamacpp:", "llama.cpp"),
    ):
        if prefix in text:
            return name
    return "unknown"


class Scraper:
    """Polls ``url`` (and a DCGM exporter) every ``interval_s`` into ``metrics.jsonl``."""

    def __init__(
        self,
        url: str,
        out_path: Path,
        *,
        interval_s: float = 1.0,
        dcgm_url: str | None = None,
        pid: Callable[[], int | None] | None = None,
        t0_ns: int | None = None,
        window_start_s: float = 0.0,
        http: SideHttp | None = None,
    ) -> None:
        self.url = url
        self.http = http or SideHttp()
        """The run's TLS and key: a scrape reaches the endpoint as the load does."""
        self.dcgm_url = dcgm_url
        self.out_path = out_path
        self.interval_s = interval_s
        self.pid = pid
        self.t0_ns = t0_ns or time.perf_counter_ns()
        self.window_start_s = window_start_s
        """When the measured window starts (after the warm-up), from ``t0_ns``: the
        scrape then reads the histograms, as the last one (``close``) does."""
        self.samples: list[dict[str, Any]] = []
        self.unavailable: str | None = None
        self._session: aiohttp.ClientSession | None = None
        self._file: IO[bytes] | None = None
        self._task: asyncio.Task[None] | None = None
        self._edge: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Open the output and start polling."""
        self._session = self.http.session(timeout_s=2.0)
        self._file = open(self.out_path, "wb")  # noqa: SIM115, ASYNC230
        self._task = asyncio.create_task(self._loop(), name="loadtest-scraper")
        if self.window_start_s > 0:
            self._edge = asyncio.create_task(self._window_start(), name="loadtest-scrape-edge")

    async def close(self) -> None:
        """Take a last sample, stop polling and close the output."""
        if self._task is not None:
            for task in (self._task, self._edge):
                if task is not None:
                    task.cancel()
            await asyncio.gather(
                *(t for t in (self._task, self._edge) if t), return_exceptions=True
            )
            self._task = self._edge = None
            with contextlib.suppress(Exception):
                await self.sample(edge="end")
        if self._session is not None:
            await self._session.close()
        if self._file is not None:
            self._file.close()

    async def _loop(self) -> None:
        next_at = time.perf_counter()
        edge: str | None = "start" if self.window_start_s <= 0 else None
        while True:
            await self.sample(edge=edge)
            edge = None
            next_at += self.interval_s
            await asyncio.sleep(max(0.0, next_at - time.perf_counter()))

    async def _window_start(self) -> None:
        due_ns = self.t0_ns + int(self.window_start_s * 1e9)
        await asyncio.sleep(max(0, due_ns - time.perf_counter_ns()) / 1e9)
        await self.sample(edge="start")

    async def sample(self, edge: str | None = None) -> dict[str, Any]:
        """Scrape once now, record and return the sample; at an ``edge`` of the measured
        window (``start`` or ``end``) with the server's latency histograms."""
        assert self._session is not None
        t = round((time.perf_counter_ns() - self.t0_ns) / 1e9, 3)
        row: dict[str, Any] = {"t_s": t, "ok": False}
        fetched = await self._get(self.url)
        text = fetched.text
        row["t_end_s"] = round((time.perf_counter_ns() - self.t0_ns) / 1e9, 3)
        if text is None:
            if self.unavailable is None:
                self.unavailable = f"{self.url} gave no Prometheus metrics ({fetched.error})"
        else:
            try:
                page = read_page(text)
                row.update(page.fields)
                if page.accepted_per_position:
                    row["accepted_per_position"] = page.accepted_per_position
                if edge is not None:
                    row["edge"] = edge
                    if page.histograms:
                        row["histograms"] = page.histograms
                row["engine"] = _engine(text)
                row["ok"] = True
            except ValueError as exc:
                self.unavailable = f"{self.url} is not Prometheus text: {exc}"
        if self.dcgm_url:
            gpu = (await self._get(self.dcgm_url)).text
            if gpu is not None:
                with contextlib.suppress(ValueError):
                    row.update(parse_metrics(gpu))
        rss = self._rss_mib()
        if rss is not None:
            row["target_rss_mib"] = rss
        self.samples.append(row)
        if self._file is not None:
            self._file.write(orjson.dumps(row) + b"\n")
            self._file.flush()
        return row

    async def _get(self, url: str) -> Fetched:
        assert self._session is not None
        return await get_text(self._session, self.http, url, "scrape")

    def _rss_mib(self) -> float | None:
        pid = self.pid() if self.pid is not None else None
        if pid is None:
            return None
        import psutil

        try:
            proc = psutil.Process(pid)
            rss = proc.memory_info().rss + sum(
                c.memory_info().rss for c in proc.children(recursive=True)
            )
        except psutil.Error:
            return None
        return round(rss / 2**20, 1)
