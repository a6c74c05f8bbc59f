"""Is a port the mesh must own free? One check for `slomesh up`'s HTTP, gRPC, door and metrics
ports.

The test bind sets SO_REUSEADDR but not SO_REUSEPORT, so a listener of a second mesh (Serve's
proxies and the ingress's door bind with SO_REUSEPORT and would silently share the port) fails
it. Linux also refuses that bind when the port's only holders are TIME_WAIT connections of a
listener that set SO_REUSEPORT without SO_REUSEADDR, as Serve's proxy does: for about a minute
after a mesh stops, its port looked taken though nothing listened and Serve's own bind would
succeed. Such sockets accept nothing, so a bind refused with EADDRINUSE counts as taken only
when a connect to the port is answered.
"""

from __future__ import annotations

import errno
import socket


def _loopback(host: str) -> str:
    """Where to knock for a listener bound to `host` (a wildcard is reached on loopback)."""
    return {"0.0.0.0": "127.0.0.1", "": "127.0.0.1", "::": "::1"}.get(host, host)


def _answers(host: str, port: int) -> bool:
    try:
        with socket.create_connection((_loopback(host), port), timeout=1.0):
            return True
    except OSError:
        return False


def port_taken(host: str, port: int) -> str | None:
    """Why `port` on `host` is taken by a listening socket (the bind's error), or None."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError as err:
            if err.errno == errno.EADDRINUSE and not _answers(host, port):
                return None  # only connections of a stopped listener (TIME_WAIT) hold it
            return err.strerror or str(err)
    return None
