"""The comparison statistics on synthetic samples with known answers."""

from __future__ import annotations

import numpy as np
import pytest

from loadtest.measure.stats import (
    LONE_RUN_EFFECT,
    bootstrap_diff,
    compare_groups,
    compare_samples,
    format_p,
    holm,
    judge_family,
    practical_effect,
    rank_test,
    round_p,
)


def _lognormal(seed: int, n: int, median_ms: float) -> np.ndarray:
    return np.random.default_rng(seed).lognormal(np.log(median_ms), 0.4, n)


def test_equal_distributions_are_rarely_flagged() -> None:
    flagged = 0
    for seed in range(60):
        a = _lognormal(seed, 300, 50.0)
        b = _lognormal(seed + 1000, 300, 50.0)
        c = compare_samples(a, b, resamples=400, seed=seed)
        assert c is not None
        flagged += c.verdict != "no detectable difference"
    # At a 5% level, 60 equal pairs flag about 3. The seeds fix the count (it does not
    # vary between runs), so the bound can stay where a test at 15% (9 expected) fails
    # most of the time. Were numpy's or scipy's streams to change, flagged would be
    # ~ Binomial(60, 0.05) and <= 7 fails 1.2% of draws: the 1e-4 bound is then <= 11.
    assert flagged <= 7, flagged


def test_a_ten_percent_shift_is_detected_in_both_directions() -> None:
    a = _lognormal(1, 800, 50.0)
    faster = compare_samples(a, _lognormal(2, 800, 45.0), resamples=500)
    slower = compare_samples(a, _lognormal(3, 800, 55.0), resamples=500)
    assert faster is not None and slower is not None
    assert faster.verdict == "faster" and faster.p_value is not None and faster.p_value < 0.001
    assert slower.verdict == "slower"
    p50 = faster.percentiles[0]
    assert p50.pct == 50 and p50.high < 0 and p50.excludes_zero
    # The true median difference (-5 ms) lies inside the interval.
    assert p50.low < -5.0 < p50.high


def test_the_interval_covers_a_known_difference() -> None:
    a = np.arange(1000, dtype=float)
    b = a + 100.0
    diff, low, high = bootstrap_diff(a, b, 50, resamples=500)
    assert diff == 100.0
    assert low <= 100.0 <= high
    assert high - low < 120  # about 4 standard errors of a median of 1,000


def test_rank_test_extremes() -> None:
    assert rank_test([1.0, 2.0, 3.0] * 20, [1.0, 2.0, 3.0] * 20) > 0.9
    assert rank_test(list(range(50)), list(range(100, 150))) < 1e-10


def test_empty_and_tiny_samples() -> None:
    assert compare_samples([], [1.0]) is None
    tiny = compare_samples([1.0], [2.0], resamples=50)
    assert tiny is not None and tiny.verdict == "too few samples" and tiny.p_value is None


def test_holm_adjusts_the_family_and_keeps_order() -> None:
    assert holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    assert holm([0.5]) == [0.5]
    assert holm([]) == []


def test_a_dozen_equal_lines_rarely_flag_a_comparison() -> None:
    """Four metrics x three percentiles per comparison: the family, not the line, at 5%."""
    flagged = 0
    for seed in range(40):
        family = [
            compare_samples(
                _lognormal(seed * 10 + k, 200, 50.0),
                _lognormal(seed * 10 + k + 5000, 200, 50.0),
                resamples=300,
                seed=seed,
            )
            for k in range(4)
        ]
        judged = judge_family([c for c in family if c is not None])
        flagged += any(d.verdict in ("faster", "slower") for m in judged for d in m.percentiles)
    # Holm keeps the family's rate at 5% (2 of 40 expected). The seeds fix the count, so
    # the bound stays tight: unadjusted, 12 lines at 5% flag ~46% of families (18 of 40).
    # Were the streams to change, flagged ~ Binomial(40, 0.05) and the 1e-4 bound is <= 9.
    assert flagged <= 4, flagged


def test_identical_sides_of_two_runs_rarely_flag_a_comparison() -> None:
    """What ``ab --repeat 2`` compares: two runs a side of one deployment, three metrics.

    Seeded, so the count is fixed; drawn without whole-run shifts, where the two-stage
    bootstrap is at its nominal level or below (resampling two runs only widens it).
    Live runs on identical simulators measured 2 of 50 (bench_compare_fpr.py).
    """
    rng = np.random.default_rng(2024)
    flagged = 0
    for seed in range(20):
        family = [
            compare_groups(
                [rng.lognormal(np.log(median), 0.1, 40) for _ in range(2)],
                [rng.lognormal(np.log(median), 0.1, 40) for _ in range(2)],
                (50,),
                resamples=200,
                seed=seed,
            )
            for median in (8.0, 4.0, 100.0)  # TTFT, TPOT, e2e
        ]
        judged = judge_family([c for c in family if c is not None])
        flagged += any(m.verdict in ("faster", "slower") for m in judged)
    # FWER <= 5% per family: Binomial(20, 0.05), P(X >= 7) ~ 3.4e-5 under any stream.
    # (200 resamples: the smallest p-value is 2/201, under 0.05/3 after Holm.)
    assert flagged <= 6, flagged


def test_each_line_has_its_own_verdict_a_faster_median_with_a_slower_tail() -> None:
    rng = np.random.default_rng(7)
    a = rng.normal(50.0, 2.0, 2000)
    b = rng.normal(45.0, 2.0, 2000)
    b[:100] = rng.normal(90.0, 2.0, 100)  # the slowest 5% of B take twice as long
    c = compare_samples(a, b, (50, 99), resamples=500)
    assert c is not None
    by_pct = {d.pct: d.verdict for d in c.percentiles}
    assert by_pct == {50: "faster", 99: "slower"}
    assert c.verdict == "faster"  # the metric's verdict is its median line's


def test_a_real_difference_below_the_practical_threshold_is_not_called() -> None:
    rng = np.random.default_rng(3)
    a = rng.normal(50.0, 1.0, 3000)
    b = rng.normal(50.5, 1.0, 3000)  # 1% slower: plainly significant, but below 2%
    small = compare_samples(a, b, resamples=400)
    assert small is not None and small.percentiles[0].excludes_zero
    assert small.verdict == "no detectable difference"
    lenient = compare_samples(a, b, resamples=400, min_effect=0.005)
    assert lenient is not None and lenient.verdict == "slower"


def test_fewer_than_the_minimum_are_not_tested() -> None:
    c = compare_samples(list(range(9)), list(range(100, 200)), resamples=50)
    assert c is not None and c.verdict == "too few samples"
    assert all(d.verdict == "too few samples" for d in c.percentiles)


def test_p_values_print_with_their_magnitude() -> None:
    assert format_p(0.0) == "< 0.0001"
    assert format_p(3e-7) == "< 0.0001"
    assert format_p(0.01234) == "0.0123"
    assert format_p(None) == "-"


def test_a_p_under_alpha_never_prints_or_keeps_as_alpha() -> None:
    """A Holm p just under 0.05 printed "0.0500" beside a line called faster, under a
    rule saying "p under 0.05"; and it was kept as 0.05 in the json it is read from."""
    assert format_p(0.049996) == "< 0.05"
    assert format_p(0.05) == "0.0500"
    assert round_p(0.049996) == 0.04999 and format_p(round_p(0.049996)) == "< 0.05"
    assert round_p(0.05) == 0.05 and round_p(0.29) == 0.29
    assert round_p(3.14159e-7) == 3.141e-7  # its magnitude, not a rounded 0
    assert round_p(np.float64(0.012345)) == 0.01234


def test_a_run_that_moved_as_a_whole_is_not_a_difference_but_a_steady_one_is() -> None:
    rng = np.random.default_rng(11)

    def run(median: float) -> np.ndarray:
        return rng.normal(median, 1.0, 300)

    # A's second run was 12% slower throughout (a neighbour's load): its requests are not
    # independent evidence, and pooling them would call B faster.
    a, b = [run(50.0), run(56.0)], [run(50.0), run(50.0)]
    pooled = compare_samples(np.concatenate(a), np.concatenate(b), (50,), resamples=400)
    assert pooled is not None and pooled.verdict == "faster"
    grouped = compare_groups(a, b, (50,), resamples=400)
    assert grouped is not None and grouped.verdict == "no detectable difference"
    steady = compare_groups([run(50.0), run(50.5)], [run(40.0), run(40.5)], (50,), resamples=400)
    assert steady is not None and steady.verdict == "faster"


def test_one_run_on_a_side_raises_the_practical_threshold_to_what_moves_whole_runs() -> None:
    # Two runs or more a side: the bootstrap sees run-to-run drift, --min-effect stands.
    assert practical_effect(2, 3, 0.02) == 0.02
    # One run on either side: only a difference beyond how far a whole run moves counts.
    assert practical_effect(1, 1, 0.02) == LONE_RUN_EFFECT
    assert practical_effect(3, 1, 0.02) == LONE_RUN_EFFECT
    assert practical_effect(1, 1, 0.25) == 0.25  # a stricter --min-effect still wins


@pytest.mark.parametrize("batch", [50, 2_000_000])
def test_the_batched_two_stage_resamples_are_those_of_one_at_a_time(
    batch: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Runs of unequal sizes, so resamples come in several lengths; a small batch flushes
    # mid-way. The reference draws and takes each percentile one resample at a time.
    from loadtest.measure import stats

    monkeypatch.setattr(stats, "_STAGE_BATCH", batch)
    data = np.random.default_rng(11)
    groups = [np.round(data.lognormal(3, 1, n)) for n in (7, 30, 12)]
    rng = np.random.default_rng(5)
    want = []
    for _ in range(400):
        picked = [groups[i] for i in rng.integers(0, 3, 3)]
        drawn = [g[rng.integers(0, g.size, g.size)] for g in picked]
        want.append(np.percentile(np.concatenate(drawn), 95))
    got = stats._stage(groups, 95, 400, np.random.default_rng(5))
    assert np.array_equal(got, np.array(want))
