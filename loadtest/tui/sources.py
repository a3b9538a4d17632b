"""Where the dashboard's frames come from: a live runner, or a finished run's files.

Both build the same ``Frame``. The live source only reads what the runner already keeps
(rolled histograms, counters, the scraper's last samples), so drawing never blocks or
drives the load. The replay source reads ``histograms.hlog``, ``requests.jsonl``,
``summary.json`` and ``metrics.jsonl`` once and steps through the run's intervals.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np
import orjson
from hdrh.histogram import HdrHistogram

from loadtest.engine.runner import Runner
from loadtest.errors import UsageError
from loadtest.features.faults.rig import FaultRig
from loadtest.features.scrape import acceptance
from loadtest.measure.recorders import Metrics, fast_percentile, new_histogram, record_many
from loadtest.report.hlog import read_intervals
from loadtest.tui.frame import (
    DASH_METRICS,
    FaultRow,
    Frame,
    fault_state,
    log_buckets,
    percentile_rows,
    progress,
    series,
)

__all__ = ["LiveSource", "ReplaySource", "WorkersSource"]


def _after_span(start_s: float, end_s: float) -> float:
    # The same after-phase the verdicts use (faults.verdict): 5..30 s.
    return min(max(end_s - start_s, 5.0), 30.0)


def _metrics_view(m: Metrics, in_flight: int, metric: str, category: str) -> dict[str, Any]:
    """The ``Frame`` fields that come from a ``Metrics``: counters and distributions."""
    hists = m.total.hists if category == "all" else m.category(category).hists
    return {
        "sent": m.sent + in_flight,
        "ok": m.outcomes["ok"],
        "failed": m.outcomes["failed"],
        "cancelled": m.outcomes["cancelled"],
        "in_flight": in_flight,
        "errors": dict(m.errors),
        "category": category,
        "categories": ("all", *sorted(m.by_category)),
        "metric": metric,
        "percentiles": percentile_rows(hists),
        "buckets": log_buckets(hists.get(metric)),
    }


def _server_view(samples: list[dict[str, Any]]) -> dict[str, Any] | None:
    ok = [s for s in samples if s.get("ok")]
    if not ok:
        return None
    last = dict(ok[-1])
    last["acceptance_rate"] = acceptance(ok[-2], ok[-1]) if len(ok) > 1 else None
    return last


class LiveSource:
    """Frames of a running ``Runner``."""

    def __init__(self, runner: Runner) -> None:
        self.runner = runner
        self._verdicts: dict[int, dict[str, Any]] = {}
        self._judged_at = 0.0

    def frame(self, metric: str, category: str) -> Frame:
        """The run as it is now."""
        r = self.runner
        m = r.metrics
        sc = r.scenario
        now = time.perf_counter_ns()
        elapsed = (now - r.t0_ns) / 1e9 if r.t0_ns else 0.0
        frac, eta = progress(
            elapsed, sc.load.warmup_s, sc.load.duration_s, sc.load.requests, r.measured
        )
        # Not runner.snapshot(): its percentiles walk hdrh's counts in pure Python.
        in_flight = r.in_flight
        phase = (
            "paused"
            if r.paused
            else "stopping"
            if r.stopping
            else "warm-up"
            if r.warming_up
            else "measuring"
        )
        return Frame(
            scenario=sc.name,
            endpoint=r.config.endpoint,
            model=r.config.model,
            elapsed_s=elapsed,
            phase=phase,
            progress=frac,
            eta_s=eta,
            **_metrics_view(m, in_flight, metric, category),
            req_rate=series(m.rate_history),
            tok_rate=series(m.token_rate_history),
            ttft_p95=series(m.ttft_p95_history),
            faults=self._faults(elapsed),
            server=self._server(),
        )

    def _server(self) -> dict[str, Any] | None:
        rig = self.runner.hook(FaultRig)
        if rig is None or rig.scraper is None:
            return None
        return _server_view(rig.scraper.samples[-2:])

    def _faults(self, now_s: float) -> tuple[FaultRow, ...]:
        rig = self.runner.hook(FaultRig)
        if rig is None or not rig.plan.events:
            return ()
        rows = []
        due = False
        for i, ev in enumerate(rig.plan.events):
            obs = rig.observed[i]
            start = obs.get("start_s", ev.at_s)
            end = obs.get("end_s", ev.at_s + ev.duration_s)
            state = fault_state(start, end, _after_span(start, end), now_s)
            verdict = self._verdicts.get(i)
            due |= state == "ended" and verdict is None
            rows.append(
                FaultRow(
                    ev.label,
                    ev.kind,
                    start,
                    end,
                    state,
                    verdict["verdict"] if verdict else None,
                    verdict["reason"] if verdict else None,
                )
            )
        # A window is judged once its after-phase is over (one read of requests.jsonl),
        # at most every 5 s: the verdict then shows while the run goes on.
        if due and time.monotonic() - self._judged_at > 5.0:
            self._judged_at = time.monotonic()
            entries, _ = rig.judge(self.runner.config.run_dir)
            for i, row in enumerate(rows):
                if row.state == "ended":
                    self._verdicts[i] = entries[i]
        return tuple(rows)


class ReplaySource:
    """Frames of a finished run, one per interval of its ``histograms.hlog``."""

    def __init__(self, run_dir: str | Path) -> None:
        folder = Path(run_dir)
        self.folder = folder
        try:
            self.summary = orjson.loads((folder / "summary.json").read_bytes())
            self.intervals = read_intervals(folder / "histograms.hlog")
        except (OSError, orjson.JSONDecodeError, ValueError) as exc:
            raise UsageError(f"{folder}: not a finished loadtest run ({exc})") from exc
        self.rows = [orjson.loads(line) for line in _lines(folder / "requests.jsonl")]
        self.samples = [orjson.loads(line) for line in _lines(folder / "metrics.jsonl")]
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
        done = [r for r in self.rows if (r.get("end_ms") or 0) <= t_ms]
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
        return Frame(
            scenario=run["scenario"],
            endpoint=run["endpoint"],
            model=run["model"],
            elapsed_s=t,
            phase=f"replay: interval {self.position + 1}/{self.n} (←/→ to step)",
            progress=min(1.0, t / duration) if duration else None,
            eta_s=None,
            sent=len(done),
            ok=outcomes.count("ok"),
            failed=outcomes.count("failed"),
            cancelled=outcomes.count("cancelled"),
            in_flight=sum(
                1 for r in self.rows if (r.get("sent_ms") or 0) <= t_ms < (r.get("end_ms") or 0)
            ),
            errors=errors,
            category=category,
            categories=("all", *sorted({r["category"] for r in self.rows})),
            metric=metric,
            percentiles=percentile_rows(hists),
            buckets=log_buckets(hists.get(metric)),
            req_rate=series([h.get_total_count() / max(n, 1e-9) for _, n, h in e2e]),
            tok_rate=series(tok_rate),
            ttft_p95=series(
                [fast_percentile(h, 95) / 1e3 if h.get_total_count() else 0.0 for _, _, h in ttft]
            ),
            faults=self._faults(t),
            server=_server_view([s for s in self.samples if s.get("t_s", 0) <= t][-2:]),
        )

    def _faults(self, t: float) -> tuple[FaultRow, ...]:
        if self.position == self.n - 1:
            t = float("inf")  # the run is over: every window has its final verdict
        rows = []
        for f in self.summary.get("faults") or []:
            start, end = f["start_s"], f["end_s"]
            state = fault_state(start, end, _after_span(start, end), t)
            done = state == "ended"
            rows.append(
                FaultRow(
                    f.get("name") or f["kind"],
                    f["kind"],
                    start,
                    end,
                    state,
                    f.get("verdict") if done else None,
                    f.get("reason") if done else None,
                )
            )
        return tuple(rows)


def _lines(path: Path) -> list[bytes]:
    try:
        return [line for line in path.read_bytes().splitlines() if line.strip()]
    except FileNotFoundError:
        return []


class WorkersSource:
    """Frames of a ``--workers`` run: each worker's ``live.json``, merged."""

    def __init__(self, dirs: list[Path], scenario: Any, endpoint: str, model: str) -> None:
        self.dirs = dirs
        self.scenario = scenario
        self.endpoint = endpoint
        self.model = model
        self.started = time.monotonic()

    def frame(self, metric: str, category: str) -> Frame:
        """All workers as one run, as of their last second."""
        from loadtest.measure.merge import merge_metrics

        live = []
        for d in self.dirs:
            try:
                live.append(orjson.loads((d / "live.json").read_bytes()))
            except (OSError, orjson.JSONDecodeError):
                continue
        sc = self.scenario
        m = merge_metrics(
            [w["metrics"] for w in live], closed_loop=sc.load.mode == "closed", t0_ns=0
        )
        elapsed = time.monotonic() - self.started
        in_flight = sum(w["in_flight"] for w in live)
        frac, eta = progress(
            elapsed,
            sc.load.warmup_s,
            sc.load.duration_s,
            sc.load.requests,
            sum(w["measured"] for w in live),
        )

        def summed(key: str) -> tuple[float, ...]:
            rows = [w[key] for w in live]
            n = min((len(r) for r in rows), default=0)
            return series([sum(r[len(r) - n + i] for r in rows) for i in range(n)])

        return Frame(
            scenario=sc.name,
            endpoint=self.endpoint,
            model=self.model,
            elapsed_s=elapsed,
            phase=f"measuring ({len(live)}/{len(self.dirs)} workers reporting)",
            progress=frac,
            eta_s=eta,
            **_metrics_view(m, in_flight, metric, category),
            req_rate=summed("rate_history"),
            tok_rate=summed("token_rate_history"),
            ttft_p95=series(
                [max(v) for v in zip(*(w["ttft_p95_history"] for w in live), strict=False)]
            ),
        )
