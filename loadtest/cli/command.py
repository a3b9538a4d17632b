"""The ``loadtest`` command as a process: the CLI's ``main``, then a quick exit.

Python's own exit, after ``main`` returned, took a noticeable share of a short run
(finalizing every module of aiohttp, numpy and loadtest, after the last atexit handler;
docs/benchmarks.md): time the user waits for nothing once the results are on disk and
printed. So the process ends the way the interpreter would, minus that teardown: standard
output and error are flushed, the atexit handlers run (logging's flush, Ray's
shutdown, weakref finalizers such as temporary folders), then ``os._exit``. Where a
thread other than the main one is still alive, Python's exit (which joins it) is kept.
``main`` itself, which the tests call in-process, is unchanged.
"""

from __future__ import annotations

import atexit
import os
import sys
import threading
from collections.abc import Sequence
from typing import NoReturn

from loadtest.cli.main import main

__all__ = ["command"]


def command(argv: Sequence[str] | None = None) -> NoReturn:
    """Run the command line and end the process with its exit code."""
    try:
        code = main(argv)
    except SystemExit as stop:  # argparse's --help and usage errors
        code = stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 1)
        if not isinstance(stop.code, int | None):
            print(stop.code, file=sys.stderr)
    if threading.active_count() > 1:
        sys.exit(code)
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):
        code = code or 1  # a closed pipe: what Python would report on exit
    atexit._run_exitfuncs()
    os._exit(code)
