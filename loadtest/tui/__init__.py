"""The live Textual TUI; it only reads the runner's snapshots, it never drives the load."""

from loadtest.tui.app import LiveApp, run_with_tui

__all__ = ["LiveApp", "run_with_tui"]
