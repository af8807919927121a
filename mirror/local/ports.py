"""Ports for local servers (brokers, metrics, Prometheus) on 127.0.0.1, never handed out twice."""

from __future__ import annotations

import os
import socket
from pathlib import Path

HOST = "127.0.0.1"

# Ports handed out by free_port() in this process: never handed out twice.
_HANDED_OUT: set[int] = set()
LOWEST_PORT = 10_000


def free_port() -> int:
    """A port nothing listens on now, for a server started a moment later.

    Not from the kernel's ephemeral range: a port the kernel picks there can be given to any
    outgoing connection (a client's socket) between this call and the server's bind, and the same
    port can come back from the next call. Below that range only servers bind, and this process
    never hands a port out twice; processes start at different places (their pid).
    """
    low, high = LOWEST_PORT, _ephemeral_start()
    if high - low < 1000:
        return _kernel_port()
    span = high - low
    start = (os.getpid() * 7919) % span
    for step in range(span):
        port = low + (start + step) % span
        if port in _HANDED_OUT:
            continue
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            try:
                sock.bind((HOST, port))
            except OSError:
                continue
        _HANDED_OUT.add(port)
        return port
    return _kernel_port()


def _ephemeral_start() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text(encoding="ascii").split()[0])
    except (OSError, ValueError, IndexError):
        return 0  # not Linux: the kernel's choice below


def _kernel_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        port = int(sock.getsockname()[1])
    _HANDED_OUT.add(port)
    return port


def port_in_use(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        return sock.connect_ex((HOST, port)) == 0
