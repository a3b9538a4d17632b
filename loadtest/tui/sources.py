"""Where the dashboard's frames come from: a live run, or a finished one (a ``--workers``
run's are merged in ``tui.workers_source``).

All build the same ``Frame``, in the dashboard's process. The live source reads the
states the run's process sends (``tui.feed``: counters, the encoded histograms of its
last roll, the scraper's samples), so drawing never blocks or drives the load. The
replay source reads ``histograms.hlog``, ``requests.jsonl``, ``summary.json`` and
``metrics.jsonl`` once and steps through the run's intervals.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import TypedDict, cast

import numpy as np
from hdrh.histogram import HdrHistogram

from loadtest.engine.blocks import block_panels
from loadtest.errors import ResultFileError, UsageError
from loadtest.features.faults.live_windows import (
    FaultFeed,
    FaultRow,
    FaultTimeline,
    fault_rows,
    request_rows,
)
from loadtest.features.server_summary import acceptance
from loadtest.measure.merge import merge_metrics
from loadtest.measure.recorders import Metrics, fast_percentile, new_histogram, record_many
from loadtest.model.io import JsonLines, run_requests
from loadtest.model.json import JsonObject
from loadtest.model.verdict import FaultVerdict
from loadtest.report.hlog import read_intervals
from loadtest.report.rebuild import REBUILT_NOTE, SUMMARIZED_NOTE, summary_of
from loadtest.report.summary import judge_run
from loadtest.tui.frame import (
    DASH_METRICS,
    Frame,
    RunVerdicts,
    percentile_rows,
    progress,
    series,
)
from loadtest.tui.histogram import log_buckets
from loadtest.tui.link import Hello, LiveState

__all__ = [
    "ROLL_S",
    "LiveSource",
    "MetricsView",
    "ReplaySource",
    "fold_short_tail",
    "metrics_view",
]


ROLL_S = 1.0
"""The interval a live run's series are of: its runner rolls one a second."""
JUDGE_EVERY_S = 5.0
"""How often the live dashboard re-judges: each judgement reads requests.jsonl again."""


class MetricsView(TypedDict):
    """The ``Frame`` fields that come from a ``Metrics``."""

    sent: int
    ok: int
    failed: int
    cancelled: int
    in_flight: int
    warmup: int
    errors: dict[str, int]
    category: str
    categories: tuple[str, ...]
    metric: str
    percentiles: tuple[tuple[str, int, float | None, float | None, float | None, float | None], ...]
    buckets: tuple[tuple[float, float, int], ...]


def metrics_view(m: Metrics, in_flight: int, metric: str, category: str) -> MetricsView:
    """The ``Frame`` fields that come from a ``Metrics``: counters and distributions."""
    hists = m.total.hists if category == "all" else m.category(category).hists
    return {
        "sent": m.sent + in_flight,
        "ok": m.outcomes["ok"],
        "failed": m.outcomes["failed"],
        "cancelled": m.outcomes["cancelled"],
        "in_flight": in_flight,
        "warmup": m.warmup_requests,
        "errors": dict(m.errors),
        "category": category,
        "categories": ("all", *sorted(m.by_category)),
        "metric": metric,
        "percentiles": percentile_rows(hists),
        "buckets": log_buckets(hists.get(metric)),
    }


def _server_view(samples: list[JsonObject]) -> JsonObject | None:
    ok = [s for s in samples if s.get("ok")]
    if not ok:
        return None
    last = dict(ok[-1])
    if len(ok) < 2:
        last["acceptance_rate"] = None
        return last
    last["acceptance_rate"] = acceptance(ok[-2], ok[-1])
    t0, t1 = ok[-2].get("t_s"), ok[-1].get("t_s")
    if isinstance(t0, float) and isinstance(t1, float):
        last["span_s"] = t1 - t0  # what the panel's title says its figures are of
    return last


class LiveSource:
    """Frames of a running run, from the states its process sends (``tui.feed``).

    Every verdict on screen comes from the function that writes it into summary.json
    (``judge_windows``, ``judge_run``): during the run on what has happened so far
    (marked ``so far``), judged here, in the dashboard's process; after it, the run's
    own (``Ending``), so the last frame says what the printed summary says. The fault
    windows are the faults feature's ``FaultTimeline``, fed what the rig hands out.
    """

    def __init__(self, hello: Hello) -> None:
        self.hello = hello
        self.state: LiveState | None = None
        self._closed = hello.scenario.load.mode == "closed"
        self._metrics = Metrics(closed_loop=self._closed, t0_ns=0)
        self._samples: list[JsonObject] = []
        self._timeline = FaultTimeline()
        self._verdicts: RunVerdicts | None = None
        self._judged_at: float | None = None
        self._panels: tuple[str, ...] = ()
        self._take(hello.feeds)

    def _take(self, feeds: Mapping[str, object]) -> None:
        """What the hooks fed: the scraper's new samples, the fault rig's windows."""
        self._samples.extend(cast(tuple[JsonObject, ...], feeds.get("server", ())))
        windows = feeds.get("faults")
        if isinstance(windows, FaultFeed):
            self._timeline.take(windows)

    def update(self, state: LiveState) -> None:
        """Take the run's latest state."""
        self.state = state
        if state.metrics is not None:
            self._metrics = merge_metrics([state.metrics], closed_loop=self._closed, t0_ns=0)
        # The histograms are a second old at most; the counters are of now.
        self._metrics.outcomes = Counter(state.outcomes)
        self._metrics.errors = Counter(state.errors)
        self._take(state.feeds)
        self._panels = block_panels(state.blocks, self._metrics)
        if state.ending is not None:
            self._timeline.end(cast(list[FaultVerdict], state.ending.blocks.get("faults", [])))
            self._verdicts = state.ending.verdicts
        else:
            self._judge(state)

    def frame(self, metric: str, category: str) -> Frame:
        """The run as of its latest state."""
        h = self.hello
        sc = h.scenario
        s = self.state or LiveState(0.0, "starting", 0, 0, {}, {}, (), (), (), None)
        load = sc.load
        frac, eta = progress(s.elapsed_s, load.warmup_s, load.duration_s, load.requests, s.measured)
        return Frame(
            scenario=sc.name,
            endpoint=h.endpoint,
            model=h.model,
            elapsed_s=s.elapsed_s,
            phase=s.phase,
            progress=frac,
            eta_s=eta,
            **metrics_view(self._metrics, s.in_flight, metric, category),
            req_rate=series(s.rate_history),
            interval_s=ROLL_S,
            tok_rate=series(s.token_rate_history),
            ttft_p95=series(s.ttft_p95_history),
            faults=self._timeline.rows(s.elapsed_s),
            server=_server_view(self._samples[-2:]),
            panels=self._panels,
            verdicts=self._verdicts,
        )

    def _judge(self, s: LiveState) -> None:
        """Provisional verdicts of the run so far, every ``JUDGE_EVERY_S`` once measuring."""
        if s.phase in ("warm-up", "starting"):
            return
        t = time.monotonic()
        if self._judged_at is not None and t - self._judged_at < JUDGE_EVERY_S:
            return
        self._judged_at = t
        sc = self.hello.scenario
        measured_s = max(s.elapsed_s - sc.load.warmup_s, 1e-9)
        driver, slo = judge_run(self._metrics, sc.slo, measured_s)
        self._verdicts = RunVerdicts(slo, driver, provisional=True)
        if self._timeline.begun:
            self._timeline.judge(request_rows(self.hello.run_dir), self._samples)


Interval = tuple[float, float, HdrHistogram]


def fold_short_tail(items: list[Interval], shortest_s: float) -> list[Interval]:
    """``items`` with a last interval shorter than ``shortest_s`` folded into the one
    before it. The log's last interval is whatever was left when the run ended, often a
    few milliseconds: its five requests read as ``requests/s 250.0`` beside a run of 9
    a second, and its bar flattened every other."""
    if len(items) < 2 or items[-1][1] >= shortest_s:
        return items
    (start, length, hist), (_, tail_length, tail) = items[-2], items[-1]
    both = new_histogram()
    both.add(hist)
    both.add(tail)
    return [*items[:-2], (start, length + tail_length, both)]


class ReplaySource:
    """Frames of a finished run, one per interval of its ``histograms.hlog``."""

    def __init__(self, run_dir: str | Path) -> None:
        folder = Path(run_dir)
        self.folder = folder
        try:
            self.summary = summary_of(folder)  # a killed run's is rebuilt from its files
            self.intervals = {
                tag: fold_short_tail(items, ROLL_S / 2)
                for tag, items in read_intervals(folder / "histograms.hlog").items()
            }
        except (OSError, ResultFileError, ValueError) as exc:
            raise UsageError(f"{folder}: not a finished loadtest run ({exc})") from exc
        self.rows: list[JsonObject] = list(run_requests(folder))
        self.samples: list[JsonObject] = _lines(folder / "metrics.jsonl")
        self.n = max((len(v) for v in self.intervals.values()), default=0)
        if self.n == 0:
            raise UsageError(f"{folder / 'histograms.hlog'}: holds no intervals")
        self.position = self.n - 1
        self._prefix: dict[int, dict[str, HdrHistogram]] = {}

    def step(self, delta: int) -> None:
        """Move ``delta`` intervals (clamped to the run)."""
        self.position = min(self.n - 1, max(0, self.position + delta))

    def _time_s(self) -> float:
        start, length, _ = self.intervals["e2e_ms"][self.position]
        return start + length

    def _totals(self) -> dict[str, HdrHistogram]:
        i = self.position
        if i not in self._prefix:
            totals = {}
            for tag, items in self.intervals.items():
                h = new_histogram()
                for _, _, part in items[: i + 1]:
                    h.add(part)
                totals[tag] = h
            self._prefix[i] = totals
        return self._prefix[i]

    def _category_hists(self, category: str, t_ms: float) -> dict[str, HdrHistogram]:
        hists = {}
        rows = [
            r
            for r in self.rows
            if r["category"] == category
            and r["outcome"] == "ok"
            and not r["warmup"]
            and (r["end_ms"] or 0) <= t_ms
        ]
        for m in DASH_METRICS:
            values = [int(r[m] * 1000) for r in rows if isinstance(r.get(m), int | float)]
            h = new_histogram()
            record_many(h, [max(1, v) for v in values])
            hists[m] = h
        return hists

    def frame(self, metric: str, category: str) -> Frame:
        """The run as it was at the end of the current interval."""
        t = self._time_s()
        t_ms = t * 1000
        # Sent as the live dashboard counts: every request that had gone out by then,
        # ended (``done``) or still in flight.
        went = [r for r in self.rows if _sent_ms(r) <= t_ms]
        done = [r for r in went if (r.get("end_ms") or 0) <= t_ms]
        outcomes = [r["outcome"] for r in done]
        errors: dict[str, int] = {}
        for r in done:
            if r.get("error_class"):
                errors[r["error_class"]] = errors.get(r["error_class"], 0) + 1
        hists = self._totals() if category == "all" else self._category_hists(category, t_ms)
        run = self.summary["run"]
        e2e = self.intervals.get("e2e_ms", [])[: self.position + 1]
        ttft = self.intervals.get("ttft_ms", [])[: self.position + 1]
        ends = np.array([r.get("end_ms") or 0 for r in self.rows], dtype=float)
        toks = np.array([r.get("output_tokens") or 0 for r in self.rows], dtype=float)
        tok_rate = [
            float(toks[(ends > s * 1000) & (ends <= (s + n) * 1000)].sum() / max(n, 1e-9))
            for s, n, _ in e2e
        ]
        duration = run.get("duration_s") or t
        last = self.position == self.n - 1
        put = self.summary["throughput"]
        return Frame(
            scenario=run["scenario"],
            endpoint=run["endpoint"],
            model=run["model"],
            elapsed_s=t,
            phase=f"replay: interval {self.position + 1}/{self.n} (←/→ to step)",
            progress=min(1.0, t / duration) if duration else None,
            eta_s=0.0 if last else max(0.0, duration - t) if duration else None,
            sent=len(went),
            ok=outcomes.count("ok"),
            failed=outcomes.count("failed"),
            cancelled=outcomes.count("cancelled"),
            in_flight=len(went) - len(done),
            warmup=sum(1 for r in went if r.get("warmup")),
            errors=errors,
            category=category,
            categories=("all", *sorted({r["category"] for r in self.rows})),
            metric=metric,
            percentiles=percentile_rows(hists),
            buckets=log_buckets(hists.get(metric)),
            req_rate=series([h.get_total_count() / max(n, 1e-9) for _, n, h in e2e]),
            interval_s=e2e[-1][1] if e2e else None,
            tok_rate=series(tok_rate),
            ttft_p95=series(
                [fast_percentile(h, 95) / 1e3 if h.get_total_count() else 0.0 for _, _, h in ttft]
            ),
            faults=self._faults(t),
            # The last frame takes every scrape: the run's last ones come after its last
            # request's interval (it showed one scrape behind). The view picks the last
            # two that answered (a failed last one hid the acceptance, two the panel).
            server=_server_view(
                self.samples if last else [s for s in self.samples if s.get("t_s", 0) <= t]
            ),
            verdicts=self._verdicts(),
            # The blocks as the run ended them: summary.json has no earlier values.
            panels=block_panels(cast(Mapping[str, object], self.summary)) if last else (),
            run_rate=(put["requests_per_s"], put["output_tokens_per_s"]) if last else None,
            fault_note=self._fault_note(),
            notice=self._notice(),
        )

    def _notice(self) -> str | None:
        if "rebuilt" not in self.summary:
            return None
        written = (self.folder / "summary.json").exists()
        return SUMMARIZED_NOTE if written else REBUILT_NOTE

    def _fault_note(self) -> str | None:
        """A rebuilt run's windows: named, and why they have no verdict."""
        rebuilt = self.summary.get("rebuilt")
        if rebuilt is None:
            return None
        why = [n for n in rebuilt["not_rebuilt"] if n.startswith("fault ")]
        return f"the run was killed: {why[0]}" if why else None

    def _faults(self, t: float) -> tuple[FaultRow, ...]:
        if self.position == self.n - 1:
            t = float("inf")  # the run is over: every window has its final verdict
        return fault_rows(self.summary.get("faults") or [], t, provisional=False)

    def _verdicts(self) -> RunVerdicts | None:
        """The summary's SLO checks and driver health, on the run's last interval."""
        if self.position < self.n - 1:
            return None
        return RunVerdicts(self.summary["slo"], self.summary.get("driver"))


def _sent_ms(row: JsonObject) -> float:
    """When a recorded request went out; one that never did, when it ended."""
    sent = row.get("sent_ms")
    if isinstance(sent, int | float):
        return float(sent)
    end = row.get("end_ms")
    return float(end) if isinstance(end, int | float) else 0.0


def _lines(path: Path) -> list[JsonObject]:
    # A killed run's last line may be torn: JsonLines leaves it out, as every reader does.
    return list(JsonLines(path)) if path.exists() else []
