"""The speculative model without I/O: acceptance draws, back-off, categories."""

from __future__ import annotations

import random

import pytest

from loadtest.sim.speculation import (
    DraftHealth,
    accepted_tokens,
    expected_tokens_per_step,
    infer_category,
)


@pytest.mark.parametrize(("p", "k"), [(0.0, 4), (0.5, 4), (0.9, 3), (1.0, 5)])
def test_accepted_tokens_mean_matches_the_closed_form(p: float, k: int) -> None:
    rng = random.Random(1)
    n = 20_000
    mean = sum(1 + accepted_tokens(rng, p, k) for _ in range(n)) / n
    assert mean == pytest.approx(expected_tokens_per_step(p, k), rel=0.02)


def test_accepted_tokens_never_exceed_k() -> None:
    rng = random.Random(2)
    assert max(accepted_tokens(rng, 0.99, 3) for _ in range(1000)) == 3


def test_backoff_doubles_up_to_the_cap_and_resets_on_success() -> None:
    h = DraftHealth(backoff_s=0.25, backoff_max_s=1.0)
    assert h.should_try(0.0)
    h.failed(10.0)
    assert (h.speculating, h.fallbacks, h.next_probe_s) == (False, 1, 10.25)
    assert not h.should_try(10.2)
    assert h.should_try(10.25)
    h.failed(10.25)
    assert h.next_probe_s == pytest.approx(10.75)
    h.failed(10.75)
    h.failed(11.75)
    assert h.next_probe_s == pytest.approx(12.75)  # capped at 1 s
    assert h.probes_failed == 3
    h.ok(12.75)
    assert h.speculating
    h.failed(20.0)
    assert (h.fallbacks, h.next_probe_s) == (2, 20.25)


@pytest.mark.parametrize(
    ("request_body", "category"),
    [
        ({"messages": [{"role": "user", "content": "hi"}], "tools": [{}]}, "tool_calls"),
        ({"messages": [{"role": "user", "content": "def f(x):\n    return x"}]}, "code"),
        ({"messages": [{"role": "user", "content": "日本語で説明してください"}]}, "multilingual"),
        ({"prompt": "tell me a story"}, "chat"),
    ],
)
def test_category_is_inferred_from_the_body(request_body: dict[str, object], category: str) -> None:
    assert infer_category(request_body) == category
