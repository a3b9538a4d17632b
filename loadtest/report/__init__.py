"""Results: summary.json, the interval log, percentile tables, CSV and the terminal table."""

from loadtest.features.faults.block import render_faults
from loadtest.report.export import write_results
from loadtest.report.hlog import HlogWriter, read_hlog
from loadtest.report.summary import build_summary
from loadtest.report.table import render_table

__all__ = [
    "HlogWriter",
    "build_summary",
    "read_hlog",
    "render_faults",
    "render_table",
    "write_results",
]
