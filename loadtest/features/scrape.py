"""Server metrics: poll Prometheus ``/metrics`` of vLLM, SGLang, llama.cpp (or ours).

``parse_metrics`` (pure) maps each engine's names onto one set of fields; ``Scraper``
polls on an interval, writes the timeline to ``metrics.jsonl`` and keeps it (one small
dict per second) for the fault verdicts and the summary.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any, Literal

import aiohttp
import orjson
from prometheus_client.parser import text_string_to_metric_families

from loadtest.model.summary import ServerBlock

__all__ = ["FIELDS", "Scraper", "acceptance", "parse_metrics", "summarize_samples"]

# Sample name -> field. Counters keep their ``_total`` suffix in sample names.
_NAMES: dict[str, str] = {
    # vLLM (v0 and v1 names)
    "vllm:num_requests_running": "running",
    "vllm:num_requests_waiting": "waiting",
    "vllm:kv_cache_usage_perc": "kv_cache_usage",
    "vllm:gpu_cache_usage_perc": "kv_cache_usage",
    "vllm:spec_decode_num_draft_tokens_total": "draft_tokens",
    "vllm:spec_decode_num_accepted_tokens_total": "accepted_tokens",
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


def parse_metrics(text: str) -> dict[str, float]:
    """The known fields found in a Prometheus text exposition (labels summed over)."""
    out: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
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
    return out


def acceptance(first: dict[str, Any], last: dict[str, Any]) -> float | None:
    """Accepted / drafted tokens between two samples, None without drafts between them."""
    try:
        drafted = float(last["draft_tokens"]) - float(first["draft_tokens"])
        accepted = float(last["accepted_tokens"]) - float(first["accepted_tokens"])
    except (KeyError, TypeError):
        return None
    return accepted / drafted if drafted > 0 else None


PeakKey = Literal[
    "running_peak",
    "waiting_peak",
    "kv_cache_usage_peak",
    "gpu_memory_mib_peak",
    "gpu_power_w_peak",
    "target_rss_mib_peak",
]


def summarize_samples(samples: list[dict[str, Any]]) -> ServerBlock:
    """Acceptance over the run and the peak of each gauge."""
    ok = [s for s in samples if s.get("ok")]
    out: ServerBlock = {"samples": len(samples), "scraped": len(ok)}
    if not ok:
        return out
    out["engine"] = ok[-1].get("engine")
    out["acceptance_rate"] = acceptance(ok[0], ok[-1])

    def peak(field: str, rows: list[dict[str, Any]]) -> float | None:
        return max((r[field] for r in rows if field in r), default=None)

    peaks: tuple[tuple[PeakKey, float | None], ...] = (
        ("running_peak", peak("running", ok)),
        ("waiting_peak", peak("waiting", ok)),
        ("kv_cache_usage_peak", peak("kv_cache_usage", ok)),
        ("gpu_memory_mib_peak", peak("gpu_memory_mib", ok)),
        ("gpu_power_w_peak", peak("gpu_power_w", ok)),
        ("target_rss_mib_peak", peak("target_rss_mib", samples)),
    )
    for key, value in peaks:
        if value is not None:
            out[key] = value
    if "fallbacks" in ok[-1]:
        # A count: the counter is parsed as a float, the summary prints it as one.
        out["fallbacks"] = round(ok[-1]["fallbacks"] - ok[0].get("fallbacks", 0))
    return out


def _engine(text: str) -> str:
    for prefix, name in (
        ("loadtest_sim", "loadtest-sim"),  # first: it borrows vLLM's names
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
    ) -> None:
        self.url = url
        self.dcgm_url = dcgm_url
        self.out_path = out_path
        self.interval_s = interval_s
        self.pid = pid
        self.t0_ns = t0_ns or time.perf_counter_ns()
        self.samples: list[dict[str, Any]] = []
        self.unavailable: str | None = None
        self._session: aiohttp.ClientSession | None = None
        self._file: IO[bytes] | None = None
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Open the output and start polling."""
        self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=2.0))
        self._file = open(self.out_path, "wb")  # noqa: SIM115, ASYNC230
        self._task = asyncio.create_task(self._loop(), name="loadtest-scraper")

    async def close(self) -> None:
        """Take a last sample, stop polling and close the output."""
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None
            with contextlib.suppress(Exception):
                await self.sample()
        if self._session is not None:
            await self._session.close()
        if self._file is not None:
            self._file.close()

    async def _loop(self) -> None:
        next_at = time.perf_counter()
        while True:
            await self.sample()
            next_at += self.interval_s
            await asyncio.sleep(max(0.0, next_at - time.perf_counter()))

    async def sample(self) -> dict[str, Any]:
        """Scrape once now, record and return the sample."""
        assert self._session is not None
        t = round((time.perf_counter_ns() - self.t0_ns) / 1e9, 3)
        row: dict[str, Any] = {"t_s": t, "ok": False}
        text = await self._get(self.url)
        row["t_end_s"] = round((time.perf_counter_ns() - self.t0_ns) / 1e9, 3)
        if text is None:
            if self.unavailable is None:
                self.unavailable = f"{self.url} gave no Prometheus metrics"
        else:
            try:
                row.update(parse_metrics(text))
                row["engine"] = _engine(text)
                row["ok"] = True
            except ValueError as exc:
                self.unavailable = f"{self.url} is not Prometheus text: {exc}"
        if self.dcgm_url:
            gpu = await self._get(self.dcgm_url)
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

    async def _get(self, url: str) -> str | None:
        assert self._session is not None
        try:
            async with self._session.get(url) as resp:
                if resp.status != 200:
                    return None
                return await resp.text()
        except (aiohttp.ClientError, TimeoutError, OSError, UnicodeDecodeError):
            return None

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
