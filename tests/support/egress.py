"""A client's side of the egress proxy's Unix socket, for the tests that talk to the proxy directly."""

from __future__ import annotations

import os
import socket

from bot.sandbox.egress import EgressProxy


def connect(proxy: EgressProxy) -> socket.socket:
    """A connection to `proxy`'s socket, made through /proc/self/fd (a pytest tmp path can pass the 108 bytes a
    socket's path may have), reads bounded at 10 s."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(10)
    directory = os.open(proxy.path.parent, os.O_RDONLY)
    try:
        sock.connect(f"/proc/self/fd/{directory}/{proxy.path.name}")
    finally:
        os.close(directory)
    return sock
