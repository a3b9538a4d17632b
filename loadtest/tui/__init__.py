"""The Textual dashboard; it only reads states of the run, it never drives the load."""

from loadtest.tui.app import Dashboard, view_run
from loadtest.tui.feed import DashboardFeed
from loadtest.tui.process import DashboardProcess

__all__ = ["Dashboard", "DashboardFeed", "DashboardProcess", "view_run"]
