"""``python -m loadtest.sim``: the simulator alone (``loadtest sim`` calls the same code)."""

from loadtest.cli.main import main

if __name__ == "__main__":
    raise SystemExit(main(["sim", *__import__("sys").argv[1:]]))
