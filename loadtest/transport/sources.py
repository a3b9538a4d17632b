"""Local source addresses of the load's connections (``--source-address``).

One source address can hold about 28,000 connections to one destination (Linux's
ephemeral port range, 32768-60999): past that, connects fail with ``EADDRNOTAVAIL``
whatever the memory. Spreading the connections over several local addresses (the whole
of 127.0.0.0/8 is local on Linux) multiplies that. The client builds one connection
pool per address and gives them out in turn, one to each closed-loop session (which
keeps it, and so its kept-alive connection) or to each open-loop request
(``transport.client``); each worker of ``--workers`` gets its own addresses
(``split_addresses``).

``check_addresses`` binds each address once, on a free port, before any load, so a
mistyped or foreign address is an error naming where it came from, not 20,000 failed
requests.
"""

from __future__ import annotations

import ipaddress
import socket

from loadtest.errors import UsageError

__all__ = ["check_addresses", "parse_address", "split_addresses"]


def parse_address(text: str, where: str) -> str:
    """``text`` as a normalised IP literal; ``UsageError`` naming ``where`` if it is not."""
    try:
        return str(ipaddress.ip_address(text.strip()))
    except ValueError:
        raise UsageError(
            f"{where}: {text.strip()!r} is not an IP address (give local addresses such as "
            "127.0.0.2, not host names)"
        ) from None


def check_addresses(addresses: tuple[str, ...], where: str) -> None:
    """``UsageError`` naming ``where`` unless every address is one family and bindable here."""
    families = {ipaddress.ip_address(a).version for a in addresses}
    if len(families) > 1:
        raise UsageError(f"{where}: mixes IPv4 and IPv6 addresses; give one family")
    if len(set(addresses)) != len(addresses):
        raise UsageError(f"{where}: an address is given twice")
    for address in addresses:
        family = socket.AF_INET6 if ":" in address else socket.AF_INET
        with socket.socket(family, socket.SOCK_STREAM) as s:
            try:
                s.bind((address, 0))
            except OSError as exc:
                raise UsageError(
                    f"{where}: cannot bind {address} on this machine ({exc.strerror}); "
                    "give addresses of a local interface (any of 127.0.0.0/8 on Linux)"
                ) from None


def split_addresses(addresses: tuple[str, ...], index: int, n: int) -> tuple[str, ...]:
    """Worker ``index`` of ``n``'s own addresses: every n-th, or one in turn if too few.

    With fewer addresses than workers some workers share one: the ports of an address
    are the kernel's, so sharing splits them, it does not break anything.
    """
    if not addresses:
        return ()
    if len(addresses) >= n:
        return addresses[index::n]
    return (addresses[index % len(addresses)],)
