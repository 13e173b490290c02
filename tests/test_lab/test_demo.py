"""`lab.demo`'s parts that run without a broker: the order of a round, the class archive made
in the background (a real `python -m streaming.app.class_archive_cmd`, stopped at once), and the
web UI's address as the first line ``coordinator-mirror demo`` prints."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lab.demo import KINDS_FIRST, ArchiveInBackground, demo_order
from streaming.pipeline import class_archive


def test_a_round_makes_a_group_of_each_kind_first() -> None:
    order = demo_order("4.3.1")
    assert order[: len(KINDS_FIRST)] == list(KINDS_FIRST)
    assert len(order) == len(set(order)) and "churn" not in order
    assert "share_group" not in demo_order("3.9.2")  # a 3.x broker has no share or streams groups


def _nice(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[16])


def test_the_archive_is_made_in_the_background_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COORDINATOR_MIRROR_JARS", str(tmp_path))
    monkeypatch.delenv(class_archive.ARCHIVE_ENV, raising=False)
    first, second = ArchiveInBackground(), ArchiveInBackground()
    try:
        first.start()
        assert first.proc is not None and first.proc.poll() is None
        # out of the demo's process group (a terminal's Ctrl-C), at the lowest priority
        assert os.getpgid(first.proc.pid) == first.proc.pid != os.getpgid(0)
        # `nice` sets the priority, then runs the command in its place
        deadline = time.monotonic() + 30
        while Path(f"/proc/{first.proc.pid}/cmdline").read_bytes().startswith(b"nice\0"):
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert _nice(first.proc.pid) == 19
        assert "--output" in first.proc.args and str(class_archive.default_path()) in first.proc.args  # type: ignore[operator]
        second.start()  # the first holds the lock
        assert second.proc is None
    finally:
        first.stop()
        second.stop()
    assert first.proc.returncode is not None
    again = ArchiveInBackground()
    again.start()  # the lock was released
    try:
        assert again.proc is not None
    finally:
        again.stop()


@pytest.mark.parametrize("env", ["off", "{tmp}/elsewhere.jsa"])
def test_no_archive_is_made_when_the_user_named_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, env: str
) -> None:
    monkeypatch.setenv("COORDINATOR_MIRROR_JARS", str(tmp_path))
    monkeypatch.setenv(class_archive.ARCHIVE_ENV, env.format(tmp=tmp_path))
    background = ArchiveInBackground()
    background.start()
    assert background.proc is None


def test_the_web_ui_address_is_the_first_line_the_demo_prints(tmp_path: Path) -> None:
    """``coordinator-mirror demo`` (the CLI's own entry, in a process of its own) prints where the
    page is before anything else: the broker and Spark take a minute or two to start, and what
    they log would otherwise bury it.  The Spark session's start is replaced by an exit, so
    nothing after the first step runs."""
    code = (
        "import sys\n"
        "import lab.demo\n"
        "def no_session(*args, **kwargs):\n"
        "    raise SystemExit(3)\n"
        "lab.demo.SessionStart = no_session\n"
        "from streaming.app.cli import main\n"
        "sys.exit(main(['demo', '--workdir', sys.argv[1], '--http-port', '18999']))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path)],
        check=False,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=120,
    )
    assert done.returncode == 3, done.stdout
    lines = done.stdout.splitlines()
    assert lines and lines[0].endswith(
        "the web UI: http://localhost:18999/ui/groups (once the mirror is up)"
    ), lines
