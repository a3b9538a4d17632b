"""Request rows as the fault verdicts read them (``RequestRow``), made for the tests of
the judge: one request every 100 ms, slowed inside a window where a test asks."""

from __future__ import annotations

from typing import Any, cast

from loadtest.model.verdict import RequestRow

__all__ = ["request_row", "request_rows"]


def request_row(sent_ms: float, ttft: float = 10.0, tpot: float = 5.0, **kw: Any) -> RequestRow:
    """One request sent at ``sent_ms``, answered 100 ms later; ``kw`` overrides a field."""
    row = {
        "sent_ms": sent_ms,
        "end_ms": sent_ms + 100,
        "first_token_ms": sent_ms + ttft,
        "ttft_ms": ttft,
        "tpot_ms": tpot,
        "outcome": "ok",
        "error_class": None,
        "warmup": False,
        "injected_cancel": False,
        "cancel_close_ms": None,
    }
    return cast(RequestRow, row | kw)


def request_rows(
    slow_from: float, slow_to: float, factor: float, fail_at: float | None = None
) -> list[RequestRow]:
    """300 requests, ``factor`` times slower from ``slow_from`` to ``slow_to`` (ms), and
    one that failed at ``fail_at`` where given."""
    rows = []
    for i in range(300):  # one request every 100 ms for 30 s
        t = i * 100.0
        f = factor if slow_from <= t < slow_to else 1.0
        rows.append(request_row(t, 10.0 * f, 5.0 * f))
    if fail_at is not None:
        rows.append(request_row(fail_at, outcome="failed", error_class="disconnected"))
    return rows
