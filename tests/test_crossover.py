"""The crossover bracket of a category (``report.crossover``): pure, from verdicts."""

from __future__ import annotations

import pytest

from loadtest.report.crossover import Point, bracket, effect_text


def _p(load: float, verdict: str, effect: float | None = None) -> Point:
    low = None if effect is None else effect - 0.04
    high = None if effect is None else effect + 0.04
    return Point(load, verdict, effect, low, high, "e2e")  # type: ignore[arg-type]


def test_faster_then_slower_is_a_bracket_with_the_effects_at_its_ends() -> None:
    b = bracket([_p(1, "faster", -0.31), _p(2, "faster", -0.2), _p(4, "slower", 0.12)])
    assert b["text"] == "faster up to 2 (e2e -20% [-24, -16]), slower from 4 (e2e +12% [8, 16])"
    assert b["shape"] == "faster, then slower"
    assert (b["faster_to"], b["slower_from"]) == (2, 4)
    # Both neighbours called: the zero crossing, linear in load, 2 + 2 * 0.2 / 0.32.
    assert b["crossover"] == pytest.approx(3.25)
    assert b["cannot_tell"] == []


def test_a_step_that_could_not_be_called_is_said_and_not_interpolated_across() -> None:
    b = bracket(
        [_p(1, "faster", -0.3), _p(4, "faster", -0.1), _p(8, "cannot tell"), _p(16, "slower", 0.2)]
    )
    assert b["text"] == (
        "faster up to 4 (e2e -10% [-14, -6]), cannot tell between 4 and 16, "
        "slower from 16 (e2e +20% [16, 24])"
    )
    assert (b["faster_to"], b["slower_from"], b["crossover"]) == (4, 16, None)
    assert b["cannot_tell"] == [8]


def test_no_difference_between_is_a_step_of_its_own() -> None:
    b = bracket([_p(1, "faster", -0.3), _p(2, "no difference", -0.01), _p(4, "slower", 0.2)])
    assert b["text"] == (
        "faster up to 1 (e2e -30% [-34, -26]), no difference at 2, "
        "slower from 4 (e2e +20% [16, 24])"
    )
    # The sign changes between 2 (called: no difference) and 4, both called.
    assert b["crossover"] == pytest.approx(2 + 2 * 0.01 / 0.21, abs=1e-3)


@pytest.mark.parametrize(
    ("verdict", "text"),
    [
        ("faster", "faster across the range"),
        ("slower", "slower across the range"),
        ("no difference", "no difference across the range"),
        ("cannot tell", "cannot tell across the range"),
        ("not exercised", "cannot tell across the range"),
    ],
)
def test_one_verdict_everywhere_is_said_across_the_range(verdict: str, text: str) -> None:
    b = bracket([_p(1, verdict, -0.1), _p(2, verdict, -0.1), _p(4, verdict, -0.1)])
    assert b["text"] == text
    assert b["crossover"] is None
    assert b["faster_to"] == (4 if verdict == "faster" else None)
    assert b["slower_from"] == (1 if verdict == "slower" else None)


def test_the_bracket_looks_only_below_the_first_slower_step() -> None:
    # Faster again above a slower step: the candidate stopped paying at 2 already.
    b = bracket([_p(1, "faster", -0.2), _p(2, "slower", 0.1), _p(4, "faster", -0.1)])
    assert (b["faster_to"], b["slower_from"]) == (1, 2)
    assert b["text"].startswith("faster up to 1") and b["text"].endswith(
        "faster from 4 (e2e -10% [-14, -6])"
    )
    assert b["text"].count("slower at 2") == 1


def test_a_rate_crosses_when_it_falls() -> None:
    up = Point(1, "faster", 0.2, 0.1, 0.3, "good/s", lower_is_better=False)
    down = Point(2, "slower", -0.2, -0.3, -0.1, "good/s", lower_is_better=False)
    b = bracket([up, down])
    assert b["crossover"] == pytest.approx(1.5)
    assert (
        b["text"] == "faster up to 1 (good/s +20% [10, 30]), slower from 2 (good/s -20% [-30, -10])"
    )


def test_effects_print_as_percentages_and_a_missing_one_says_so() -> None:
    assert effect_text(-0.3149, -0.352, -0.27, "e2e") == "e2e -31% [-35, -27]"
    assert effect_text(None, None, None, "e2e") == "e2e no data"
    assert bracket([])["text"] == "not exercised: no step"
