"""HdrHistogram interval logs (``.hlog``), written as the run goes, one tag per metric.

``hdrh``'s own writer writes no tags and its ``output_start_time`` crashes, so the lines
are written here in the format of HdrHistogram's Java ``HistogramLogWriter`` (log format
1.3: ``Tag=NAME,start,length,max,payload``), which its ``HistogramLogProcessor`` and
``hdrh``'s ``HistogramLogReader`` both read. Values are microseconds; the max column is
in milliseconds.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import IO

from hdrh.histogram import HdrHistogram

from loadtest.engine.hooks import RunContext, RunHook
from loadtest.measure.recorders import MetricSet, new_histogram

__all__ = ["HlogHook", "HlogWriter", "log_start_s", "merged_metric", "read_hlog", "read_intervals"]


class HlogWriter:
    """Writes interval histograms of every metric to one ``.hlog`` file."""

    def __init__(self, path: Path, start_wall_s: float) -> None:
        self.path = path
        self._f: IO[str] = open(path, "w", encoding="ascii")  # noqa: SIM115 - closed in close()
        iso = _dt.datetime.fromtimestamp(start_wall_s, _dt.UTC).isoformat()
        self._f.write("#[Histogram log format version 1.3]\n")
        self._f.write("#[Written by loadtest; values in microseconds]\n")
        self._f.write(f"#[StartTime: {start_wall_s:.3f} (seconds since epoch), {iso}]\n")
        self._f.write(f"#[BaseTime: {start_wall_s:.3f} (seconds since epoch)]\n")
        self._f.write(
            '"StartTimestamp","Interval_Length","Interval_Max","Interval_Compressed_Histogram"\n'
        )

    def write_interval(self, metrics: MetricSet, start_s: float, length_s: float) -> None:
        """Append one interval for every metric (empty ones too, so the timeline is whole)."""
        for name, hist in metrics.hists.items():
            # An empty histogram encodes the same every time; encoding costs event-loop
            # time (docs/benchmarks.md), so it is done once.
            payload = hist.encode().decode("ascii") if hist.get_total_count() else _empty()
            top = hist.get_max_value() / 1000 if hist.get_total_count() else 0.0
            self._f.write(f"Tag={name},{start_s:.3f},{length_s:.3f},{top:.3f},{payload}\n")
        # Each interval reaches the file whole: a killed run keeps every interval but the
        # one being written (its buffer would otherwise hold the last 8 KB, cut anywhere).
        self._f.flush()

    def close(self) -> None:
        """Flush and close the file."""
        if not self._f.closed:
            self._f.close()


class HlogHook(RunHook):
    """Writes ``histograms.hlog`` of a run, an interval a second.

    Encoding and compressing an interval's histograms takes milliseconds every second
    (docs/benchmarks.md); it is done in one thread beside the loop (zlib lets go of the
    GIL), in order.
    """

    def __init__(self, name: str = "histograms.hlog") -> None:
        self.name = name
        self._writer: HlogWriter | None = None
        self._pool: ThreadPoolExecutor | None = None
        self._write: Future[None] | None = None

    async def on_start(self, ctx: RunContext) -> None:
        """Open the file, its start time the run's."""
        self._writer = HlogWriter(ctx.run_dir / self.name, ctx.started_wall)
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="loadtest-hlog")

    def on_tick(self, now_ns: int) -> None:
        """The set written last time is about to be cleared for reuse: wait for it."""
        if self._write is not None:
            self._write.result()
            self._write = None

    def on_interval(self, interval: MetricSet, start_s: float, length_s: float) -> None:
        """Hand the interval to the writer's thread."""
        if self._pool is not None and self._writer is not None:
            self._write = self._pool.submit(
                self._writer.write_interval, interval, start_s, length_s
            )

    async def on_finish(self) -> None:
        """Wait for the last interval and close the file."""
        self.on_tick(0)
        if self._pool is not None:
            self._pool.shutdown(wait=True)
        if self._writer is not None:
            self._writer.close()


_EMPTY: list[str] = []


def _empty() -> str:
    if not _EMPTY:
        _EMPTY.append(new_histogram().encode().decode("ascii"))
    return _EMPTY[0]


def read_hlog(path: Path) -> dict[str, HdrHistogram]:
    """Sum every interval of an ``.hlog`` by tag (``read_intervals``: a line a kill cut
    short, which ``hdrh``'s own reader fails on, is left out)."""
    totals: dict[str, HdrHistogram] = {}
    for tag, items in read_intervals(path).items():
        total = totals[tag] = new_histogram()
        for _, _, hist in items:
            total.add(hist)
    return totals


def read_intervals(path: Path) -> dict[str, list[tuple[float, float, HdrHistogram]]]:
    """Every interval of an ``.hlog``: per tag, (start s, length s, histogram) in order.

    Reads the interval lines loadtest writes (``Tag=NAME,start,length,max,payload``);
    the start is relative to the run's start. A last line without its newline was cut
    short by a kill and is left out.
    """
    out: dict[str, list[tuple[float, float, HdrHistogram]]] = {}
    with open(path, encoding="ascii") as f:
        for line in f:
            if not line.startswith("Tag=") or not line.endswith("\n"):
                continue
            tag, start, length, _, payload = line[4:].rstrip("\n").split(",", 4)
            hist = HdrHistogram.decode(payload.encode("ascii"))
            out.setdefault(tag, []).append((float(start), float(length), hist))
    return out


def log_start_s(path: Path) -> float | None:
    """The start in an .hlog's header (``#[StartTime: 1796117664.716 ...``), epoch s."""
    try:
        with open(path, encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith("#[StartTime: "):
                    return float(line.split()[1])
                if not line.startswith("#"):
                    break
    except (OSError, ValueError):
        pass
    return None


def merged_metric(hlogs: Sequence[Path], metric: str) -> HdrHistogram:
    """One metric's histogram over several runs' logs (a sweep step's, a side's runs)."""
    total = new_histogram()
    for path in hlogs:
        h = read_hlog(path).get(metric)
        if h is not None:
            total.add(h)
    return total
