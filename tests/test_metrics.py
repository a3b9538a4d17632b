"""Recorders, corrections, the interval log and the summary document."""

from __future__ import annotations

from pathlib import Path

import pytest

from loadtest.measure.hdr import metric_stats
from loadtest.measure.recorders import Metrics
from loadtest.model.record import RequestRecord
from loadtest.report import HlogWriter, build_summary, read_hlog
from tests.conftest import make_scenario

MS = 1_000_000


def rec(
    i: int,
    intended: int,
    sent: int,
    first: int,
    end: int,
    tokens: int = 5,
    category: str = "c",
    outcome: str = "ok",
) -> RequestRecord:
    chunks = tuple(first + k * 10 * MS for k in range(tokens))
    return RequestRecord(
        index=i,
        prompt_id="p",
        source="inline",
        category=category,
        warmup=False,
        intended_ns=intended,
        sent_ns=sent,
        end_ns=end,
        outcome=outcome,
        first_token_ns=first,
        last_token_ns=chunks[-1],
        token_chunk_ns=chunks,
        output_tokens=tokens,
    )


def test_open_loop_corrected_latency_is_measured_from_the_intended_time() -> None:
    m = Metrics(closed_loop=False, t0_ns=0)
    # Intended at 0, sent 100 ms late (the client stalled), first token 20 ms after send.
    m.add(rec(0, 0, 100 * MS, 120 * MS, 200 * MS))
    m.roll(1.0)
    h = m.total.hists
    assert h["ttft_ms"].get_max_value() == pytest.approx(20_000, rel=0.001)
    assert h["ttft_ms_corrected"].get_max_value() == pytest.approx(120_000, rel=0.001)
    assert h["dispatch_lag_ms"].get_max_value() == pytest.approx(100_000, rel=0.001)
    assert h["itl_ms"].get_total_count() == 4
    assert h["tpot_ms"].get_max_value() == pytest.approx(10_000, rel=0.001)


def test_closed_loop_correction_fills_in_the_requests_a_stall_hid() -> None:
    m = Metrics(closed_loop=True, t0_ns=0)
    for i in range(10):
        m.add(rec(i, 0, 0, 5 * MS, 10 * MS))  # ten quick 10 ms requests
    m.add(rec(10, 0, 0, 5 * MS, 1000 * MS))  # one 1 s stall
    m.roll(1.0)
    raw = m.total.hists["e2e_ms"].get_total_count()
    corrected = m.total.hists["e2e_ms_corrected"].get_total_count()
    assert raw == 11
    assert corrected > 11  # synthetic samples for the requests the stall kept from being sent


def test_closed_loop_correction_counts_what_a_rebuild_from_the_lines_counts() -> None:
    # 1000.96 µs against a mean of 1000.48: truncated, the value equals the expected
    # interval (one sample); at the line's 0.1 µs it is 1001 against 1000 (two). The run
    # must count what a summary rebuilt from its requests.jsonl counts.
    records = [rec(0, 0, 0, MS // 2, 1_000_000), rec(1, 0, 0, MS // 2, 1_000_960)]
    counts = []
    for batch in (records, [RequestRecord.from_json(r.to_json(0)) for r in records]):
        m = Metrics(closed_loop=True, t0_ns=0)
        for r in batch:
            m.add(r)
        m.roll(1.0)
        counts.append(m.total.hists["e2e_ms_corrected"].get_total_count())
    assert counts == [3, 3]


def test_failed_and_warmup_requests_are_counted_but_not_measured() -> None:
    m = Metrics(closed_loop=False, t0_ns=0)
    m.add(rec(0, 0, 0, 1 * MS, 2 * MS, outcome="failed"))
    m.add(
        RequestRecord(
            index=1,
            prompt_id="p",
            source="s",
            category="c",
            warmup=True,
            intended_ns=0,
            sent_ns=0,
            end_ns=1,
            outcome="ok",
        )
    )
    m.roll(1.0)
    assert m.sent == 2 and m.warmup_requests == 1
    assert m.total.hists["e2e_ms"].get_total_count() == 0


def test_hlog_round_trip_through_hdrh_reader(tmp_path: Path) -> None:
    m = Metrics(closed_loop=False, t0_ns=0)
    path = tmp_path / "h.hlog"
    w = HlogWriter(path, 1_700_000_000.0)
    for second in range(3):
        for i in range(5):
            m.add(rec(i, 0, 0, (10 + second) * MS, 50 * MS, category=f"c{i % 2}"))
        w.write_interval(m.roll(1.0), float(second), 1.0)
    w.close()
    totals = read_hlog(path)
    assert set(totals) >= {"ttft_ms", "e2e_ms_corrected", "dispatch_lag_ms"}
    for tag, hist in totals.items():
        assert hist.get_total_count() == m.total.hists[tag].get_total_count(), tag
        assert hist.get_max_value() == m.total.hists[tag].get_max_value(), tag
    # read_hlog is loadtest's own parser (it leaves out a line a kill cut short); hdrh's
    # reader, as other tools use it, reads the same intervals.
    from hdrh.log import HistogramLogReader

    from loadtest.measure.recorders import new_histogram

    reader = HistogramLogReader(str(path), new_histogram())
    counts: dict[str, int] = {}
    while (h := reader.get_next_interval_histogram()) is not None:
        counts[h.get_tag()] = counts.get(h.get_tag(), 0) + h.get_total_count()
    reader.close()
    assert counts == {tag: hist.get_total_count() for tag, hist in totals.items()}
    text = path.read_text()
    assert text.count("Tag=ttft_ms,") == 3
    assert "#[StartTime: 1700000000.000" in text


def test_summary_has_the_documented_shape() -> None:
    m = Metrics(closed_loop=False, t0_ns=0)
    for i in range(20):
        m.add(rec(i, 0, 0, (i + 1) * MS, 100 * MS, category="a" if i % 2 else "b"))
    m.add(
        RequestRecord(
            index=99,
            prompt_id="p",
            source="s",
            category="a",
            warmup=False,
            intended_ns=0,
            sent_ns=0,
            end_ns=1,
            outcome="failed",
            error_class="http_5xx",
        )
    )
    m.roll(1.0)
    sc = make_scenario({"mode": "poisson", "rate": 5})
    s = build_summary(
        run_id="r",
        scenario=sc,
        endpoint="e",
        model="m",
        metrics=m,
        started_wall=0.0,
        duration_s=2.0,
        measured_s=1.0,
        interrupted=False,
        prompts={"inline:chat": 50},
    )
    assert s["requests"] == {
        "sent": 21,
        "ok": 20,
        "failed": 1,
        "cancelled": 0,
        "warmup": 0,
        "errors": {"http_5xx": 1},
        "error_rate": round(1 / 21, 6),
        "tokens_estimated": 0,
        "measured_ok": 20,
        "cancelled_by": {},
    }
    ttft = s["metrics"]["ttft_ms"]
    assert set(ttft) == {"count", "min", "mean", "p50", "p90", "p95", "p99", "p999", "max"}
    assert ttft["count"] == 20 and ttft["min"] == pytest.approx(1.0, rel=0.01)
    assert ttft["mean"] == pytest.approx(10.5, rel=0.001)
    from loadtest.model.record import CORRECTED, METRICS

    assert "client_lag_ms" in METRICS
    for key in (*METRICS, *(f"{m}_corrected" for m in CORRECTED)):
        assert key in s["metrics"]
    assert set(s["by_category"]) == {"a", "b"}
    assert s["throughput"]["requests_per_s"] == 20.0
    assert s["throughput"]["output_tokens_per_s"] == 100.0


def test_metric_stats_of_an_empty_histogram() -> None:
    from loadtest.measure.recorders import new_histogram

    assert metric_stats(new_histogram(), 0.0) == {"count": 0}


@pytest.mark.parametrize("n", [5, 48, 3000])
def test_record_many_matches_recording_one_by_one(n: int) -> None:
    import random

    from loadtest.measure.recorders import new_histogram, record_many

    rng = random.Random(n)
    values = [int(rng.lognormvariate(9, 2)) for _ in range(n)] + [0, 1, 3_600_000_000]
    one, many = new_histogram(), new_histogram()
    for v in values:
        one.record_value(v)
    assert record_many(many, values) == 0
    assert record_many(many, [-1, 10**13]) == 2
    assert record_many(many, [-1, 10**13] * 30) == 60
    assert many.encode() == one.encode()
    assert many.get_total_count() == one.get_total_count() == n + 3
    assert (many.get_min_value(), many.get_max_value()) == (
        one.get_min_value(),
        one.get_max_value(),
    )
    for q in (1, 50, 99, 99.99):
        assert many.get_value_at_percentile(q) == one.get_value_at_percentile(q)


@pytest.mark.parametrize("dst_values", [[], [0, 7], [12_345, 9_999_999]])
def test_adding_histograms_with_numpy_equals_hdrh_add(dst_values: list[int]) -> None:
    import random

    from loadtest.measure.hdr import add_into
    from loadtest.measure.recorders import new_histogram

    rng = random.Random(len(dst_values))
    src_values = [int(rng.lognormvariate(9, 2)) for _ in range(500)] + [0, 3_600_000_000]
    ours, theirs, src = new_histogram(), new_histogram(), new_histogram()
    for v in dst_values:
        ours.record_value(v)
        theirs.record_value(v)
    for v in src_values:
        src.record_value(v)
    add_into(ours, src)
    theirs.add(src)
    assert ours.encode() == theirs.encode()
    assert ours.get_total_count() == theirs.get_total_count()
    assert (ours.min_value, ours.max_value) == (theirs.min_value, theirs.max_value)
    assert (ours.get_min_value(), ours.get_max_value()) == (
        theirs.get_min_value(),
        theirs.get_max_value(),
    )
    assert ours.get_value_at_percentile(99) == theirs.get_value_at_percentile(99)


def test_a_flush_in_steps_loses_nothing_recorded_between_steps() -> None:
    from loadtest.measure.recorders import MetricSet

    at_once, in_steps = MetricSet(), MetricSet()
    for ms in (at_once, in_steps):
        for i in range(100):
            ms.record("ttft_ms", 1000.0 + i)
            ms.record("e2e_ms", 5000.0 + i, expected_interval_us=2000.0)
    steps = 0
    for _ in in_steps.flush_steps():
        steps += 1
        in_steps.record("itl_ms", 42.0)  # a request ending while the flush yields
    at_once.flush()
    for _ in range(steps):
        at_once.record("itl_ms", 42.0)
    # One step per metric with pending values (itl_ms too, if its turn comes after the
    # first value recorded into it).
    assert steps >= 2
    for name in MetricSet.NAMES:
        assert in_steps.hists[name].encode() == at_once.hists[name].encode(), name
        assert in_steps.sums[name] == at_once.sums[name]


def test_deferred_recording_equals_hdrh_recording_one_by_one() -> None:
    """MetricSet appends values and records them in arrays later; the histograms, sums
    and out-of-range counts must be exactly what hdrh's own calls give."""
    import random

    from loadtest.measure.recorders import MetricSet, new_histogram

    rng = random.Random(7)
    ms = MetricSet()
    direct = {n: new_histogram() for n in ("e2e_ms", "e2e_ms_corrected", "itl_ms")}
    sums = dict.fromkeys(direct, 0.0)
    out = 0
    # 1,200 draws cover every (value, expected) pair of the lists below ~50 times each;
    # hdrh's own corrected recording (one Python call per back-filled value, ~25,000 for
    # an expected interval of 1 µs) is the cost, so not more.
    for i in range(1200):
        value = rng.choice([rng.lognormvariate(9, 1.5), 0.0, -5.0, 4e12, rng.random() * 50])
        expected = rng.choice([0.0, 1.0, 900.0, rng.lognormvariate(8, 1), 2e6])
        for name, exp in (("e2e_ms", 0.0), ("e2e_ms_corrected", expected)):
            ms.record(name, value, exp)
            h = direct[name]
            ok = (
                h.record_corrected_value(int(value), int(exp))
                if exp >= 1
                else h.record_value(int(value))
            )
            if ok is False:
                out += 1
            else:
                sums[name] += value
        gaps = [rng.randrange(0, 10**6) for _ in range(rng.randrange(0, 70))]
        ms.record_ints("itl_ms", gaps)
        for g in gaps:
            direct["itl_ms"].record_value(g)
        sums["itl_ms"] += sum(gaps)
        if i % 300 == 0:
            ms.flush()  # flushing at any point gives the same end state
    assert ms.out_of_range == out > 0
    for name, h in direct.items():
        mine = ms.hists[name]
        assert mine.get_total_count() == h.get_total_count(), name
        assert list(mine.counts) == list(h.counts), name
        assert (mine.get_min_value(), mine.get_max_value()) == (
            h.get_min_value(),
            h.get_max_value(),
        )
        assert ms.sums[name] == pytest.approx(sums[name], rel=1e-12), name


def test_a_busy_driver_is_called_out_in_the_summary_and_the_table() -> None:
    from loadtest.report.summary import driver_health
    from loadtest.report.table import render_table

    calm = driver_health({"client_lag_ms": {"p99": 0.4}, "dispatch_lag_ms": {"p99": 1.2}})
    assert calm == {
        "client_lag_p99_ms": 0.4,
        "dispatch_lag_p99_ms": 1.2,
        "kernel_stamped_share": None,
        "busy": False,
        "advice": None,
    }
    late_reads = {"client_lag_ms": {"p99": 12.0}, "dispatch_lag_ms": {"count": 0}}
    busy = driver_health(late_reads)
    assert busy["busy"] and "--workers" in (busy["advice"] or "")
    # Kernel stamps with chunks 100 ms apart: a 12 ms late reader still gave every
    # chunk its own stamp. Not with chunks 20 ms apart, nor if some arrivals were
    # stamped by the process, nor when the sends were late.
    slow_chunks = late_reads | {"itl_ms": {"p50": 100.0}}
    assert driver_health(slow_chunks, kernel_share=1.0)["busy"] is False
    assert driver_health(late_reads | {"itl_ms": {"p50": 20.0}}, kernel_share=1.0)["busy"]
    assert driver_health(slow_chunks, kernel_share=0.98)["busy"] is True
    late_sends = slow_chunks | {"dispatch_lag_ms": {"p99": 6.0}}
    assert driver_health(late_sends, kernel_share=1.0)["busy"] is True
    assert driver_health({})["busy"] is False  # nothing measured, nothing claimed
    sc = make_scenario({"mode": "closed", "concurrency": 1, "requests": 1})
    m = Metrics(closed_loop=True, t0_ns=0)
    summary = build_summary(
        run_id="r",
        scenario=sc,
        endpoint="http://x",
        model="m",
        metrics=m,
        started_wall=0.0,
        duration_s=1.0,
        measured_s=1.0,
        interrupted=False,
        prompts={},
    )
    assert summary["driver"]["busy"] is False
    assert "warning" not in render_table(summary)
    summary["driver"] = busy
    assert "warning: the driver was busy" in render_table(summary)


def test_the_driver_is_busy_only_when_its_lag_could_move_a_reported_figure() -> None:
    from loadtest.report.summary import LAG_SHARE, driver_health, resolution_ms

    # 50 req/s against a real endpoint: a 5.5 ms client lag p99 against token times
    # whose smallest p99 is 60 ms moves no figure by more than a tenth: no warning.
    figures = {
        "ttft_ms": {"p99": 120.0},
        "itl_ms": {"p50": 30.0, "p99": 60.0},
        "e2e_ms": {"p99": 1500.0},
        "ttft_ms_corrected": {"p99": 130.0},
        "e2e_ms_corrected": {"p99": 1600.0},
    }
    calm = driver_health(figures | {"client_lag_ms": {"p99": 5.5}, "dispatch_lag_ms": {"p99": 0.1}})
    assert calm["busy"] is False and calm["advice"] is None
    # The same lag against 31 ms gaps could move their p99 by a sixth: warned, with the
    # figure that triggered it.
    tight = figures | {"itl_ms": {"p50": 15.0, "p99": 31.45}, "client_lag_ms": {"p99": 12.08}}
    busy = driver_health(tight)
    assert busy["busy"]
    advice = busy["advice"] or ""
    assert "client lag p99 12.08 ms" in advice and "itl_ms p99 of 31.45 ms" in advice
    # It names what the lag can move: the token times, read late, not the corrected ones.
    # It said "... may include its own delay" ("its": the figures'? the server's?).
    assert ": TTFT, inter-chunk gap, end-to-end may include loadtest's own delay" in advice
    # Kernel-stamped arrivals keep TTFT and end-to-end: a late read only merges chunks.
    stamped = driver_health(tight | {"itl_ms": {"p50": 15.0, "p99": 31.45}}, kernel_share=1.0)
    said = ": inter-chunk gap, tokens per chunk, tokens per step may include loadtest's own"
    assert said in (stamped["advice"] or "")  # it said "tokens per chunk and step"
    # Late sends count against the corrected figures only.
    late = figures | {"dispatch_lag_ms": {"p99": 14.0}}
    said = driver_health(late)["advice"] or ""
    assert driver_health(late)["busy"] and "dispatch lag p99 14" in said
    assert ": TTFT (corrected), end-to-end (corrected) may include" in said
    assert not driver_health(figures | {"dispatch_lag_ms": {"p99": 12.0}})["busy"]
    # Of 20 values a p99 is their largest: said so, where "client lag p99 12.175 ms"
    # stood beside a table printing 12.18 and the rule that a p99 needs 100 values.
    few = tight | {"client_lag_ms": {"p99": 12.175, "count": 20}}
    said = driver_health(few)["advice"] or ""
    assert (
        "(client lag max 12.18 ms (its largest of 20 values: too few for a p99) over 3.15 ms"
        in said
    ), said
    # The resolution of a 3-significant-digit histogram: never coarser than 0.1 %.
    assert 0.001 <= resolution_ms(0.5) <= 0.001
    assert resolution_ms(200.0) <= 200.0 * 0.001 < 200.0 * LAG_SHARE
