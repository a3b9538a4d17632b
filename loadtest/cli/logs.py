"""Logging set-up of the command line: the ``loadtest`` logger, plain, on stderr."""

from __future__ import annotations

import logging
import sys

__all__ = ["configure_logging"]


class _Stderr(logging.Handler):
    """Plain messages on whatever ``sys.stderr`` is when they are emitted."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            sys.stderr.write(self.format(record) + "\n")
        except Exception:  # logging must never break the run
            self.handleError(record)


_HANDLER = _Stderr()


def configure_logging(verbosity: int) -> None:
    """The ``loadtest`` logger's messages on stderr; ``verbosity`` from -v (+) and -q (-)."""
    logger = logging.getLogger("loadtest")
    if _HANDLER not in logger.handlers:
        logger.addHandler(_HANDLER)
    logger.setLevel(
        logging.DEBUG if verbosity > 0 else logging.INFO if verbosity == 0 else logging.WARNING
    )
    logger.propagate = False
