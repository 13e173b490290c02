"""Probes of the checkpoint file system in a live Spark JVM: the page faults of the child processes it
reaped (one per process Hadoop spawns) and Spark's checkpoint manager over Hadoop's *stock* ``LocalFs``.
Used by tests/test_streaming/test_pipeline/test_session_localfs.py, test_spark_workarounds.py and
bench/checkpoint_fs.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def reaped_child_faults(spark: Any) -> int:
    """The Spark JVM's ``cminflt`` (/proc/<pid>/stat): page faults of the child processes it has
    reaped.  Every process Hadoop spawns (and waits for) adds hundreds; nothing else does."""
    pid = int(spark._jvm.java.lang.ProcessHandle.current().pid())
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[8])  # fields[0] is the state (field 3 of proc(5)); cminflt is field 11


def stock_checkpoint_manager(spark: Any, folder: Path) -> Any:
    """Spark's FileContext-based checkpoint manager for ``folder`` over Hadoop's *stock* ``LocalFs``,
    in this JVM (the session itself uses ours).  Also used by bench/checkpoint_fs.py."""
    jvm = spark._jvm
    conf = jvm.org.apache.hadoop.conf.Configuration()
    conf.set("fs.AbstractFileSystem.file.impl", "org.apache.hadoop.fs.local.LocalFs")
    conf.set("fs.file.impl", "org.apache.hadoop.fs.LocalFileSystem")
    conf.setBoolean("fs.file.impl.disable.cache", True)
    cfm = jvm.org.apache.spark.sql.execution.streaming.checkpointing.CheckpointFileManager
    fm = cfm.create(jvm.org.apache.hadoop.fs.Path(f"file://{folder}"), conf)
    assert fm.getClass().getSimpleName() == "FileContextBasedCheckpointFileManager"
    return fm


def stock_checkpoint_file_faults(spark: Any, folder: Path) -> int:
    """The reaped-child faults of one checkpoint file written the way Spark writes it (create,
    write, close, rename) through `stock_checkpoint_manager`."""
    fm = stock_checkpoint_manager(spark, folder)
    before = reaped_child_faults(spark)
    out = fm.createAtomic(spark._jvm.org.apache.hadoop.fs.Path(f"file://{folder}/0"), False)
    out.write(bytearray(b"v1\n"))
    out.close()
    assert (folder / "0").read_bytes() == b"v1\n"
    return reaped_child_faults(spark) - before
