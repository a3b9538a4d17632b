"""``python -m loadtest``: the same as the ``loadtest`` command."""

from loadtest.cli.main import main

if __name__ == "__main__":
    raise SystemExit(main())
