"""``python -m loadtest``: the same as the ``loadtest`` command."""

from loadtest.cli.command import command

if __name__ == "__main__":
    command()
