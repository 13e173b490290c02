"""`python -m streaming.app.class_archive_cmd`: what the archive's training mirror reads, and the
wait for the training JVM, which ends when the JVM does.  The archive itself (stamps, the JVM's use
of it, make and the image): test_pipeline/test_class_archive.py.

The JVM is a child of the command's process that PySpark never reaps: once it has written the
archive and exited it is a zombie, whose ``/proc`` entry stays.  A real child process stands in."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from decoders import decode_record
from decoders.records import DecodeError, OffsetCommitKey, OffsetCommitValue
from streaming.app.class_archive_cmd import _training_capture, _wait_exited
from streaming.pipeline.capture_format import read_capture


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


def test_the_training_replays_real_offset_commits(tmp_path: Path) -> None:
    """What the archive's training mirror reads is what the coordinator writes: every record
    decodes to an offset commit (key version 1, value version 3), none is an error."""
    path = tmp_path / "t.jsonl"
    _training_capture(path)
    records = list(read_capture(path))
    assert len(records) == 200
    for rec in records:
        decoded = decode_record(rec.key, rec.value)
        assert not isinstance(decoded, DecodeError), decoded
        assert isinstance(decoded.key, OffsetCommitKey) and isinstance(decoded.value, OffsetCommitValue)
        assert decoded.key.group_id.startswith("cds-group-") and decoded.value.offset >= 1
