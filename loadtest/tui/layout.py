"""Where the dashboard's panels go and how big they are: its Textual CSS.

Apart from the app (``tui.app``), which composes the widgets and fills them: the sizes
below are what makes every figure fit 80x24, and a change to one is a change to that.
"""

from __future__ import annotations

__all__ = ["CSS", "SHORT_BELOW", "SPARK_LABEL"]

SHORT_BELOW = 30
"""Under this many rows the screen has the class -short (Textual sets it from the app's
VERTICAL_BREAKPOINTS on each resize): the panels keep their top border only, and each
series is one line beside its label, not a label over bars."""
SPARK_LABEL = 22
"""The characters a series' label takes beside its bars in a short screen: the longest,
``output tokens/s`` and a figure of six characters (``tui.frame.series_labels``)."""

# Fits 80x24 (every percentile column, histogram bucket, sparkline, verdict and server
# figure show there) and grows into larger terminals: the series and the histogram take
# the rows that are left.
CSS = f"""
#header {{ height: 2; background: $boost; padding: 0 1; }}
#notice {{ height: auto; display: none; background: $warning-muted; padding: 0 1; }}
#notice.shown {{ display: block; }}
#row1 {{ height: auto; }}
#latency {{ width: auto; height: auto; border: round $accent; }}
#counts {{ width: 1fr; height: 100%; border: round $accent; padding: 0 1; }}
#row2 {{ height: 1fr; min-height: 4; }}
#series {{ width: 1fr; border: round $accent; }}
.series {{ height: 1fr; }}
.series Static {{ height: 1; padding: 0 1; }}
.series ZeroSparkline {{ height: 1fr; margin: 0 1; }}
#histogram {{ width: 1fr; border: round $accent; padding: 0 1; }}
#row3 {{ height: auto; max-height: 9; }}
#faults {{ width: 3fr; height: auto; max-height: 9; border-top: round $accent; padding: 0 1; }}
/* An SLO line (SLO ttft_ms.p95 <= 500: 412.3 MISSED) takes some 38 columns: two
   fifths of 80 wrapped each onto a second row. */
#side {{ width: 2fr; min-width: 40; height: auto; }}
#verdicts {{ height: auto; max-height: 6; border-top: round $accent; padding: 0 1; }}
/* Two lines: the server's figures, wrapped by the app to the panel's width (one line
   cut them at 80 columns: "acceptance 0.444   running 2   waitin..."). */
#server {{ height: auto; max-height: 3; border-top: round $accent; padding: 0 1; }}
#blocks {{ height: auto; max-height: 4; border-top: round $accent; padding: 0 1; }}
#blocks {{ display: none; }} #blocks.shown {{ display: block; }}
#help {{ height: auto; display: none; background: $panel; padding: 0 1; }}
#help.shown {{ display: block; }}
.-short #latency, .-short #counts, .-short #series, .-short #histogram {{
    border: none;
    border-top: round $accent;
}}
.-short .series {{ height: 1; layout: horizontal; }}
.-short .series Static {{ width: {SPARK_LABEL + 2}; }}
.-short .series ZeroSparkline {{ height: 1; width: 1fr; margin: 0 1 0 0; }}
/* A note ("load paused", "saved ...") takes one line at the bottom right, over the
   footer's unchanging key list: Textual's default box, above the footer, covered
   the SLO and server panels. One note at a time (``Dashboard._note``). */
ToastRack {{ align: right bottom; margin: 0; }}
Toast {{ width: auto; max-width: 100%; padding: 0 1; margin: 0; }}
"""
