"""The fault windows while a run goes (``features.faults.live_windows``): what the rig feeds the
dashboard, and the timeline the dashboard's process makes of it."""

from __future__ import annotations

from pathlib import Path

from loadtest.features.faults.live_windows import (
    FaultFeed,
    FaultTimeline,
    judge_so_far,
    render_timeline,
)
from loadtest.features.faults.plan import FaultEvent, FaultPlan
from loadtest.features.faults.rig import FaultRig
from loadtest.features.scrape import Scraper
from loadtest.model.verdict import RequestRow
from loadtest.transport.side import SideHttp
from tests.verdict_rows import request_rows as _rows

DOWN = FaultEvent(kind="draft_down", at_s=10, duration_s=5)


def test_the_rig_feeds_its_plan_its_windows_so_far_and_its_log_of_samples(
    tmp_path: Path,
) -> None:
    rig = FaultRig(FaultPlan(events=(DOWN,)))
    feed = rig.live_feed()
    assert feed["server"] == []  # no scraper: nothing scraped
    faults = feed["faults"]
    assert isinstance(faults, FaultFeed) and faults.plan.events == (DOWN,)
    rig.observed[0]["start_s"] = 10.2
    assert faults.observed == ({},)  # a copy: the rig's loop goes on writing its own
    rig.scraper = Scraper("http://127.0.0.1:9/metrics", tmp_path / "m.jsonl", http=SideHttp())
    rig.scraper.samples.extend([{"t_s": 1.0}, {"t_s": 2.0}])
    again = rig.live_feed()
    # The scraper's own list, a log: the dashboard's feed sends what it has not sent.
    assert again["server"] is rig.scraper.samples
    assert isinstance(again["faults"], FaultFeed)
    assert again["faults"].observed == ({"start_s": 10.2},)


def test_the_timeline_shows_the_windows_then_judges_them_so_far_then_the_runs_own() -> None:
    rows: list[RequestRow] = _rows(10_000, 15_000, 2.0)
    timeline = FaultTimeline()
    assert timeline.rows(0.0) == () and not timeline.begun
    plan = FaultPlan(events=(DOWN,))
    timeline.take(FaultFeed(plan, ({},)))
    assert not timeline.begun  # no window began: nothing to judge, rows not read
    (row,) = timeline.rows(12.0)
    assert (row.state, row.verdict) == ("active", None)
    timeline.take(FaultFeed(plan, ({"start_s": 10.0, "end_s": 15.0},)))
    assert timeline.begun
    timeline.judge(rows, [])
    (row,) = timeline.rows(31.0)
    assert (row.state, row.verdict, row.provisional) == ("ended", "held", True)
    assert "HELD (so far)" in render_timeline(timeline.rows(31.0))
    # The run's own verdicts win, and every window is over once the run is.
    final = judge_so_far(plan, [{"start_s": 10.0, "end_s": 15.0}], _rows(10_000, 15_000, 9.0), [])
    timeline.end(final)
    timeline.judge(rows, [])  # a late provisional judgement changes nothing now
    (row,) = timeline.rows(12.0)
    assert (row.state, row.verdict, row.provisional) == ("ended", "degraded", False)
    assert render_timeline((), "the run was killed") == "the run was killed"


def test_nothing_is_judged_before_a_window_began() -> None:
    plan = FaultPlan(events=(DOWN,))
    assert judge_so_far(plan, [{}], _rows(0, 0, 1.0), []) == ()
    assert judge_so_far(FaultPlan(), [], _rows(0, 0, 1.0), []) == ()
    (entry,) = judge_so_far(plan, [{"start_s": 10.0}], _rows(0, 0, 1.0), [])
    assert entry["verdict"] == "held"
