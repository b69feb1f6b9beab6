"""Waiting for a server a benchmark started to accept connections."""

import socket
import time


def wait_for_port(port: int, *, seconds: float = 30, host: str = "127.0.0.1") -> bool:
    """Whether something accepted a connection on ``port`` within ``seconds``."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            with socket.create_connection((host, port), timeout=0.5):
                return True
        except OSError:
            time.sleep(0.2)
    return False
