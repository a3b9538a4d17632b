"""The dashboard's frames of a ``--workers`` run: each worker's ``live.json``, merged
(its metrics, and its summary blocks' parts so far for their panels).

The workers are other processes: the dashboard reads the files each rewrites once a
second (``app.process.live``), never their sockets, so a slow dashboard holds back no worker.
"""

from __future__ import annotations

import time
from pathlib import Path

import orjson

from loadtest.config.scenario import Scenario
from loadtest.engine.blocks import block_panels, join_parts
from loadtest.measure.merge import merge_metrics
from loadtest.tui.frame import Frame, progress, series
from loadtest.tui.sources import ROLL_S, metrics_view

__all__ = ["WorkersSource"]


class WorkersSource:
    """Frames of a ``--workers`` run: each worker's ``live.json``, merged."""

    def __init__(self, dirs: list[Path], scenario: Scenario, endpoint: str, model: str) -> None:
        self.dirs = dirs
        self.scenario = scenario
        self.endpoint = endpoint
        self.model = model
        self.started = time.monotonic()

    def frame(self, metric: str, category: str) -> Frame:
        """All workers as one run, as of their last second."""
        live = []
        for d in self.dirs:
            try:
                live.append(orjson.loads((d / "live.json").read_bytes()))
            except (OSError, orjson.JSONDecodeError):
                continue
        sc = self.scenario
        m = merge_metrics(
            [w["metrics"] for w in live], closed_loop=sc.load.mode == "closed", t0_ns=0
        )
        elapsed = time.monotonic() - self.started
        in_flight = sum(w["in_flight"] for w in live)
        frac, eta = progress(
            elapsed,
            sc.load.warmup_s,
            sc.load.duration_s,
            sc.load.requests,
            sum(w["measured"] for w in live),
        )

        def summed(key: str) -> tuple[float, ...]:
            rows = [w[key] for w in live]
            n = min((len(r) for r in rows), default=0)
            return series([sum(r[len(r) - n + i] for r in rows) for i in range(n)])

        return Frame(
            scenario=sc.name,
            endpoint=self.endpoint,
            model=self.model,
            elapsed_s=elapsed,
            phase=f"measuring ({len(live)}/{len(self.dirs)} workers reporting)",
            progress=frac,
            eta_s=eta,
            **metrics_view(m, in_flight, metric, category),
            req_rate=summed("rate_history"),
            interval_s=ROLL_S,
            tok_rate=summed("token_rate_history"),
            ttft_p95=series(
                [max(v) for v in zip(*(w["ttft_p95_history"] for w in live), strict=False)]
            ),
            # Each block's parts from every worker, merged here by the block's own merge.
            panels=block_panels(join_parts(*(w.get("blocks", {}) for w in live)), m),
        )
