"""The dashboard: pure frame text, the live app under Textual's pilot, replay, snapshots."""

from __future__ import annotations

import asyncio
import dataclasses
import html
import itertools
import os
import re
import shutil
import socket
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import cast

import orjson
import pytest
from textual.app import App, ComposeResult
from textual.geometry import Region
from textual.pilot import Pilot
from textual.widgets import DataTable
from textual.widgets._toast import Toast

from loadtest.app.process.inprocess import drive, run_here
from loadtest.config.feature_specs import FAULTS
from loadtest.datasets import build_pool
from loadtest.engine.runner import RunConfig, Runner
from loadtest.measure.recorders import new_histogram
from loadtest.measure.slo import SLOSpec, evaluate, parse_slo_flag
from loadtest.model.summary import RunHead
from loadtest.model.verdict import FaultVerdict
from loadtest.report.hlog import read_intervals
from loadtest.report.rebuild import REBUILT_NOTE
from loadtest.report.summary import driver_health
from loadtest.sim import InProcessSim, SimProcess
from loadtest.tui import Dashboard, DashboardFeed, DashboardProcess
from loadtest.tui.feed import START_S
from loadtest.tui.frame import (
    Frame,
    latency_cell,
    progress,
    render_counts,
    render_faults,
    render_header,
    series_title,
)
from loadtest.tui.histogram import fit_buckets, log_buckets, render_histogram
from loadtest.tui.sources import ReplaySource
from loadtest.tui.spark import ZeroSparkline, spark_rows
from tests.conftest import FAST_SIM, make_scenario, read_jsonl

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "fixtures" / "runs" / "sample"
SNAPSHOTS = Path(__file__).resolve().parent / "snapshots"
# LOADTEST_UPDATE_SNAPSHOTS=1 rewrites the stored SVGs (after a deliberate layout change).
UPDATE = os.environ.get("LOADTEST_UPDATE_SNAPSHOTS") == "1"

SPARKS = ("req", "tok", "ttft")
"""The dashboard's sparklines' widget ids."""
TWO_CATEGORIES = [
    {"kind": "inline", "category": "chat", "prompts": [f"chat {i}" for i in range(20)]},
    {"kind": "inline", "category": "code", "prompts": [f"code {i}" for i in range(20)]},
]


def _screen_text(app: Dashboard) -> str:
    return app.export_screenshot().replace("&#160;", " ")


def _screen_line(app: Dashboard, row: int) -> str:
    """One row of the screen as text (the SVG splits a row where its style changes)."""
    svg = _screen_text(app)
    parts = re.findall(rf'clip-path="url\(#terminal-\d+-line-{row}\)">([^<]*)</text>', svg)
    return html.unescape("".join(parts))


def test_frame_text() -> None:
    f = Frame(
        scenario="s",
        endpoint="http://x",
        model="m",
        elapsed_s=65,
        phase="measuring",
        progress=0.5,
        eta_s=65,
        sent=10,
        ok=7,
        failed=2,
        cancelled=1,
        errors={"http_5xx": 2},
        req_rate=(4.5,),
        tok_rate=(300.0,),
    )
    assert "ok 7   failed 2   cancelled 1" in render_counts(f)
    assert "http_5xx 2" in render_counts(f) and "4.5 req/s" in render_counts(f)
    header = render_header(f, width=10)
    assert "[█████·····]  50%  ETA 1:05" in header and "1:05 elapsed" in header


def test_log_buckets_and_histogram_text() -> None:
    h = new_histogram()
    for v in (1_000, 1_100, 50_000):  # 1 ms, 1.1 ms, 50 ms
        h.record_value(v)
    buckets = log_buckets(h, per_decade=1)
    assert [c for _, _, c in buckets] == [2, 1]
    assert buckets[0][0] == pytest.approx(1.0) and buckets[-1][1] == pytest.approx(100.0)
    text = render_histogram(
        Frame(scenario="s", endpoint="e", model="m", elapsed_s=0, phase="", buckets=buckets),
        width=10,
    )
    assert "██████████ 2" in text and "█████ 1" in text


def test_small_latencies_never_read_zero() -> None:
    # Chunks read together share a stamp (a 0 µs gap) and a fast stream's gaps are a
    # few µs: neither is shown as 0.00, in the table or in the histogram's bucket edges.
    assert latency_cell(0.004) == "0.004" and latency_cell(0.0) == "0"
    assert latency_cell(3.333) == "3.33" and latency_cell(3590.14) == "3590"
    assert all(len(latency_cell(v)) <= 6 for v in (0.001, 0.5, 99.99, 999.9, 99999.0))
    h = new_histogram()
    for v in (0, 0, 3, 4, 7, 12, 40, 900):  # µs
        h.record_value(v)
    text = render_histogram(
        Frame(scenario="s", endpoint="e", model="m", elapsed_s=0, phase="", buckets=log_buckets(h))
    )
    assert "0.00-" not in text and "-0.00 " not in text
    assert "       0-0.00178  ms" in text


def test_buckets_merge_on_the_log_grid_to_fit_the_rows() -> None:
    h = new_histogram()
    for v in (0, 0, 400, 900, 1500, 3000, 3100, 5000, 12000):  # µs, 1 µs to 17.8 ms
        h.record_value(v)
    buckets = log_buckets(h)  # four a decade
    assert len(buckets) == 17
    for rows in (1, 2, 3, 4, 5, 9, 16):
        fitted = fit_buckets(buckets, rows)
        assert 1 <= len(fitted) <= rows, rows
        assert sum(c for *_, c in fitted) == h.get_total_count()
        assert fitted[0][0] == buckets[0][0] and fitted[-1][1] == buckets[-1][1]
        assert all(a[1] == b[0] for a, b in itertools.pairwise(fitted))
    assert fit_buckets(buckets, 17) == buckets
    # Five rows: whole decades, merged buckets meet at powers of ten.
    inner = [lo for lo, _, _ in fit_buckets(buckets, 5)[1:]]
    assert inner == pytest.approx([0.01, 0.1, 1.0, 10.0])


async def test_the_dashboard_fits_80_by_24() -> None:
    # Every percentile column, with its values, and the fault panel with its verdict.
    shown: tuple[str, ...] = ("count", "p50", "p90", "p99", "max", "12.69", "13.20", "83.26")
    shown += ("cancel-a-third", "HELD", "sent 216", "in flight 0")
    app = Dashboard(replay=ReplaySource(SAMPLE))
    async with app.run_test(size=(80, 24)) as pilot:
        text = "".join(await _screen_when(app, pilot, lambda t: all(s in t for s in shown)))
    for fragment in shown:
        assert fragment in text, fragment


async def _screen_when(
    app: Dashboard, pilot: Pilot[None], ready: Callable[[str], bool]
) -> list[str]:
    """The screen's rows once ``ready`` holds of its text, or after 5 s (bounded). The
    panels are drawn a moment after start or a key, and a panel whose height changed
    may be laid out a screen refresh after the others: a screenshot between the two
    (under load) showed the fault panel one line high at 80x24."""
    rows: list[str] = []
    for _ in range(50):
        await pilot.pause(0.1)
        rows = _screen_rows(app)
        if ready("".join(rows)):
            break
    return rows


def _screen_rows(app: Dashboard) -> list[str]:
    return [_screen_line(app, row) for row in range(app.size.height)]


def _busy_run(folder: Path) -> Path:
    """The sample run, its summary judged as that of a run whose driver fell behind:
    the driver block ``driver_health`` gives its figures beside a 50 ms client lag p99,
    and three SLO checks evaluated on them (the sample kept up and set none). Its
    answers are four times as long, as a default run's (over 1000 output tokens/s: a
    four-digit figure is what 80 columns cut)."""
    shutil.copytree(SAMPLE, folder)
    rows = read_jsonl(folder / "requests.jsonl")
    for row in rows:
        row["output_tokens"] = 4 * (row["output_tokens"] or 0)
    (folder / "requests.jsonl").write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in rows))
    summary = orjson.loads((folder / "summary.json").read_bytes())
    figures = summary["metrics"]
    summary["driver"] = driver_health(figures | {"client_lag_ms": {"p99": 50.0}})
    spec = SLOSpec(parse_slo_flag("ttft_ms.p95=60000,tpot_ms.p99=0.001,error_rate=0.5"))
    summary["slo"] = evaluate(spec, figures, 0.0)
    (folder / "summary.json").write_bytes(orjson.dumps(summary))
    return folder


def _killed_run(folder: Path, starts: list[float] | None = None) -> Path:
    """The sample run as a kill leaves it: no summary, a start record naming its window
    (and, with ``starts``, when it was planned to open)."""
    shutil.copytree(SAMPLE, folder, ignore=shutil.ignore_patterns("summary.*", "*.hgrm"))
    run = orjson.loads((SAMPLE / "summary.json").read_bytes())["run"]
    head = {k: run[k] for k in RunHead.__annotations__}
    start = {"schema": 1, "run": head, "slo": [], "fault_windows": ["cancel-a-third"]}
    start |= {"agent": False, "pid": 1, "host": "elsewhere"}
    if starts is not None:
        start["fault_starts_s"] = starts
    (folder / "run.json").write_bytes(orjson.dumps(start))
    return folder


_BUCKET_LINE = re.compile(r"([\d.]+)-([\d.]+) +ms █* ?(\d+)")


@pytest.mark.parametrize("size", [(80, 24), (100, 30), (120, 48)])
async def test_every_bucket_sparkline_and_verdict_shows_at_each_size(
    tmp_path: Path, size: tuple[int, int]
) -> None:
    """At 80x24 the histogram showed 3 of itl_ms's 17 buckets, two of the three
    sparklines had no row and ``driver: BUSY`` was cut; now the buckets are merged to
    the rows there are, each series is one line, and the driver's state comes first.
    Then ``output tokens/s`` lost its figure and the server line its end (``running 0
    waiting 0   target RSS Mi...``): each series' last value and every server figure
    show too."""
    run = _busy_run(tmp_path / "busy")
    summary = orjson.loads((run / "summary.json").read_bytes())
    assert summary["driver"]["busy"] and not summary["slo"]["met"]
    expected: tuple[str, ...] = ("itl_ms (all)", "requests/s", "output tokens/s", "TTFT p95 (ms)")
    expected += ("driver: BUSY", "12.343 met", "3.649 MISSED", "0 met", "cancel-a-third", "HELD")
    app = Dashboard(replay=ReplaySource(run))
    async with app.run_test(size=size) as pilot:
        await pilot.press("m")  # itl_ms: the metric with the most buckets
        rows = await _screen_when(app, pilot, lambda t: all(s in t for s in expected))
        frame = app.last_frame
        widgets = {wid: app.query_one(f"#{wid}", ZeroSparkline) for wid in SPARKS}
        sparks = {wid: w.region for wid, w in widgets.items()}
        bars = {wid: w.render_line(w.size.height - 1).text for wid, w in widgets.items()}
    assert frame is not None and frame.metric == "itl_ms" and len(frame.buckets) > 8
    text = "".join(rows)
    # The buckets on screen cover the whole distribution, end to end and every count.
    shown = [m.groups() for row in rows if (m := _BUCKET_LINE.search(row))]
    assert shown and shown[0][0] == "0"  # the lowest bucket (1 µs), zero gaps included
    assert float(shown[-1][1]) == pytest.approx(frame.buckets[-1][1], rel=0.01)
    assert all(a[1] == b[0] for a, b in itertools.pairwise(shown))
    assert sum(int(c) for _, _, c in shown) == sum(c for _, _, c in frame.buckets)
    # Every sparkline has a row on screen, and its bars are drawn there.
    for wid, region in sparks.items():
        assert region.height >= 1 and region.bottom <= size[1] - 1, wid
        assert set(bars[wid]) & set("▁▂▃▄▅▆▇█"), wid
    for fragment in expected:
        assert fragment in text, fragment
    # Each series' last value, beside its label: output tokens/s was cut at 80 columns.
    tok, req = frame.tok_rate[-1], frame.req_rate[-1]
    assert tok > 1000, tok
    assert re.search(rf"output tokens/s +{tok:.0f}(?!\d)", text), tok
    assert re.search(rf"requests/s +{req:.1f}(?!\d)", text), req
    assert re.search(rf"TTFT p95 \(ms\) +{frame.ttft_p95[-1]:.1f}(?!\d)", text)
    # Every figure of the last scrape, whole.
    last = read_jsonl(run / "metrics.jsonl")[-1]
    assert re.search(rf"running +{last['running']:.3g}(?!\d)", text), last
    assert re.search(rf"waiting +{last['waiting']:.3g}(?!\d)", text), last
    assert re.search(rf"RSS[ A-Za-z]* {last['target_rss_mib']:.3g}(?!\d)", text), last


@pytest.mark.parametrize("size", [(80, 24), (120, 48)])
async def test_a_replays_last_frame_says_which_figures_are_of_the_last_interval(
    size: tuple[int, int],
) -> None:
    """Its last frame showed ``requests/s 2.6`` and ``acceptance 0.444   running 2`` of
    the last interval, unlabelled, beside ``8.3 req/s ... over the run``: each panel of
    per-interval figures now says which interval (the series the hlog's last, the server
    its last two scrapes), so no two figures on screen seem to contradict."""
    _, length, _ = read_intervals(SAMPLE / "histograms.hlog")["e2e_ms"][-1]
    scrapes = [s["t_s"] for s in read_jsonl(SAMPLE / "metrics.jsonl") if s["ok"]]
    series = f"figures: last {length:.1f}".removesuffix(".0") + " s"
    server = f"server, last {scrapes[-1] - scrapes[-2]:.1f}".removesuffix(".0") + " s"
    shown = (series, server, "the run")  # "over the run": wrapped at 80 columns
    app = Dashboard(replay=ReplaySource(SAMPLE))
    async with app.run_test(size=size) as pilot:
        text = "".join(await _screen_when(app, pilot, lambda t: all(s in t for s in shown)))
        last = app.last_frame
        await pilot.press("left")
        earlier = "".join(await _screen_when(app, pilot, lambda t: "the run" not in t))
    assert last is not None and "over the run" in render_counts(last)
    for fragment in shown:
        assert fragment in text, fragment
    if size[0] == 80:  # on a line of its own, not wrapped into the next metric's row
        assert "(over the run)" in text
    # An earlier interval: its own length, and no run-wide rate beside it.
    assert "figures: last 1 s" in earlier and "the run" not in earlier


def test_a_replays_last_interval_of_milliseconds_is_folded_and_its_last_scrape_shown(
    tmp_path: Path,
) -> None:
    """A run's log often ends with an interval of a few milliseconds: its last frame
    read ``figures: last 0 s`` and ``requests/s 250.0`` beside 9.0 req/s over the run.
    And the run's last scrape, taken after its last request's interval, was left out:
    the server panel showed ``running 7`` beside ``in flight 0``."""
    run = tmp_path / "run"
    shutil.copytree(SAMPLE, run)
    before = read_intervals(run / "histograms.hlog")
    start, length, kept = before["e2e_ms"][-1]
    tail = new_histogram()
    for _ in range(5):
        tail.record_value(50_000)
    with open(run / "histograms.hlog", "a", encoding="ascii") as log:
        for tag in before:
            part = tail if tag.startswith("e2e_ms") else new_histogram()
            payload = part.encode().decode("ascii")
            log.write(f"Tag={tag},{start + length:.3f},0.020,50.000,{payload}\n")
    scrape = read_jsonl(run / "metrics.jsonl")[-1]
    end = start + length + 0.1
    later = {**scrape, "t_s": end, "t_end_s": end, "running": 0.0, "target_rss_mib": 77.7}
    with open(run / "metrics.jsonl", "ab") as lines:
        lines.write(orjson.dumps(later) + b"\n")
    source = ReplaySource(run)
    assert source.n == len(before["e2e_ms"])  # folded, not one more
    frame = source.frame("e2e_ms", "all")
    assert frame.interval_s == pytest.approx(length + 0.020)
    assert frame.req_rate[-1] == pytest.approx((kept.get_total_count() + 5) / (length + 0.020))
    assert series_title(frame) == f"figures: last {length + 0.02:.1f} s".replace(".0 s", " s")
    assert frame.server is not None
    assert (frame.server["running"], frame.server["target_rss_mib"]) == (0.0, 77.7)
    # An interval of half a second or more stays as it was (the sample's last, 0.614 s).
    assert ReplaySource(SAMPLE).n == len(before["e2e_ms"])


async def test_a_rebuilt_runs_note_is_on_the_dashboard(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """It was logged before the dashboard took the screen, and read only after quitting."""
    source = ReplaySource(_killed_run(tmp_path / "killed"))
    assert f"{REBUILT_NOTE}; loadtest summarize" in caplog.text  # still printed, as before
    app = Dashboard(replay=source)
    async with app.run_test(size=(80, 24)) as pilot:
        text = "".join(await _screen_when(app, pilot, lambda t: REBUILT_NOTE in t))
    assert REBUILT_NOTE in text
    assert "the run was killed: fault window" in text  # its window's verdict, as before


def test_a_summarized_runs_notice_says_summarize_wrote_its_summary(tmp_path: Path) -> None:
    """Once ``summarize`` wrote the rebuilt summary.json, the notice still read "no
    summary.json: rebuilt ..."."""
    from loadtest.cli.main import main

    folder = _killed_run(tmp_path / "killed")
    assert ReplaySource(folder).frame("ttft_ms", "all").notice == REBUILT_NOTE
    assert main(["summarize", str(folder)]) == 0
    notice = ReplaySource(folder).frame("ttft_ms", "all").notice
    assert notice == "summary.json rebuilt by loadtest summarize (the run was killed)"


def test_progress_to_a_duration_and_to_a_count() -> None:
    assert progress(6, 1, 10, None, 0) == (6 / 11, 5)
    frac, eta = progress(11, 1, None, 100, 25)
    assert frac == 0.25 and eta == pytest.approx(30.0)
    assert progress(3, 0, None, None, 5) == (None, None)


def _linked(refresh_s: float = 0.1) -> tuple[Dashboard, DashboardFeed]:
    """A dashboard and a run's feed, both in this process: the socket pair the dashboard's
    own process gets, without the process."""
    run_end, dashboard_end = socket.socketpair()
    return Dashboard(link=dashboard_end), DashboardFeed(run_end, refresh_s)


def _toasts(app: Dashboard) -> list[Region]:
    return [t.region for t in app.screen.query(Toast)]


async def test_live_dashboard_keys_and_panels(tmp_path: Path) -> None:
    sc = make_scenario(
        {"mode": "closed", "concurrency": 4, "duration_s": 60, "grace_s": 1},
        sources=TWO_CATEGORIES,
    )
    pool, _ = build_pool(sc)
    async with InProcessSim(FAST_SIM) as sim:
        cfg = RunConfig(scenario=sc, endpoint=sim.url, model="sim-llm", run_dir=tmp_path)
        runner = Runner(cfg, pool)
        app, feed = _linked()
        async with app.run_test(size=(120, 48), notifications=True) as pilot:
            run = asyncio.create_task(drive(runner, feed))

            async def until(cond: Callable[[], object]) -> None:
                """Wait (up to 20 s) for what the test asserts next, not a fixed pause."""
                deadline = time.monotonic() + 20.0
                while not cond() and time.monotonic() < deadline:
                    await pilot.pause(0.05)

            def ttft_p99() -> float:
                cell = app.query_one("#latency", DataTable).get_cell("ttft_ms", "p99")
                text = str(cell).strip()
                return float(text) if text not in ("", "-") else 0.0

            await until(lambda: app.last_frame is not None and app.last_frame.ok > 0)
            await until(lambda: ttft_p99() > 0)
            f = app.last_frame
            assert f is not None and f.phase == "measuring" and f.ok > 0
            assert f.categories == ("all", "chat", "code")
            assert ttft_p99() > 0
            # Sent counts the requests in flight too, as the replay does.
            assert f.sent == f.ok + f.failed + f.cancelled + f.in_flight
            shown = {b.binding.description for b in app.screen.active_bindings.values()}
            assert {"stop", "pause", "metric"} <= shown and not {"quit", "step"} & shown
            await pilot.press("m")
            await until(lambda: "itl_ms (all)" in _screen_text(app))
            assert app.metric == "itl_ms" and "itl_ms (all)" in _screen_text(app)
            await pilot.press("c")
            await until(lambda: app.last_frame is not None and app.last_frame.category == "chat")
            assert app.category == "chat"
            assert app.last_frame is not None and app.last_frame.category == "chat"
            await pilot.press("p")
            await until(lambda: app.last_frame is not None and app.last_frame.phase == "paused")
            assert runner.paused
            assert app.last_frame is not None and app.last_frame.phase == "paused"
            # The note takes one line over the footer's right end, and covers no panel.
            await until(lambda: "load paused" in _screen_line(app, 47))
            assert "load paused" in _screen_line(app, 47)
            (note,) = _toasts(app)
            assert (note.y, note.height) == (47, 1) and note.right <= 120 and note.width < 20
            for panel in (
                "#header",
                "#latency",
                "#counts",
                "#series",
                "#histogram",
                "#faults",
                "#verdicts",
                "#server",
            ):
                assert not note.overlaps(app.query_one(panel).region), panel
            sent = runner.snapshot().sent
            # Unpaused, FAST_SIM's ~20 ms answers on 4 slots are ~200 a second: 0.5 s
            # without a request sent is the pause holding, not chance.
            await pilot.pause(0.5)
            assert runner.snapshot().sent == sent  # nothing offered while paused
            await pilot.press("p")
            await until(lambda: runner.snapshot().sent > sent)
            assert runner.snapshot().sent > sent
            await until(lambda: "load resumed" in _screen_line(app, 47))
            assert len(_toasts(app)) == 1  # in place of "load paused", not above it
            await pilot.press("question_mark")
            assert app.query_one("#help").has_class("shown")
            assert "p pause/resume" in _screen_text(app) and "←/→" not in _screen_text(app)
            await pilot.press("s")
            await until(lambda: bool(app.screenshots))
            assert app.screenshots and app.screenshots[0].parent == tmp_path
            assert app.screenshots[0].read_text().startswith("<svg")
            await pilot.press("q")
            await until(run.done)
        outcome = await run
    assert outcome.interrupted
    assert app.last_frame is not None and app.last_frame.phase == "ended"
    m = outcome.metrics
    assert m.sent == m.outcomes["ok"] + m.outcomes["failed"] + m.outcomes["cancelled"]
    assert m.sent == len(read_jsonl(tmp_path / "requests.jsonl"))
    assert app.last_frame.sent == m.sent and app.last_frame.in_flight == 0


async def test_a_run_goes_on_without_a_dashboard_that_went_away(tmp_path: Path) -> None:
    sc = make_scenario({"mode": "closed", "concurrency": 4, "requests": 20})
    run_end, dashboard_end = socket.socketpair()
    dashboard_end.close()  # its process ended before it drew anything
    async with InProcessSim(FAST_SIM) as sim:
        runner = Runner(RunConfig(sc, sim.url, "sim-llm", tmp_path), build_pool(sc)[0])
        started = time.monotonic()
        outcome = await drive(runner, DashboardFeed(run_end))
    assert outcome.metrics.outcomes["ok"] == 20
    # The load did not wait out the dashboard's start-up allowance for one that is gone.
    assert time.monotonic() - started < START_S


async def test_a_dashboard_that_asked_for_no_state_still_gets_the_windows_and_verdicts(
    tmp_path: Path,
) -> None:
    """The run's end came before the dashboard drew anything (a short run, a slow start):
    its hello holds the windows to show, and its one state the run's verdicts."""
    from loadtest.features.faults.live_windows import FaultFeed
    from loadtest.features.faults.plan import FaultEvent, FaultPlan
    from loadtest.features.faults.rig import FaultRig
    from loadtest.tui.link import Hello, LiveState, receive

    sc = make_scenario({"mode": "closed", "concurrency": 2, "requests": 10})
    idle = FaultEvent(kind="idle", at_s=30, duration_s=1)  # after the run: not reached
    rig = FaultRig(FaultPlan(events=(idle,)))
    run_end, dashboard_end = socket.socketpair()
    async with InProcessSim(FAST_SIM) as sim:
        runner = Runner(RunConfig(sc, sim.url, "sim-llm", tmp_path), build_pool(sc)[0], hooks=[rig])
        feed = DashboardFeed(run_end, close_s=0.2)
        await feed.open(runner, wait_s=0)  # the dashboard is not up: the load goes on
        outcome = await runner.run()
        await feed.finish(runner, outcome)
    reader, writer = await asyncio.open_connection(sock=dashboard_end)
    hello, last = await receive(reader), await receive(reader)
    writer.close()
    assert isinstance(hello, Hello) and isinstance(last, LiveState) and feed.states == 1
    windows = hello.feeds["faults"]
    assert isinstance(windows, FaultFeed) and windows.plan.events == (idle,)
    assert last.ending is not None
    (entry,) = cast(list[FaultVerdict], last.ending.blocks["faults"])
    assert entry["verdict"] == "not_exercised"


def test_a_run_under_the_dashboards_process_accounts_like_a_plain_run(tmp_path: Path) -> None:
    """The dashboard in its own process (headless), as ``loadtest run`` starts it."""
    sc = make_scenario({"mode": "closed", "concurrency": 4, "requests": 60}, sources=TWO_CATEGORIES)
    with SimProcess(FAST_SIM) as sim:

        def prepare_in(run_dir: Path) -> Callable[[], Awaitable[Runner]]:
            async def prepare() -> Runner:
                return Runner(RunConfig(sc, sim.url, "sim-llm", run_dir), build_pool(sc)[0])

            return prepare

        _, plain = run_here(prepare_in(tmp_path / "plain"), False)
        last = tmp_path / "last.svg"
        # At its own priority and with time to close: the suite's other workers keep both
        # cores busy, and a dashboard at nice 19 beside them was stopped before its end.
        process = DashboardProcess(
            headless=(120, 48), last_screen=last, refresh_s=0.05, nice=0, close_s=60
        )
        with process as feed:
            _, shown = run_here(prepare_in(tmp_path / "tui"), False, feed)
    assert process.returncode == 0 and feed.states >= 2
    a, b = plain.metrics, shown.metrics
    assert a.outcomes == b.outcomes and a.sent == b.sent == 60 + 0
    rows_a = read_jsonl(tmp_path / "plain" / "requests.jsonl")
    rows_b = read_jsonl(tmp_path / "tui" / "requests.jsonl")
    assert sorted(r["index"] for r in rows_a) == sorted(r["index"] for r in rows_b)
    assert {r["outcome"] for r in rows_b} == {"ok"}
    # The dashboard's process drew the run to its end.
    screen = last.read_text().replace("&#160;", " ")
    assert "ended" in screen and "sent 60" in screen and "ok 60" in screen


def test_replay_steps_through_the_intervals() -> None:
    src = ReplaySource(SAMPLE)
    assert src.n >= 4
    last = src.frame("ttft_ms", "all")
    src.step(-100)
    first = src.frame("ttft_ms", "all")
    assert first.sent < last.sent and first.elapsed_s < last.elapsed_s
    assert last.faults[0].state == "ended" and last.faults[0].verdict == "held"
    assert first.faults[0].verdict is None
    code = src.frame("e2e_ms", "code")
    assert code.categories == ("all", "chat", "code")
    counts = {row[0]: row[1] for row in code.percentiles}
    assert 0 < counts["e2e_ms"] < {row[0]: row[1] for row in first.percentiles}["e2e_ms"] + 999


def test_replay_counts_what_was_sent_and_in_flight_from_the_records() -> None:
    # "sent" is every request that had gone out by the interval's end, the ones still
    # in flight included, as the live dashboard counts it; not the ended ones alone.
    src = ReplaySource(SAMPLE)
    rows = read_jsonl(SAMPLE / "requests.jsonl")
    src.step(-100)
    seen_in_flight = False
    for _ in range(src.n):
        f = src.frame("ttft_ms", "all")
        t_ms = f.elapsed_s * 1000
        went = [r for r in rows if r["sent_ms"] <= t_ms]
        ended = [r for r in went if r["end_ms"] <= t_ms]
        assert f.sent == len(went)
        assert f.in_flight == len(went) - len(ended)
        assert f.ok + f.failed + f.cancelled == len(ended)
        assert f.sent == f.ok + f.failed + f.cancelled + f.in_flight
        # The warm-up's requests are among those counted, and not in the percentiles:
        # the panel says how many ("sent 236 ok 236" stood beside counts of 197).
        assert f.warmup == sum(1 for r in went if r["warmup"])
        assert (f"warm-up {f.warmup}" in render_counts(f)) == (f.warmup > 0)
        seen_in_flight |= f.in_flight > 0
        src.step(1)
    assert seen_in_flight  # the check above could tell the two counts apart
    # The last frame's warm-up count is the one the run's summary wrote.
    summary = orjson.loads((SAMPLE / "summary.json").read_bytes())
    assert f.warmup == summary["requests"]["warmup"] > 0
    first = ReplaySource(SAMPLE)
    first.step(-100)
    f = first.frame("ttft_ms", "all")
    assert f.in_flight > 0 and f.sent > f.ok  # interval 1: sent 46 with 3 in flight


def test_sparkline_bars_start_at_zero() -> None:
    assert spark_rows([0.0], 4, 2) == ["    ", "    "]  # a zero draws nothing
    assert spark_rows([], 3, 1) == ["   "]
    assert spark_rows([5.0], 4, 2) == ["████", "████"]  # one value is the largest
    assert spark_rows([0.0, 8.0], 4, 1) == ["  ██"]
    assert spark_rows([40.0, 30.0], 2, 1) == ["█▆"]  # a dip is a dip, not a fall to 0
    assert spark_rows([0.01, 100.0], 2, 1) == ["▁█"]  # above zero: at least the lowest
    assert spark_rows([1, 2, 3, 4, 5, 6, 7, 8], 4, 1) == ["▂▄▆█"]  # max of each share


async def test_the_sparkline_widget_draws_a_zero_as_nothing() -> None:
    class Sparks(App[None]):
        def compose(self) -> ComposeResult:
            yield ZeroSparkline([0.0], id="zero")
            yield ZeroSparkline([0.0, 0.0, 6.0], id="rise")

    app = Sparks()
    async with app.run_test(size=(6, 2)) as pilot:
        await pilot.pause(0.1)
        zero = app.query_one("#zero", ZeroSparkline).render_line(0).text
        rise = app.query_one("#rise", ZeroSparkline).render_line(0).text
    assert zero == "      "
    assert rise == "    ██"


async def test_replay_lists_only_the_keys_that_apply_there() -> None:
    app = Dashboard(replay=ReplaySource(SAMPLE))
    async with app.run_test(size=(120, 48)) as pilot:
        # The footer is drawn a moment after the app starts: wait for it (bounded), not a
        # fixed pause that a busy machine outran (an empty footer line, twice in CI runs).
        footer = ""
        for _ in range(50):
            await pilot.pause(0.1)
            footer = _screen_line(app, 47)
            if footer.strip():
                break
        shown = {
            b.binding.description for b in app.screen.active_bindings.values() if b.binding.show
        }
        await pilot.press("p")  # not bound in a replay: nothing happens
        assert app.is_running
        await pilot.press("q")
        await pilot.pause(0.1)
        quit_on_q = not app.is_running
    assert shown == {"quit", "step", "metric", "category", "screenshot", "keys"}
    assert "quit" in footer and "step" in footer
    assert "pause" not in footer and "stop" not in footer
    assert quit_on_q


async def _snapshot(app: Dashboard, keys: list[str]) -> str:
    async with app.run_test(size=(120, 48)) as pilot:
        await pilot.pause(0.2)
        for k in keys:
            await pilot.press(k)
        await pilot.pause(0.2)
        return app.export_screenshot()


@pytest.mark.parametrize(
    ("name", "keys"),
    [
        ("replay-end", []),
        ("replay-start-e2e-code", ["home", "m", "m", "m", "c", "c"]),
        ("replay-keys-help", ["left", "question_mark"]),
    ],
)
async def test_svg_snapshots_of_the_main_screens(name: str, keys: list[str]) -> None:
    svg = await _snapshot(Dashboard(replay=ReplaySource(SAMPLE)), keys)
    path = SNAPSHOTS / f"{name}.svg"
    if UPDATE or not path.exists():
        SNAPSHOTS.mkdir(exist_ok=True)
        path.write_text(svg)
        if not UPDATE:
            pytest.fail(f"{path} was missing and has been written; check it and commit it")
    assert svg == path.read_text(), f"{name} differs from {path}; see LOADTEST_UPDATE_SNAPSHOTS"


def test_view_of_a_folder_that_is_not_a_run_is_a_usage_error(tmp_path: Path) -> None:
    from loadtest.cli.main import main

    assert main(["view", str(tmp_path)]) == 2


def test_percentiles_read_from_the_counts_equal_hdrhs_own() -> None:
    import random

    from loadtest.tui.frame import percentile_rows

    h = new_histogram()
    rng = random.Random(3)
    for _ in range(5000):
        h.record_value(max(1, int(rng.lognormvariate(9, 1.5))))
    (_, n, p50, p90, p99, top) = percentile_rows({"ttft_ms": h})[0]
    assert n == 5000
    assert [p50, p90, p99] == [h.get_value_at_percentile(q) / 1e3 for q in (50, 90, 99)]
    assert top == h.get_max_value() / 1e3


async def test_the_dashboards_last_frame_says_what_the_summary_says(tmp_path: Path) -> None:
    """A fault window under the dashboard: its verdicts, counts (fallbacks as ints), SLO
    checks and busy flag equal summary.json's; nothing shows before the window opens."""
    from loadtest.app.run.job import finish_run
    from loadtest.features.faults.block import fault_figures
    from loadtest.features.faults.proxy import FaultProxy
    from loadtest.features.faults.rig import FaultRig
    from loadtest.model.io import load_summary
    from loadtest.sim import SimConfig
    from loadtest.tui.frame import render_faults, render_verdicts

    sc = make_scenario(
        {"mode": "closed", "concurrency": 4, "duration_s": 7},
        max_tokens=48,
        # A p95 (20 values told): a p99 needs 100, which a busy machine's 7 s may not give.
        slo={"ttft_ms": {"p95": 60000.0}, "tpot_ms": {"p95": 0.001}, "error_rate": 0.5},
        faults={"events": [{"kind": "draft_down", "at_s": 2, "duration_s": 3}]},
    )
    pool, counts = build_pool(sc)
    spec = SimConfig(ttft_ms=5.0, itl_ms=3.0, ttft_sigma=0.1, itl_sigma=0.1, draft_timeout_ms=50)
    frames: list[Frame] = []
    async with InProcessSim(SimConfig(role="draft", draft_token_ms=0.2)) as draft:
        host, port = draft.url.removeprefix("http://").split(":")
        proxy = FaultProxy(host, int(port))
        await proxy.start()
        target_cfg = dataclasses.replace(spec, draft_url=proxy.url)
        async with InProcessSim(target_cfg) as target:
            rig = FaultRig(FAULTS.of(sc), proxy=proxy, metrics_url=target.url + "/metrics")

            runner = Runner(
                RunConfig(sc, target.url, "sim-llm", tmp_path / "run"),
                pool,
                hooks=[rig, rig.load_hook()],
            )
            app, feed = _linked()
            async with app.run_test(size=(120, 48)) as pilot:
                run = asyncio.create_task(drive(runner, feed))
                while not run.done():
                    await pilot.pause(0.2)
                    if app.last_frame is not None:
                        frames.append(app.last_frame)
                outcome = await run
        await proxy.close()
    summary = finish_run(runner.config, outcome, counts, {}, runner.stale_retries)
    on_disk = load_summary(runner.config.run_dir)
    assert on_disk["faults"] == summary["faults"]
    last = app.last_frame
    assert last is not None and last.phase == "ended"
    (row,), (entry,) = last.faults, on_disk["faults"]
    assert (row.state, row.provisional) == ("ended", False)
    assert (row.verdict, row.reason) == (entry["verdict"], entry["reason"])
    assert row.figures == tuple(fault_figures(entry))
    fallbacks = entry.get("fallbacks")
    assert isinstance(fallbacks, int) and fallbacks >= 1
    assert f"fallbacks {fallbacks}" in render_faults(last)
    assert f"fallbacks {fallbacks}.0" not in render_faults(last)
    assert last.verdicts is not None and not last.verdicts.provisional
    assert last.verdicts.slo == on_disk["slo"]
    assert [c["met"] for c in on_disk["slo"]["checks"]] == [True, False, True]
    assert "driver" in on_disk and last.verdicts.driver == on_disk["driver"]
    text = render_verdicts(last)
    assert "tpot_ms.p95 <= 0.001" in text and "MISSED" in text and "so far" not in text
    # While the run went on: no verdict or count before the window opened, and the
    # provisional ones said so.
    early = [f for f in frames if f.faults and f.faults[0].state == "upcoming"]
    assert early and all(not f.faults[0].figures and f.faults[0].verdict is None for f in early)
    running = [f for f in frames if f.phase != "ended"]
    judged = [f.faults[0] for f in running if f.faults and f.faults[0].verdict is not None]
    assert judged and all(r.provisional for r in judged)
    assert all(f.verdicts is None or f.verdicts.provisional for f in running)


def test_a_replays_last_frame_shows_the_runs_rate_and_nothing_left() -> None:
    # Its last frame showed the last interval's req/s (32.8 for a run at 20) and ETA ?.
    src = ReplaySource(SAMPLE)
    last = src.frame("ttft_ms", "all")
    put = src.summary["throughput"]
    assert last.run_rate == (put["requests_per_s"], put["output_tokens_per_s"])
    assert f"{put['requests_per_s']:.1f} req/s" in render_counts(last)
    assert "over the run" in render_counts(last) and last.eta_s == 0.0
    src.step(-100)
    first = src.frame("ttft_ms", "all")
    assert first.run_rate is None and first.eta_s is not None and first.eta_s > 0
    assert "over the run" not in render_counts(first)


def test_a_rebuilt_replay_says_why_its_fault_windows_have_no_verdict(tmp_path: Path) -> None:
    # A run killed before its window said "no fault windows".
    frame = ReplaySource(_killed_run(tmp_path / "killed")).frame("ttft_ms", "all")
    assert frame.faults == ()
    text = render_faults(frame)
    # It said "... fault verdicts of cancel-a-third: they need what the run observed of
    # its target".
    assert text == (
        "the run was killed: fault window cancel-a-third: no verdict, as one needs the "
        "times the fault really began and ended, which only a run that finishes writes"
    )


def test_a_run_killed_before_its_window_says_the_window_was_not_reached(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A window planned after the last line said "no verdict, as one needs the times the
    # fault really began and ended": it never began.
    from loadtest.cli.main import main

    folder = _killed_run(tmp_path / "killed", starts=[900.0])
    text = render_faults(ReplaySource(folder).frame("ttft_ms", "all"))
    assert text.startswith("the run was killed: fault window cancel-a-third: not reached")
    assert "before 900 s" in text and "no verdict" not in text
    assert main(["summarize", str(folder)]) == 0
    said = " ".join(capsys.readouterr().out.split())
    assert "FAULTS NOT JUDGED: fault window cancel-a-third: not reached" in said, said
    # One planned inside the run's time opened, and has no verdict, as before.
    early = _killed_run(tmp_path / "early", starts=[0.5])
    assert "no verdict" in render_faults(ReplaySource(early).frame("ttft_ms", "all"))


def test_summarize_of_a_killed_run_says_its_fault_windows_were_not_judged(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # summarize printed no faults section and no word of why: the window was just gone.
    from loadtest.cli.main import main

    folder = _killed_run(tmp_path / "killed")
    assert main(["summarize", str(folder)]) == 0
    said = " ".join(capsys.readouterr().out.split())
    assert "FAULTS NOT JUDGED: fault window cancel-a-third: no verdict" in said, said
