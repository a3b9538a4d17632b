"""``server-sweep.json`` of ``ab --server-sweep`` or ``--sampling-sweep``: a decision per
value of a server setting or of a request field."""

from __future__ import annotations

from typing import TypedDict

__all__ = ["ServerSetting", "ServerSide", "ServerSweepResult"]


class ServerSide(TypedDict):
    """What one side's runs under one setting cost (their ``deployment.json``)."""

    side: str
    runs: int
    ready_s: float | None
    """Median start to ``/health`` ready (None: a side without a measured start)."""
    first_token_s: float | None
    """Median start to a first streamed token."""
    rss_peak_mib: float | None
    """The highest resident memory of any of its runs."""


class ServerSetting(TypedDict):
    """One value of the setting: its sweep's or search's folder, answers and costs."""

    value: float | str | bool
    folder: str
    answers: list[str]
    """Per category, where the candidate stops paying, as its decision says it."""
    sides: list[ServerSide]


class ServerSweepResult(TypedDict):
    setting: str
    """The setting varied (``parallel``, ``max_num_seqs``, a simulator setting, or a
    request field such as ``reasoning_effort``)."""
    request: bool
    """A field of every request (``--sampling-sweep``), not a server setting."""
    values: list[ServerSetting]
    interrupted: bool
