"""A free port for a test server: bound once to learn it, then released.

The server the test starts binds it next; nothing else on the machine is expected to
take it in between.
"""

from __future__ import annotations

import socket


def free_port(family: socket.AddressFamily = socket.AF_INET, host: str = "127.0.0.1") -> int:
    """A port nobody listens on now (``host`` of ``family``: IPv4 loopback by default)."""
    with socket.socket(family) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])
