"""The dashboard's own process: ``python -m loadtest.tui --link FD`` (``tui.process``)."""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import socket
from pathlib import Path

from loadtest.tui.app import Dashboard
from loadtest.tui.process import NICE


def _size(text: str) -> tuple[int, int]:
    try:
        cols, rows = (int(v) for v in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"--headless wants COLUMNSxROWS, not {text!r}") from None
    return cols, rows


def main(argv: list[str] | None = None) -> int:
    """Draw the run at the other end of ``--link`` until it closes."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    ap = argparse.ArgumentParser(prog="python -m loadtest.tui", description=__doc__)
    ap.add_argument("--link", type=int, required=True, help="the socket's file descriptor")
    ap.add_argument("--headless", type=_size, help="draw COLUMNSxROWS, shown nowhere")
    ap.add_argument("--last-screen", type=Path, help="save the last screen as SVG here")
    ap.add_argument("--nice", type=int, default=NICE, help="how much lower than the run")
    args = ap.parse_args(argv)
    with contextlib.suppress(OSError):
        os.nice(args.nice)
    app = Dashboard(link=socket.socket(fileno=args.link), last_screen=args.last_screen)
    if args.headless is not None:
        app.run(headless=True, size=args.headless)
    else:
        app.run()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
