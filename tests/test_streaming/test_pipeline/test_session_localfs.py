"""jvm/localfs: Hadoop's ``file:`` file system without a child process per call, in the real session.

The session (`streaming.pipeline.session.build_session`) puts ``NoForkLocalFileSystem`` on the JVM's
class path and registers it for both Hadoop APIs.  These tests check that Spark really uses it, that
it keeps Hadoop's semantics where Spark's checkpoints depend on them (atomic create-and-rename, no
overwrite unless asked, permissions, checksums, missing files, symbolic links), and that a stateful
query on a local checkpoint spawns no process per micro-batch and restarts from what it wrote.
(Why it exists: test_spark_workarounds.py keeps the stock file system's behaviour under test.)
"""

from __future__ import annotations

import os
import stat
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lab.checkpoint_fs import reaped_child_faults, stock_checkpoint_file_faults

pytestmark = [pytest.mark.spark]

OURS = "io.github.coordinatormirror.fs.NoForkLocalFileSystem"


def _path(spark: Any, local: Path) -> Any:
    return spark._jvm.org.apache.hadoop.fs.Path(f"file://{local}")


def _checkpoint_manager(spark: Any, root: Path) -> Any:
    jvm = spark._jvm
    cfm = jvm.org.apache.spark.sql.execution.streaming.checkpointing.CheckpointFileManager
    return cfm.create(_path(spark, root), spark._jsc.hadoopConfiguration())


def test_the_session_uses_it_for_both_hadoop_apis(spark: Any) -> None:
    jvm = spark._jvm
    conf = spark._jsc.hadoopConfiguration()
    uri = jvm.java.net.URI("file:///")
    assert jvm.org.apache.hadoop.fs.FileSystem.get(uri, conf).getClass().getName() == OURS
    fc = jvm.org.apache.hadoop.fs.FileContext.getFileContext(uri, conf)
    assert fc.getDefaultFileSystem().getClass().getName() == OURS + "$Fs"


def test_checkpoint_files_keep_hadoops_semantics(spark: Any, tmp_path: Path) -> None:
    """What Spark's FileContext-based checkpoint manager relies on, through that manager."""
    from py4j.protocol import Py4JJavaError

    root = tmp_path / "ckpt"
    root.mkdir()
    fm = _checkpoint_manager(spark, root)
    assert fm.getClass().getSimpleName() == "FileContextBasedCheckpointFileManager"

    # No child process for a checkpoint file.  Spark's background work in this shared session may
    # reap one meanwhile (`rm -rf` of a state store folder it unloads, after an earlier test's
    # query; seen once in a full run), so a file is tried three times: a file system that spawns
    # per file fails all three.
    fm.mkdirs(_path(spark, root / "offsets"))
    spawned = []
    for attempt in range(3):
        before = reaped_child_faults(spark)
        fm.mkdirs(_path(spark, root / f"scratch{attempt}"))
        out = fm.createAtomic(_path(spark, root / f"scratch{attempt}" / "0"), False)
        out.write(bytearray(b"x"))
        out.close()
        spawned.append(reaped_child_faults(spark) - before)
        if not spawned[-1]:
            break
    assert 0 in spawned, f"every checkpoint file spawned a process (reaped faults {spawned})"
    out = fm.createAtomic(_path(spark, root / "offsets" / "0"), False)
    out.write(bytearray(b"v1\n{}\n"))
    out.close()

    written = root / "offsets" / "0"
    assert written.read_bytes() == b"v1\n{}\n"
    # the checksum file beside it, as with Hadoop's LocalFileSystem; no temporary file left
    assert sorted(p.name for p in (root / "offsets").iterdir()) == [".0.crc", "0"]
    umask = os.umask(0)
    os.umask(umask)
    hadoop_umask = 0o022  # fs.permissions.umask-mode default
    assert stat.S_IMODE(written.stat().st_mode) == 0o666 & ~hadoop_umask
    assert stat.S_IMODE((root / "offsets").stat().st_mode) == 0o777 & ~hadoop_umask

    # an existing file is not overwritten unless asked (the offset log's guard against two writers)
    again = fm.createAtomic(_path(spark, written), False)
    again.write(bytearray(b"other"))
    with pytest.raises(Py4JJavaError, match=r"FileAlreadyExists|already exists"):
        again.close()
    assert written.read_bytes() == b"v1\n{}\n"
    overwrite = fm.createAtomic(_path(spark, written), True)
    overwrite.write(bytearray(b"v2"))
    overwrite.close()
    assert written.read_bytes() == b"v2"
    # checksums are verified on read
    stream = fm.open(_path(spark, written))
    assert bytes(spark._jvm.org.apache.commons.io.IOUtils.toByteArray(stream)) == b"v2"
    stream.close()

    # a cancelled write leaves nothing
    cancelled = fm.createAtomic(_path(spark, root / "offsets" / "1"), False)
    cancelled.write(bytearray(b"x"))
    cancelled.cancel()
    assert not (root / "offsets" / "1").exists()
    assert fm.exists(_path(spark, written)) and not fm.exists(_path(spark, root / "offsets" / "1"))

    # a missing file is FileNotFoundException, as Spark's callers expect
    raw = spark._jvm.org.apache.hadoop.fs.FileSystem.get(
        spark._jvm.java.net.URI("file:///"), spark._jsc.hadoopConfiguration()
    ).getRawFileSystem()
    with pytest.raises(Py4JJavaError, match="FileNotFoundException"):
        raw.getFileLinkStatus(_path(spark, root / "missing"))
    with pytest.raises(Py4JJavaError, match="FileNotFoundException"):
        raw.setPermission(
            _path(spark, root / "missing"), spark._jvm.org.apache.hadoop.fs.permission.FsPermission(0o600)
        )

    # as Hadoop's own describes them: a symbolic link (handed to Hadoop's code), a file, a directory
    stock = spark._jvm.org.apache.hadoop.fs.RawLocalFileSystem()
    stock.initialize(spark._jvm.java.net.URI("file:///"), spark._jsc.hadoopConfiguration())
    (root / "link").symlink_to(written)
    for target in (root / "link", written, root / "offsets"):
        ours_status = raw.getFileLinkStatus(_path(spark, target))
        theirs = stock.getFileLinkStatus(_path(spark, target))
        for attr in ("isSymlink", "isFile", "isDirectory", "getLen", "getModificationTime", "getPath"):
            assert str(getattr(ours_status, attr)()) == str(getattr(theirs, attr)()), (target, attr)
    assert raw.getFileLinkStatus(_path(spark, written)).getLen() == 2


def _counting(key: tuple[Any, ...], frames: Iterator[Any], state: Any) -> Iterator[Any]:
    import pandas as pd

    seen = sum(len(f) for f in frames) + (int(state.get[0]) if state.exists else 0)
    state.update((seen,))
    state.setTimeoutDuration(3_600_000)  # pending all along: no-data batches run too
    yield pd.DataFrame({"k": [int(key[0])], "seen": [seen]})


def _run(spark: Any, ckpt: Path, batches: int) -> tuple[int, int]:
    """A stateful query on ``ckpt`` until it has run ``batches`` more micro-batches; the JVM's
    reaped-child faults over all but its first two batches, and the highest count it output."""
    from pyspark.sql.streaming.state import GroupStateTimeout

    counts = (
        spark.readStream.format("rate")
        .option("rowsPerSecond", 20)
        .load()
        .selectExpr("value % 3 AS k")
        .groupBy("k")
        .applyInPandasWithState(
            _counting, "k long, seen long", "seen long", "update", GroupStateTimeout.ProcessingTimeTimeout
        )
    )
    seen: list[int] = []
    query = (
        counts.writeStream.foreachBatch(lambda df, _: seen.extend(r.seen for r in df.collect()))
        .outputMode("update")
        .option("checkpointLocation", str(ckpt))
        .trigger(processingTime="200 milliseconds")
        .start()
    )
    try:
        deadline = time.monotonic() + 120

        def done() -> int:
            assert time.monotonic() < deadline, "the query did not run its micro-batches in 120 s"
            return len(query.recentProgress)

        while done() < 2:
            time.sleep(0.05)
        before = reaped_child_faults(spark)
        while done() < batches:
            time.sleep(0.05)
        spawned = reaped_child_faults(spark) - before
    finally:
        query.stop()
    return spawned, max(seen, default=0)


def test_a_stateful_query_spawns_no_process_and_restarts_from_what_it_wrote(
    spark: Any, tmp_path: Path
) -> None:
    """Six micro-batches write ~24 checkpoint files (offsets, commits, two state changelogs each);
    together they cost the JVM less in reaped child processes than ONE file over Hadoop's stock
    file system.  (Not zero: Spark itself may spawn the odd process meanwhile -- ``rm -rf`` of a
    state store's local folder it unloads, RocksDB's libc probe when it first loads -- which have
    nothing to do with a micro-batch's files.)"""
    (tmp_path / "stock").mkdir()
    one_stock_file = stock_checkpoint_file_faults(spark, tmp_path / "stock")
    assert one_stock_file > 0  # test_spark_workarounds.py keeps this under test on its own
    ckpt = tmp_path / "ckpt"
    spawned, first = _run(spark, ckpt, batches=8)
    assert spawned < one_stock_file, (
        f"six micro-batches on a local checkpoint: {spawned} reaped-child faults, "
        f"one checkpoint file over Hadoop's stock file system: {one_stock_file}"
    )
    assert first > 0
    # offsets, commits, state changelogs and snapshots written by our file system are read back
    assert any((ckpt / "state" / "0").rglob("*.changelog")), sorted(p.name for p in ckpt.rglob("*"))
    spawned, second = _run(spark, ckpt, batches=4)
    assert spawned < one_stock_file
    assert second > first, f"the restarted query lost its state: counts {first} then {second}"
