"""This machine's addresses: is a Ray node (by its IP) the host ray-mcp runs on? (local py-spy, a Train run's
local storage)."""

from __future__ import annotations

import contextlib
import socket


def local_addresses() -> set[str]:
    """Every address of this host: loopback, the hostname's, and each interface's (IPv4 and IPv6)."""
    import psutil

    out = {"127.0.0.1", "::1", "localhost"}
    with contextlib.suppress(OSError):
        out.add(socket.gethostbyname(socket.gethostname()))
    with contextlib.suppress(Exception):
        for addrs in psutil.net_if_addrs().values():
            out.update(
                a.address.split("%")[0] for a in addrs if a.family in (socket.AF_INET, socket.AF_INET6)
            )
    return out
