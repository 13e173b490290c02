"""What the lab's background processes share: a free loopback port, and a child that dies with us."""

from __future__ import annotations

import ctypes
import signal
import socket


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now (it may be taken before it is bound: retry on that)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def set_pdeathsig() -> None:  # pragma: no cover - runs in the child between fork and exec
    """``preexec_fn`` of a child process: SIGKILL it when the Python process that started it dies
    (PR_SET_PDEATHSIG, Linux), so that a killed test run leaves no orphan."""
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except OSError:
        pass
