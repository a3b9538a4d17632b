"""The Textual dashboard: a live run (``loadtest run``) or a finished one (``loadtest view``).

The app only lays out ``Frame``s (``tui.frame``) that a source builds (``tui.sources``).
A live run runs in another process (``tui.process``) and sends its states over a socket
(``link``); the app draws each as it comes and asks for the next, so drawing never holds
the run's event loop.

Keys: ``q`` stops gracefully (results written, as with Ctrl-C), ``x`` cancels in-flight
requests at once, ``p`` pauses and resumes the load, ``m`` cycles the metric, ``c`` the
category, ``s`` saves an SVG screenshot into the run folder, ``?`` shows the keys; in a
replay, ``q`` quits and ``←``/``→`` step through the intervals (``home``/``end`` jump).
The footer lists the keys of the mode at hand only.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import Callable
from pathlib import Path
from typing import ClassVar, Protocol

from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Container, Horizontal, Vertical
from textual.widgets import DataTable, Footer, Static

from loadtest.tui.frame import (
    DASH_METRICS,
    Frame,
    latency_cell,
    render_counts,
    render_faults,
    render_header,
    render_server,
    render_verdicts,
    series_labels,
    series_title,
    server_title,
)
from loadtest.tui.histogram import Histogram
from loadtest.tui.layout import CSS as DASHBOARD_CSS
from loadtest.tui.layout import SHORT_BELOW
from loadtest.tui.link import (
    ABORT,
    PAUSE,
    READY,
    STOP,
    Command,
    Hello,
    LiveState,
    receive,
    send_nowait,
)
from loadtest.tui.sources import LiveSource, ReplaySource
from loadtest.tui.spark import ZeroSparkline

__all__ = ["Dashboard", "view_run"]

_VIEW_KEYS = "m metric   c category   s save SVG screenshot   ? keys"
KEYS_HELP = {
    "live": "q stop (results are written)   x cancel in-flight   p pause/resume   " + _VIEW_KEYS,
    "watch": "q stop (results are written)   " + _VIEW_KEYS,
    "replay": "q quit   ←/→ step   home/end first/last   " + _VIEW_KEYS,
}
"""The ``?`` panel of each mode: its keys only."""
_ONLY_IN: dict[str, tuple[str, ...]] = {
    "stop": ("live", "watch"),
    "abort": ("live",),
    "pause": ("live",),
    "leave": ("replay",),
    "step": ("replay",),
}
"""The actions that apply in some modes only; the others apply in all."""
_COLS = ("count", "p50", "p90", "p99", "max")
_TITLES = {"#faults": "faults", "#verdicts": "SLOs", "#blocks": "blocks"}
_SERIES = (("req", "requests/s"), ("tok", "output tokens/s"), ("ttft", "TTFT p95 (ms)"))
"""The sparklines: their widget ids and labels."""
_SETTLE_S = 5.0
"""The longest the last frame waits for a refresh before it is saved as it is."""


class FrameSource(Protocol):
    """Anything that draws a frame for a metric and a category."""

    def frame(self, metric: str, category: str) -> Frame:
        """The run as it is (or was) now."""
        ...


class Dashboard(App[None]):
    """The dashboard of one run: live, replayed, or of a run's worker processes."""

    TITLE = "loadtest"
    # Textual's App declares it without ClassVar (under a union): a ClassVar fails mypy.
    VERTICAL_BREAKPOINTS = [(0, "-short"), (SHORT_BELOW, "-tall")]  # noqa: RUF012
    CSS = DASHBOARD_CSS
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("q", "stop", "stop"),
        Binding("q", "leave", "quit"),
        Binding("ctrl+c", "stop", "stop", show=False, priority=True),
        Binding("ctrl+c", "leave", "quit", show=False, priority=True),
        Binding("x", "abort", "cancel in-flight", show=False),
        Binding("p", "pause", "pause"),
        # priority: the latency table would take the arrows and home/end to scroll.
        Binding("left", "step(-1)", "back", show=False, priority=True),
        Binding("right", "step(1)", "step", key_display="←/→", priority=True),
        Binding("home", "step(-1000000)", show=False, priority=True),
        Binding("end", "step(1000000)", show=False, priority=True),
        Binding("m", "metric", "metric"),
        Binding("c", "category", "category"),
        Binding("s", "save_svg", "screenshot"),
        Binding("question_mark", "keys", "keys"),
    ]

    def __init__(
        self,
        replay: ReplaySource | None = None,
        refresh_s: float = 0.5,
        *,
        link: socket.socket | None = None,
        watch: FrameSource | None = None,
        finished: Callable[[], bool] | None = None,
        on_stop: Callable[[], None] | None = None,
        last_screen: Path | None = None,
    ) -> None:
        """Replayed (``replay``), live (``link``: the socket of a run's ``DashboardFeed``),
        or watching other processes (``watch``: until ``finished()``; ``q`` calls
        ``on_stop``; redrawn every ``refresh_s``). ``last_screen``: where a live run's
        last screen is saved as SVG when it ends (a headless dashboard's evidence)."""
        super().__init__()
        self.replay = replay
        self.source: FrameSource | None = replay or watch
        self.mode = "live" if link is not None else "replay" if replay is not None else "watch"
        self._link = link
        self._writer: asyncio.StreamWriter | None = None
        self._finished = finished
        self._on_stop = on_stop
        self.live: LiveSource | None = None
        self.states = 0
        """Live states drawn so far."""
        self.metric = DASH_METRICS[0]
        self.category = "all"
        self.last_frame: Frame | None = None
        self.screenshots: list[Path] = []
        self._refresh_s = refresh_s
        self._last_screen = last_screen
        self._shown: dict[str, object] = {}

    def compose(self) -> ComposeResult:
        """Header, percentiles and counters, series and histogram, faults, server, blocks."""
        yield Static("starting...", id="header")
        yield Static("", id="notice", markup=False)
        yield Static(KEYS_HELP[self.mode], id="help")
        with Vertical():
            with Horizontal(id="row1"):
                yield DataTable(id="latency", show_cursor=False)
                yield Static("", id="counts")
            with Horizontal(id="row2"):
                with Vertical(id="series"):
                    for wid, label in _SERIES:
                        with Container(classes="series"):
                            yield Static(label, id=f"{wid}-label")
                            yield ZeroSparkline([0.0], id=wid)
                yield Histogram(id="histogram")
            with Horizontal(id="row3"):
                yield Static("", id="faults")
                with Vertical(id="side"):
                    yield Static("", id="verdicts")
                    yield Static("", id="server")
                    yield Static("", id="blocks", markup=False)
        yield Footer()

    def on_mount(self) -> None:
        """Set up the table; follow the run (live), or start the refresh."""
        table = self.query_one("#latency", DataTable)
        table.cell_padding = 0
        table.add_column("metric (ms)", key="metric", width=15)
        for col in _COLS:
            table.add_column(f"{col:>6}", key=col, width=7)
        for m in DASH_METRICS:
            table.add_row(m, *("-" for _ in _COLS), key=m)
        for wid, title in _TITLES.items():
            self.query_one(wid, Static).border_title = title
        if self._link is not None:
            self.run_worker(self._follow(self._link), exclusive=True, name="loadtest-live")
        elif self._finished is not None:
            self.set_interval(self._refresh_s, self._watch_tick)
        else:
            # After the first layout, so the histogram knows its width.
            self.call_after_refresh(self.refresh_view)

    def on_resize(self) -> None:
        """Lay the frame out again for the new size (the header's bar, the counters'
        lines); the histogram redraws itself."""
        self.call_after_refresh(self.refresh_view)

    async def _follow(self, link: socket.socket) -> None:
        """Draw each state of the run as it comes, then ask for the next; close with it."""
        try:
            reader, self._writer = await asyncio.open_connection(sock=link)
            while (message := await receive(reader)) is not None:
                if isinstance(message, Hello):
                    self.source = self.live = LiveSource(message)
                elif isinstance(message, LiveState) and self.live is not None:
                    was = self.live.state.phase if self.live.state else None
                    self.live.update(message)
                    self.states += 1
                    if (was == "paused") != (message.phase == "paused") and was is not None:
                        self._note("load paused" if message.phase == "paused" else "load resumed")
                    self.refresh_view()
                self._tell(READY)
        except OSError:
            pass  # the run went away: there is nothing left to draw
        finally:
            if self._last_screen is not None:
                await self._settle()
                path = self._last_screen
                self.save_screenshot(filename=path.name, path=str(path.parent))
            self.exit()

    async def _settle(self) -> None:
        """Wait until the last state is on the screen: an updated panel is laid out and
        drawn at the screen's next refresh, not when updated, and a screenshot taken
        before it showed the state before (a suite run's last frame lacked "ended")."""
        for _ in range(2):  # the panels' own refresh, then the screen's redraw of them
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.screen.wait_for_refresh(), _SETTLE_S)

    def _note(self, text: str) -> None:
        """A one-line note in place of the last (a second one would stack over a panel)."""
        self.clear_notifications()
        self.notify(text, timeout=4)

    def _tell(self, command: Command) -> None:
        if self._writer is not None and not self._writer.is_closing():
            send_nowait(self._writer, command)

    def refresh_view(self) -> None:
        """Pull one frame from the source and lay it out."""
        if self.source is None:
            return
        f = self.source.frame(self.metric, self.category)
        self.last_frame = f
        # Only what changed is handed to Textual: every update costs a repaint.
        self._text("#header", render_header(f, columns=self.size.width - 2))
        if self._changed("#notice", f.notice):
            notice = self.query_one("#notice", Static)
            notice.update(f.notice or "")
            notice.set_class(f.notice is not None, "shown")
        table = self.query_one("#latency", DataTable)
        for metric, count, *pcts in f.percentiles:
            marker = "▶ " if metric == f.metric else ""
            cells = [f"{marker}{metric}", f"{count:>6}"]
            cells += [f"{latency_cell(v):>6}" for v in pcts]
            for col, text in zip(("metric", *_COLS), cells, strict=True):
                if self._changed(f"{metric}/{col}", text):
                    table.update_cell(metric, col, text)
        if self._changed("#latency/title", f.category):
            table.border_title = f"latency, category {f.category}"
        self._text("#counts", render_counts(f, self.query_one("#counts", Static).size.width - 2))
        for wid, values in (("#req", f.req_rate), ("#tok", f.tok_rate), ("#ttft", f.ttft_p95)):
            if self._changed(wid, values):
                self.query_one(wid, ZeroSparkline).data = list(values)
        for (wid, _), label in zip(_SERIES, series_labels(f), strict=True):
            self._text(f"#{wid}-label", label)
        self._title("#series", series_title(f))
        self.query_one("#histogram", Histogram).show(f)
        self._text("#faults", render_faults(f))
        self._text("#verdicts", render_verdicts(f))
        server = self.query_one("#server", Static)
        self._text("#server", render_server(f, server.size.width or None))
        self._title("#server", server_title(f))
        self.query_one("#blocks", Static).set_class(bool(f.panels), "shown")
        self._text("#blocks", "\n".join(f.panels))

    def _changed(self, key: str, value: object) -> bool:
        if self._shown.get(key) == value:
            return False
        self._shown[key] = value
        return True

    def _title(self, wid: str, title: str) -> None:
        if self._changed(f"{wid}/title", title):
            self.query_one(wid).border_title = title

    def _text(self, wid: str, text: str) -> None:
        before = self._shown.get(wid)
        if self._changed(wid, text):
            # A new layout only where the panel's height may change: a reflow of the
            # whole screen costs more than drawing the text.
            lines = before.count("\n") if isinstance(before, str) else -1
            self.query_one(wid, Static).update(text, layout=lines != text.count("\n"))

    def _watch_tick(self) -> None:
        assert self._finished is not None
        if self._finished():
            self.exit()
        else:
            self.refresh_view()

    # -- keys ----------------------------------------------------------------------------
    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Only the keys of the mode at hand are bound (and listed in the footer)."""
        modes = _ONLY_IN.get(action)
        return modes is None or self.mode in modes

    def action_stop(self) -> None:
        """Live: stop scheduling, in-flight requests get the grace period."""
        if self._link is not None:
            self._tell(STOP)
        elif self._on_stop is not None:
            self._on_stop()  # watching workers: each stops as on Ctrl-C (again: at once)

    def action_leave(self) -> None:
        """Replay: quit."""
        self.exit()

    def action_abort(self) -> None:
        """Stop and cancel in-flight requests at once."""
        self._tell(ABORT)

    def action_pause(self) -> None:
        """Pause or resume offering requests (the next state says which, and a note)."""
        self._tell(PAUSE)

    def action_metric(self) -> None:
        """Show the next metric's distribution."""
        i = DASH_METRICS.index(self.metric)
        self.metric = DASH_METRICS[(i + 1) % len(DASH_METRICS)]
        self.refresh_view()

    def action_category(self) -> None:
        """Show the next category (``all`` first)."""
        cats = self.last_frame.categories if self.last_frame else ("all",)
        i = cats.index(self.category) if self.category in cats else -1
        self.category = cats[(i + 1) % len(cats)]
        self.refresh_view()

    def action_step(self, delta: int) -> None:
        """Replay: move through the run's intervals."""
        if self.replay is not None:
            self.replay.step(delta)
            self.refresh_view()

    def action_keys(self) -> None:
        """Show or hide the key help."""
        self.query_one("#help", Static).toggle_class("shown")

    def action_save_svg(self) -> None:
        """Save an SVG of the screen into the run folder."""
        folder = self._folder()
        folder.mkdir(parents=True, exist_ok=True)
        name = f"dashboard-{len(self.screenshots) + 1:02d}.svg"
        path = Path(self.save_screenshot(filename=name, path=str(folder)))
        self.screenshots.append(path)
        self._note(f"saved {path}")

    def _folder(self) -> Path:
        if self.live is not None:
            return self.live.hello.run_dir
        return self.replay.folder if self.replay is not None else Path(".")


def view_run(run_dir: str | Path) -> None:
    """Open a finished run in the dashboard (``loadtest view``)."""
    Dashboard(replay=ReplaySource(run_dir)).run()
