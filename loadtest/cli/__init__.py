"""The command line: argument parsing, logging set-up and process-wide policies."""

from loadtest.cli.main import main

__all__ = ["main"]
