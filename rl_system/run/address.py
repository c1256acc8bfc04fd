"""A Ray address checked before ``ray.init`` joins it: Ray itself retries an unreachable
address for minutes, the CLIs answer in seconds. Standard library only, so a command that only
reads a cluster (``rl-system status``) starts without importing torch."""

from __future__ import annotations

import socket


def check_reachable(address: str, timeout_s: float = 5.0) -> None:
    """Fail fast (:class:`ConnectionError`, one line) when ``HOST:PORT`` does not accept a TCP
    connection: ``ray.init`` itself retries an unreachable address for minutes. ``auto`` (a
    cluster on this machine) and ``ray://`` client addresses are left to Ray."""
    if address == "auto" or "://" in address:
        return
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit():
        raise ConnectionError(f"expected 'auto' or HOST:PORT, got {address!r}")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s).close()
    except OSError as err:
        why = "timed out" if isinstance(err, TimeoutError) else (err.strerror or str(err))
        raise ConnectionError(f"no Ray cluster reachable at {address} ({why} after at most {timeout_s:.0f}s)") from None
