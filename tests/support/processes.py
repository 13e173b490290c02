"""The command line as its own process (``python -m streaming.app.cli``), and a mirror run as one
(`coordinator-mirror run`), as the kill -9 and down-alert suites start one: waiting until it
answers ``/ready``."""

from __future__ import annotations

import subprocess
import sys
import time

from lab.proc import free_port
from tests.support.http import get

__all__ = ["free_port", "run_cli", "wait_process_ready"]


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    """``coordinator-mirror ARGS`` in a process of its own (this interpreter, the checkout's code)."""
    return subprocess.run(
        [sys.executable, "-m", "streaming.app.cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def wait_process_ready(port: int, proc: subprocess.Popen[bytes], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"mirror exited with {proc.returncode}"
        try:
            status, _ = get(f"http://127.0.0.1:{port}/ready")
            if status == 200:
                return
        except OSError:
            pass
        time.sleep(0.5)
    raise TimeoutError("mirror not ready")
