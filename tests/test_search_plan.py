"""The capacity search's plan (pure): probing, bisecting, confirming, and its stops."""

from __future__ import annotations

import math
import random

import pytest

from loadtest.app.capacity.search_plan import (
    Point,
    SearchSpec,
    bracket,
    margin_fit,
    next_load,
    parse_search,
)
from loadtest.errors import UsageError


def _search(spec: SearchSpec, passes: object) -> list[Point]:
    """Run the plan against ``passes(load) -> bool`` to its end."""
    points: list[Point] = []
    while (d := next_load(spec, points)).load is not None:
        ok = passes(d.load)  # type: ignore[operator]
        points.append(Point(d.load, "pass" if ok else "fail"))
    return points


@pytest.mark.parametrize("boundary", [1, 2, 7, 23, 31, 32, 33, 63])
def test_a_whole_number_boundary_is_found_to_one_step_and_confirmed(boundary: int) -> None:
    spec = SearchSpec("concurrency", 1, 64, budget=30)
    points = _search(spec, lambda c: c <= boundary)
    b = bracket(points)
    assert (b.passes, b.fails) == (boundary, boundary + 1)
    assert (b.low, b.high) == (b.passes, b.fails)  # no run disagrees
    assert b.closed(spec)
    # Both edges were run twice; far fewer runs than a grid of every whole number.
    assert sum(p.load == boundary for p in points) == 2
    assert sum(p.load == boundary + 1 for p in points) == 2
    assert len(points) <= 16


def test_a_rate_boundary_is_bracketed_within_the_tolerance() -> None:
    spec = SearchSpec("rate", 0.5, 200.0, tolerance=0.1, budget=30)
    points = _search(spec, lambda r: r <= 37.3)
    b = bracket(points)
    assert b.passes is not None and b.fails is not None
    assert b.passes <= 37.3 < b.fails and b.fails / b.passes - 1 <= 0.1


def test_the_ends_of_the_range_are_answers() -> None:
    spec = SearchSpec("concurrency", 4, 64)
    top = _search(spec, lambda c: True)
    assert bracket(top) == bracket(top) and bracket(top).fails is None
    assert next_load(spec, top).why.startswith("concurrency 64, the range's top, meets")
    bottom = _search(spec, lambda c: False)
    assert [p.load for p in bottom] == [4]
    assert "the range's bottom, fails" in next_load(spec, bottom).why


def test_one_noisy_run_below_the_boundary_does_not_move_it() -> None:
    """A failed run at a load under two passing ones is outvoted by the monotone fit."""
    points = [
        Point(8, "pass"),
        Point(16, "fail"),  # noise
        Point(16, "pass"),
        Point(16, "pass"),
        Point(24, "pass"),
        Point(32, "fail"),
    ]
    assert bracket(points) == bracket(points[::-1])
    b = bracket(points)
    assert (b.passes, b.fails) == (24, 32)
    assert (b.low, b.high) == (8, 32)  # the interval says where runs disagreed


def test_noise_near_the_boundary_still_brackets_it_most_of_the_time() -> None:
    """Each run passes with a probability falling through the boundary (a logistic of
    scale 0.3 step: one step from it a run is right 84% of the time): where the runs
    disagree the interval [low, high] widens, and it holds the boundary in at least 95%
    of 200 seeded searches (measured: 190; at scale 0.5, 165; at 1.0, 124: a boundary
    that blurred needs more repeats than two per edge)."""
    held = 0
    for seed in range(200):
        rng = random.Random(seed)
        spec = SearchSpec("concurrency", 1, 64, budget=16)

        def passes(c: float, rng: random.Random = rng) -> bool:
            return rng.random() < 1 / (1 + math.exp((c - 23.5) / 0.3))

        b = bracket(_search(spec, passes))
        held += b.low is not None and b.high is not None and b.low <= 23.5 <= b.high
    assert held >= 190, held


def test_the_budget_and_an_untold_point_stop_the_search() -> None:
    spec = SearchSpec("concurrency", 1, 64, budget=3)
    points = _search(spec, lambda c: c <= 40)
    assert len(points) == 3 and "budget of 3 runs is spent" in next_load(spec, points).why
    told = [Point(1, "pass"), Point(2, "cannot tell", why="too few requests")]
    d = next_load(SearchSpec("concurrency", 1, 64), told)
    assert d.load is None and d.why == "cannot tell at concurrency 2: too few requests"


def test_the_margins_fit_crosses_its_limit_between_the_loads_around_it() -> None:
    points = [
        Point(8, "pass", (("ttft_ms.p95", 0.5),)),
        Point(16, "pass", (("ttft_ms.p95", 0.9),)),
        Point(24, "fail", (("ttft_ms.p95", 1.3),)),
        Point(20, "pass", (("ttft_ms.p95", 0.95),)),
    ]
    (fit,) = margin_fit(points)
    assert fit["slo"] == "ttft_ms.p95"
    assert fit["loads"] == [8, 16, 20, 24]
    at = fit["crosses_at"]
    assert at is not None and 20 < at < 24


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("concurrency=1..64", None),
        ("rate=0.5..40", None),
        ("load=1..4", "give concurrency=LO..HI or rate=LO..HI"),
        ("concurrency=8..2", "need 0 < LO < HI"),
        ("concurrency=1.5..4", "a concurrency is a whole number"),
        ("rate=a..4", "LO and HI must be numbers"),
    ],
)
def test_the_search_flag_is_read_or_named_wrong(text: str, said: str | None) -> None:
    if said is None:
        assert parse_search(text)[0] in ("concurrency", "rate")
        return
    with pytest.raises(UsageError, match=said):
        parse_search(text)
