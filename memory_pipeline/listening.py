"""What a process that listens on a port needs: whether a bind stays on this machine, and
a SIGTERM that ends it normally. Shared by the MCP server (``serving.http``) and the
viewer (``memory-pipeline ui``)."""

from __future__ import annotations

import ipaddress
import signal


def is_loopback(host: str) -> bool:
    """Whether binding to ``host`` keeps the server on this machine."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:  # a host name: it may resolve to any interface
        return False


class Terminated(BaseException):
    """SIGTERM arrived: a request to stop, handled like Ctrl-C."""


def stop_on_sigterm() -> None:
    """Make SIGTERM end the process normally (exit 0) instead of killing it (exit 143).

    Uvicorn handles SIGTERM itself while it serves (a graceful shutdown), then
    raises the signal again once the previous handler is back; that handler is
    this one, so the shutdown ends in ``Terminated`` and a normal exit. Before
    uvicorn runs (models loading) it stops the start the same way.
    """

    def handle(signum: int, frame: object) -> None:
        raise Terminated

    signal.signal(signal.SIGTERM, handle)
