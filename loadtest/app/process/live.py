"""The live outputs of a command (``--prometheus``, ``--pushgateway``, a plugin's), fed
from what each load process already writes once a second.

Every process that sends load (this one, or each worker) writes ``live.json`` in its
folder once a second: its encoded histograms and counters (``live_snapshot``; the
dashboard of a ``--workers`` run reads the same files). A thread of the command's
process reads them, merges them as the end of the run merges workers, and shows the
view to every output. Nothing runs on the load's event loop but the encoding, a
histogram per loop turn; the merge, the percentiles and the outputs' I/O are the
thread's. A run's last view is made from its final metrics and its summary, so an
output's last figures are summary.json's.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import NotRequired, TypedDict
from urllib.parse import urlsplit

import orjson

from loadtest.config.scenario import Scenario
from loadtest.engine.blocks import live_json_parts
from loadtest.engine.hooks import RunHook
from loadtest.engine.runner import Runner, collect_parts
from loadtest.features.faults.live_windows import judge_so_far, request_rows, window_begun
from loadtest.features.faults.rig import FaultRig
from loadtest.live.families import EXPORTED, families
from loadtest.live.outputs import LIVE_OUTPUTS, LiveOutput
from loadtest.live.view import LiveView, Phase, RecentWindow
from loadtest.measure.merge import EncodedMetrics, encode_metrics_steps, merge_metrics
from loadtest.measure.recorders import Metrics
from loadtest.model.atomic import write_atomic
from loadtest.model.summary import Summary
from loadtest.model.verdict import FaultVerdict
from loadtest.report.summary import judged_metrics

__all__ = ["LIVE_FILE", "LiveExport", "LiveFile", "live_snapshot", "origin", "write_live"]

log = logging.getLogger("loadtest")

LIVE_FILE = "live.json"
EVERY_S = 1.0
JUDGE_EVERY_S = 5.0
"""How often the fault windows are judged while a run goes: each reads requests.jsonl."""


def origin(url: str) -> str:
    """``scheme://host:port`` of ``url``: never a path, a query or credentials."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    port = f":{parts.port}" if parts.port else ""
    return f"{parts.scheme}://{host}{port}" if parts.scheme else url


class LiveFile(TypedDict):
    """One process's ``live.json``."""

    metrics: EncodedMetrics
    in_flight: int
    measured: int
    elapsed_s: float
    warming_up: bool
    rate_history: list[float]
    token_rate_history: list[float]
    ttft_p95_history: list[float]
    blocks: NotRequired[dict[str, list[object]]]
    """Its hooks' parts of summary blocks so far (``RunHook.live_parts``), as JSON: the
    panels of a ``--workers`` dashboard, merged there with every other worker's."""


@dataclass(frozen=True, slots=True)
class _Watched:
    """The run a view is of, and its fault rig (in this process in every mode)."""

    run_id: str
    scenario: Scenario
    endpoint: str
    labels: tuple[tuple[str, str], ...]
    rig: FaultRig | None = None


async def live_snapshot(runner: Runner) -> LiveFile:
    """What ``live.json`` holds: the encoded metrics (a histogram per loop turn) and the
    counters a view needs."""
    m = runner.metrics
    # Only the histograms a view reads: the exported latencies and what the SLOs and the
    # driver's health judge (the dashboard of a --workers run reads a subset of these).
    steps = encode_metrics_steps(m, {*EXPORTED, *judged_metrics(runner.scenario.slo)})
    while True:
        try:
            next(steps)
        except StopIteration as done:
            encoded: EncodedMetrics = done.value
            break
        await asyncio.sleep(0)
    snapshot: LiveFile = {
        "metrics": encoded,
        "in_flight": runner.in_flight,
        "measured": runner.measured,
        "elapsed_s": (time.perf_counter_ns() - runner.t0_ns) / 1e9 if runner.t0_ns else 0.0,
        "warming_up": runner.warming_up,
        "rate_history": m.rate_history[-120:],
        "token_rate_history": m.token_rate_history[-120:],
        "ttft_p95_history": m.ttft_p95_history[-120:],
    }
    parts = live_json_parts(collect_parts(_live_parts(h) for h in runner.hooks))
    if parts:
        snapshot["blocks"] = parts
    return snapshot


def _live_parts(hook: RunHook) -> Mapping[str, object]:
    """A hook's parts so far; one that raises (a plugin's bug) hands none, logged, so
    that this process's live.json and progress go on being written."""
    try:
        return hook.live_parts()
    except Exception as exc:
        log.warning("%s.live_parts failed: %s: %s", type(hook).__name__, type(exc).__name__, exc)
        return {}


async def write_live(runner: Runner, run_dir: Path) -> None:
    """``live.json`` once a second, until cancelled (a run in this process)."""
    while True:
        await asyncio.sleep(EVERY_S)
        write_atomic(run_dir / LIVE_FILE, orjson.dumps(await live_snapshot(runner)))


class LiveExport:
    """The live outputs of one command (``open``), shown each run it makes in turn."""

    def __init__(self, outputs: Mapping[str, LiveOutput]) -> None:
        self.outputs = dict(outputs)
        self._window = RecentWindow()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._run: _Watched | None = None

    @classmethod
    def open(cls, asked: Mapping[str, str]) -> LiveExport | None:
        """The outputs asked for by kind name (``prometheus`` -> ``127.0.0.1:9464``);
        None when none was. Each kind checks its value (``UsageError``)."""
        outputs: dict[str, LiveOutput] = {}
        try:
            for kind, value in asked.items():
                outputs[kind] = LIVE_OUTPUTS.load(kind).open(value)
        except BaseException:
            for out in outputs.values():
                out.close()
            raise
        return cls(outputs) if outputs else None

    def watch(
        self,
        run_id: str,
        scenario: Scenario,
        endpoint: str,
        run_dir: Path,
        labels: tuple[tuple[str, str], ...] = (),
        rig: FaultRig | None = None,
    ) -> None:
        """Show the run in ``run_dir`` once a second until ``finish``; with its ``rig``,
        its fault windows judged on the requests so far every ``JUDGE_EVERY_S``."""
        self._unwatch()
        self._window.clear()
        self._stop.clear()
        base = self._run = _Watched(run_id, scenario, origin(endpoint), labels, rig)
        self._thread = threading.Thread(
            target=self._poll, args=(run_dir, base), name="loadtest-live", daemon=True
        )
        self._thread.start()

    def finish(self, metrics: Metrics, summary: Summary) -> None:
        """The watched run's last view, from its final ``metrics`` and ``summary``."""
        self._unwatch()
        run = self._run
        if run is None:
            return
        elapsed = float(summary["run"]["duration_s"])
        view = LiveView(
            run.run_id,
            run.scenario,
            run.endpoint,
            metrics,
            0,
            elapsed,
            "ended",
            run.labels,
            summary,
        )
        self._show(view)

    def close(self) -> None:
        """Stop watching and close every output (a server may wait for a last scrape)."""
        self._unwatch()
        for name, out in self.outputs.items():
            try:
                out.close()
            except Exception as exc:  # one output's failure must not hide the others'
                log.warning("live output %s: %s", name, exc)

    def _unwatch(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None

    def _poll(self, run_dir: Path, base: _Watched) -> None:
        faults: tuple[FaultVerdict, ...] = ()
        judged_at, judged_marks = float("-inf"), 0
        while not self._stop.wait(EVERY_S):
            try:
                view = _read_view(run_dir, base)
                if view is None:
                    continue
                # Every JUDGE_EVERY_S, and at once when a window starts or ends.
                marks = _window_marks(base.rig)
                due = time.monotonic() - judged_at >= JUDGE_EVERY_S or marks != judged_marks
                if due and view.phase == "measuring":
                    judged_at, judged_marks = time.monotonic(), marks
                    faults = _judge_so_far(run_dir, base.rig)
                self._show(dataclasses.replace(view, faults=faults))
            except Exception as exc:  # the run goes on whatever an output does
                log.warning("live outputs: %s", exc, exc_info=log.isEnabledFor(logging.DEBUG))

    def _show(self, view: LiveView) -> None:
        with self._lock:
            recent = self._window.add(time.monotonic(), view, EXPORTED)
            built = list(families(view, recent))
            for name, out in self.outputs.items():
                try:
                    out.show(view, built)
                except Exception as exc:
                    log.warning("live output %s: %s", name, exc)


def _window_marks(rig: FaultRig | None) -> int:
    """How many window starts and ends the rig has seen."""
    if rig is None:
        return 0
    return sum(("start_s" in o) + ("end_s" in o) for o in list(rig.observed))


def _judge_so_far(run_dir: Path, rig: FaultRig | None) -> tuple[FaultVerdict, ...]:
    """The fault windows as the summary would judge them on the requests so far (the
    dashboard's provisional verdicts, by the same judge); none before a window began."""
    if rig is None:
        return ()
    observed = [o.copy() for o in rig.observed]  # the rig's loop may append meanwhile
    if not window_begun(rig.plan, observed):
        return ()  # before reading every row
    rows = [
        *request_rows(run_dir),
        *(r for d in sorted(run_dir.glob("worker-*")) for r in request_rows(d)),
    ]
    if not rows:  # none written here yet (a Ray task ships its lines at its end)
        return ()
    samples = list(rig.scraper.samples) if rig.scraper is not None else []
    return judge_so_far(rig.plan, observed, rows, samples)


def _read_view(run_dir: Path, base: _Watched) -> LiveView | None:
    """The run as of its processes' last ``live.json`` (None before the first)."""
    parts: list[LiveFile] = []
    for path in (run_dir / LIVE_FILE, *sorted(run_dir.glob(f"worker-*/{LIVE_FILE}"))):
        try:
            parts.append(orjson.loads(path.read_bytes()))
        except (OSError, orjson.JSONDecodeError):
            continue
    if not parts:
        return None
    scenario = base.scenario
    metrics = merge_metrics(
        [p["metrics"] for p in parts], closed_loop=scenario.load.mode == "closed", t0_ns=0
    )
    phase: Phase = "warm-up" if any(p["warming_up"] for p in parts) else "measuring"
    return LiveView(
        run_id=base.run_id,
        scenario=scenario,
        endpoint=base.endpoint,
        metrics=metrics,
        in_flight=sum(p["in_flight"] for p in parts),
        elapsed_s=max(p["elapsed_s"] for p in parts),
        phase=phase,
        labels=base.labels,
    )
