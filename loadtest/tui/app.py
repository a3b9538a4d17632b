"""A live view of a run: counters, throughput sparkline, latency percentiles.

The runner runs as a worker in Textual's event loop; the app polls ``snapshot()`` twice
a second. Drawing at 2 Hz costs little beside the load; the numbers on screen are the
same frozen snapshots the plain progress line prints.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import ClassVar

from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.widgets import DataTable, Footer, Header, Sparkline, Static

from loadtest.metrics import Snapshot
from loadtest.runner import Runner, RunOutcome

__all__ = ["LiveApp", "render_counts", "run_with_tui"]

_LAT_ROWS = (
    ("TTFT p50", "ttft_p50_ms"),
    ("TTFT p99", "ttft_p99_ms"),
    ("TPOT p50", "tpot_p50_ms"),
    ("E2E p50", "e2e_p50_ms"),
    ("E2E p99", "e2e_p99_ms"),
    ("dispatch lag p99", "dispatch_lag_p99_ms"),
)


def render_counts(s: Snapshot) -> str:
    """The counters panel as text (pure, so it is tested without a terminal)."""
    phase = "warm-up" if s.warmup else "measuring"
    errors = ", ".join(f"{k} {v}" for k, v in sorted(s.errors.items())) or "none"
    return (
        f"[b]{phase}[/b]  {s.elapsed_s:6.1f} s\n"
        f"sent {s.sent}   in flight {s.in_flight}\n"
        f"ok {s.ok}   failed {s.failed}   cancelled {s.cancelled}\n"
        f"errors: {errors}\n"
        f"{s.requests_per_s:8.1f} req/s   {s.output_tokens_per_s:10.0f} output tok/s"
    )


class LiveApp(App[None]):
    """The live dashboard of one run."""

    TITLE = "loadtest"
    CSS = """
    #counts { height: 7; border: round $accent; padding: 0 1; }
    #rate { height: 6; border: round $accent; }
    #latency { height: 10; border: round $accent; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("q", "stop", "stop (graceful)"),
        Binding("ctrl+c", "stop", "stop", show=False, priority=True),
        Binding("x", "abort", "cancel in-flight"),
    ]

    def __init__(self, prepare: Callable[[], Awaitable[Runner]]) -> None:
        super().__init__()
        self._prepare = prepare
        self.runner: Runner | None = None
        self.outcome: RunOutcome | None = None
        self.error: BaseException | None = None

    def compose(self) -> ComposeResult:
        """Header, counters, throughput sparkline, latency table, footer."""
        yield Header()
        with Vertical():
            yield Static("starting...", id="counts")
            with Horizontal(id="rate"):
                yield Sparkline([], id="spark")
            yield DataTable(id="latency", show_cursor=False)
        yield Footer()

    def on_mount(self) -> None:
        """Set up the table, start the run and the 2 Hz refresh."""
        table = self.query_one("#latency", DataTable)
        table.add_column("latency", key="name")
        table.add_column("ms", key="value", width=12)
        for label, key in _LAT_ROWS:
            table.add_row(label, "-", key=key)
        self.run_worker(self._run(), exclusive=True, name="loadtest-run")
        self.set_interval(0.5, self.refresh_view)

    async def _run(self) -> None:
        try:
            self.runner = await self._prepare()
            self.sub_title = f"{self.runner.config.scenario.name} -> {self.runner.config.endpoint}"
            self.outcome = await self.runner.run()
        except BaseException as exc:  # shown after the app closes
            self.error = exc
        finally:
            self.exit()

    def refresh_view(self) -> None:
        """Pull one snapshot and show it."""
        if self.runner is None:
            return
        s = self.runner.snapshot()
        self.query_one("#counts", Static).update(render_counts(s))
        self.query_one("#spark", Sparkline).data = list(s.rate_history) or [0.0]
        table = self.query_one("#latency", DataTable)
        for _, key in _LAT_ROWS:
            table.update_cell(key, "value", f"{getattr(s, key):.2f}")

    def action_stop(self) -> None:
        """Stop scheduling; in-flight requests get the grace period."""
        if self.runner is not None:
            self.runner.stop()

    def action_abort(self) -> None:
        """Stop and cancel in-flight requests at once."""
        if self.runner is not None:
            self.runner.cancel_in_flight()


def run_with_tui(prepare: Callable[[], Awaitable[Runner]]) -> tuple[Runner, RunOutcome]:
    """Run the load inside the live app; returns when the run has ended."""
    app = LiveApp(prepare)
    app.run()
    if app.error is not None:
        raise app.error
    if app.runner is None or app.outcome is None:
        raise RuntimeError("the run ended before it started")
    return app.runner, app.outcome
