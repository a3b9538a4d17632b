"""How a simulator process starts serving a ``SimConfig``: from ``loadtest sim``, forked
from the fork server by ``SimProcess``, or as ``python -m loadtest.sim``.

The forked child gets its config as it is (pickled through the fork server), not turned
into flags and parsed back by the command line: the simulator imports nothing of the
CLI, in any form (an import-linter contract with no exception).
"""

from __future__ import annotations

import multiprocessing.forkserver
import os
import sys
from collections.abc import Mapping
from dataclasses import fields
from multiprocessing.connection import Connection

from loadtest._compat import precise_timers
from loadtest.errors import LoadtestError, ScenarioError, UsageError
from loadtest.sim.model import SimConfig
from loadtest.sim.process import PARENT_ENV, die_with_parent, serve, serve_deployment
from loadtest.sim.profile import with_profile

__all__ = ["forked", "serve_config"]


def serve_config(config: SimConfig, host: str, port: int, *, spec: bool = False) -> None:
    """Serve ``config`` (its profile under the settings given beside it) until stopped;
    ``spec``: a draft server and a target speculating with it (``loadtest sim --spec``).
    ``UsageError`` for a port it cannot listen on."""
    die_with_parent()
    defaults = SimConfig()
    given = {
        f.name: getattr(config, f.name)
        for f in fields(SimConfig)
        if f.name != "profile" and getattr(config, f.name) != getattr(defaults, f.name)
    }
    config = with_profile(config, given)
    config.check()
    try:
        if spec:
            serve_deployment(config, host, port)
        else:
            # Steps and token gaps are timed to the microsecond, not the next whole ms.
            precise_timers.run(serve(config, host, port))
    except OSError as exc:
        raise UsageError(f"cannot listen on {host}:{port}: {exc.strerror}") from exc


def forked(
    config: SimConfig,
    host: str,
    port: int,
    out: Connection,
    err: Connection,
    environ: Mapping[str, str],
) -> None:
    """``serve_config`` in a process forked from the fork server: stdout and stderr on
    the parent's pipes, in the parent's environment, ending with the fork server (which
    ends with the parent); an error is one line, as ``loadtest sim`` says it."""
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
    code = 0
    try:
        serve_config(config, host, port)
    except (UsageError, ScenarioError) as exc:
        print(f"loadtest: {exc}", file=sys.stderr)
        code = 2
    except LoadtestError as exc:
        print(f"loadtest: {exc}", file=sys.stderr)
        code = 1
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
    raise SystemExit(code)
