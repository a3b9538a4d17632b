"""``python -m loadtest.sim``: the simulator alone (``loadtest sim`` calls the same code).

``forked`` is the same command in a process forked from the fork server
(``SimProcess``), its output on the parent's pipes as a child's would be.
"""

from __future__ import annotations

import multiprocessing.forkserver
import os
import sys
from collections.abc import Mapping
from multiprocessing.connection import Connection

from loadtest.cli.main import main


def forked(argv: list[str], out: Connection, err: Connection, environ: Mapping[str, str]) -> None:
    """``python -m loadtest.sim ARGV``, forked: stdout and stderr on the parent's pipes,
    in the parent's environment, ending with the fork server (which ends with the
    parent)."""
    from loadtest.sim.process import PARENT_ENV

    # A forked child holds the fork server's "a client is alive" pipe (so that it could
    # fork through it too): the server would then outlive a parent killed by SIGKILL,
    # and this simulator with it (its PR_SET_PDEATHSIG names the server). Let it go.
    server = getattr(multiprocessing.forkserver, "_forkserver", None)
    if (alive := getattr(server, "_forkserver_alive_fd", None)) is not None:
        os.close(alive)
        server._forkserver_alive_fd = None  # type: ignore[union-attr]
    os.dup2(out.fileno(), 1)
    os.dup2(err.fileno(), 2)
    out.close()
    err.close()
    os.environ.clear()
    os.environ.update(environ)
    os.environ[PARENT_ENV] = str(os.getppid())
    try:
        code = main(["sim", *argv])
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
    raise SystemExit(code)


if __name__ == "__main__":
    raise SystemExit(main(["sim", *sys.argv[1:]]))
