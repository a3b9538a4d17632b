"""The Textual dashboard; it only reads frames of the run, it never drives the load."""

from loadtest.tui.app import Dashboard, run_with_tui, view_run

__all__ = ["Dashboard", "run_with_tui", "view_run"]
