"""Enough file descriptors for the connections a process holds.

Every open stream is a socket, so a process holding N streams needs N descriptors and
a few more. Many systems start processes with a soft ``RLIMIT_NOFILE`` of 1,024 and a
hard one far higher: the soft one is raised to the hard one (which any process may do),
once, where a process is about to hold many connections (the driver's runs, the
simulator). The hard one is left alone, since raising it takes privilege; a process
that needs more than it allows is told so (``short_of``), with the fix.
"""

from __future__ import annotations

import functools
import logging

__all__ = ["HEADROOM", "raise_open_files", "short_of"]

log = logging.getLogger(__name__)

HEADROOM = 64
"""Descriptors beyond the connections: files written, pipes, the listening socket."""


@functools.cache
def raise_open_files() -> int:
    """Raise the soft descriptor limit to the hard one; the soft limit after (or -1)."""
    try:
        import resource
    except ImportError:  # not POSIX: nothing to raise
        return -1
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft == resource.RLIM_INFINITY:
        # "unlimited" is not accepted as a soft value everywhere: a large finite one is.
        target = 1 << 20 if hard == resource.RLIM_INFINITY else hard
    else:
        target = hard
    if soft != resource.RLIM_INFINITY and soft < target:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError) as exc:
            log.debug("could not raise RLIMIT_NOFILE to %s: %s", target, exc)
    return -1 if soft == resource.RLIM_INFINITY else soft


def short_of(connections: int) -> str | None:
    """Why ``connections`` open at once will not fit this process's limit, or None."""
    limit = raise_open_files()
    if limit < 0 or connections + HEADROOM <= limit:
        return None
    return (
        f"{connections} connections at once need about {connections + HEADROOM} file "
        f"descriptors, and this process may open {limit} (RLIMIT_NOFILE): raise the hard "
        "limit (ulimit -Hn, or LimitNOFILE= of a service), or spread the load over "
        "--workers, whose processes each hold their share"
    )
