"""`python -m streaming.app.class_archive_cmd`: the wait for the training JVM ends when the JVM does.

The JVM is a child of the command's process that PySpark never reaps: once it has written the
archive and exited it is a zombie, whose ``/proc`` entry stays.  A real child process stands in."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from streaming.app.class_archive_cmd import _wait_exited


def test_the_wait_ends_when_an_unreaped_child_exits() -> None:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    deadline = time.monotonic() + 30
    while Path(f"/proc/{child.pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":
        assert time.monotonic() < deadline, "the child never exited"
        time.sleep(0.05)
    started = time.monotonic()
    _wait_exited(child.pid, started + 20)
    assert time.monotonic() - started < 5  # not the whole timeout
    assert not Path(f"/proc/{child.pid}").exists()  # reaped: no zombie left behind


def test_the_wait_ends_for_a_process_that_is_not_a_child() -> None:
    # `sh -c 'sleep 0.5 & echo $!'`: a grandchild, re-parented when sh exits -- not ours to reap
    out = subprocess.run(["sh", "-c", "sleep 0.5 & echo $!"], capture_output=True, text=True, check=True)
    pid = int(out.stdout)
    started = time.monotonic()
    _wait_exited(pid, started + 20)
    assert time.monotonic() - started < 5
    assert not Path(f"/proc/{pid}").exists()
