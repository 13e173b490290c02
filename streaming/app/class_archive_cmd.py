"""Make the Spark driver JVM's class-data-sharing archive (`streaming.pipeline.class_archive`).

    python -m streaming.app.class_archive_cmd [--output PATH]

Run by ``make setup`` and the image build.  A mirror replays a small capture file (real
offset-commit records: key version 1, value version 3) through the whole query -- decode,
``applyInPandasWithState`` on RocksDB, the sink -- in a driver JVM started with
``-XX:ArchiveClassesAtExit``; that JVM writes the archive while it exits, this process waits for
it, checks that a JVM starts with it and keeps it with its size stamp.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import struct
import sys
import tempfile
import time
from pathlib import Path

from streaming.pipeline import class_archive


def _string(text: str) -> bytes:
    raw = text.encode()
    return struct.pack(">h", len(raw)) + raw


def _commit(group: str, topic: str, partition: int, offset: int, at_ms: int) -> tuple[bytes, bytes]:
    """An offset-commit record as the coordinator writes it: key version 1, value version 3."""
    key = struct.pack(">h", 1) + _string(group) + _string(topic) + struct.pack(">i", partition)
    value = struct.pack(">hqi", 3, offset, -1) + _string("") + struct.pack(">q", at_ms)
    return key, value


def _training_capture(path: Path) -> None:
    from streaming.pipeline.capture_format import CapturedRecord, CaptureHeader, write_capture

    now = int(time.time() * 1000)
    records = []
    for i in range(200):
        key, value = _commit(f"cds-group-{i % 20}", "cds-topic", i % 4, 1 + i, now)
        records.append(CapturedRecord(i % 2, i // 2, now, key, value))
    write_capture(path, CaptureHeader(source="class-archive training"), records)


def build(output: Path, timeout_s: float = 300.0) -> Path:
    """Make the archive at ``output``: a mirror replays a small capture file in a driver JVM that
    dumps its classes when it exits (this process then waits for that JVM to end)."""
    from streaming.app.mirror import Mirror
    from streaming.settings import load_settings

    output.parent.mkdir(parents=True, exist_ok=True)
    partial = output.with_name(output.name + ".partial")
    partial.unlink(missing_ok=True)
    with tempfile.TemporaryDirectory(prefix="cm-class-archive-") as tmp:
        capture = Path(tmp) / "training.jsonl"
        _training_capture(capture)
        settings = load_settings(
            source="capture",
            capture_path=str(capture),
            checkpoint_location=str(Path(tmp) / "checkpoint"),
            http_port=0,
            spark_conf={
                # the classes it cannot archive (signed jars, old class versions) are not news
                "spark.driver.extraJavaOptions": f"-XX:ArchiveClassesAtExit={partial} -Xlog:cds=error"
            },
        )
        os.environ[class_archive.ARCHIVE_ENV] = "off"  # the training JVM maps no archive of its own
        mirror = Mirror(settings, serve_http=False).start()
        try:
            if not mirror.wait_ready(timeout_s):
                raise RuntimeError(f"the training mirror did not finish within {timeout_s}s")
            mirror.wait_batches(2, timeout_s)
        finally:
            mirror.stop()
        assert mirror.spark is not None
        jvm = mirror.spark._jvm
        assert jvm is not None
        pid = int(jvm.java.lang.ProcessHandle.current().pid())
        with contextlib.suppress(Exception):  # the gateway's connection ends with the JVM
            jvm.java.lang.System.exit(0)  # the archive is written while the JVM exits
        _wait_exited(pid, time.monotonic() + timeout_s)
    return class_archive.keep(partial, output)


def _wait_exited(pid: int, deadline: float) -> None:
    """Until process ``pid`` -- the JVM PySpark started, a child of this process -- has ended.

    Reaped here: an ended child stays a zombie, its ``/proc`` entry there, until its parent waits
    for it, and PySpark's gateway never does -- a loop on ``/proc/<pid>`` alone waited out the
    whole timeout (300 s of ``make class-archive``'s 336 s) after the archive was written."""
    while time.monotonic() < deadline:
        try:
            if os.waitpid(pid, os.WNOHANG)[0] == pid:
                return
        except ChildProcessError:  # not a child of ours (or reaped already): gone once /proc says so
            if not Path(f"/proc/{pid}").exists():
                return
        time.sleep(0.2)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Make the Spark driver JVM's class-data-sharing archive.")
    ap.add_argument("--output", type=Path, default=None, help="default: the jars folder's cds/")
    args = ap.parse_args(argv)
    output = args.output or class_archive.default_path()
    started = time.monotonic()
    build(output)
    size = output.stat().st_size / 2**20
    print(f"class archive: {output} ({size:.0f} MB, {time.monotonic() - started:.0f} s)", flush=True)
    # the gateway JVM is gone: end without PySpark's exit handlers talking to it
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main())
