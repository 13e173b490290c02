"""Rebuild the driver's snapshot store from the checkpointed state store after a restart.

The state store already holds every group (codec bytes); reading it with Spark's state data source
(``format("statestore")``), with each group's summary computed on the executors, makes the HTTP API
and the metrics complete before the query's first new batch -- without re-reading the topic.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pandas as pd

from state import codec
from state.config import OffsetConfig
from state.snapshot import summary
from streaming.pipeline.adapter import read_seed_cell
from streaming.pipeline.backfill import SEED_DDL, SEED_FILE, has_seed_file, seed_path
from streaming.settings import Settings

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger("coordinator_mirror.recovery")


def _has_batch_file(spark: SparkSession, checkpoint: str, log: str) -> bool:
    """Whether the checkpoint's ``log`` folder (``offsets``, ``commits``) has a batch's file."""
    path = spark._jvm.org.apache.hadoop.fs.Path(f"{checkpoint.rstrip('/')}/{log}")
    fs = path.getFileSystem(spark._jsc.hadoopConfiguration())
    return bool(fs.exists(path)) and any(st.getPath().getName().isdigit() for st in fs.listStatus(path))


def has_committed_batch(spark: SparkSession, checkpoint: str) -> bool:
    """A micro-batch of the checkpoint's query has been committed (``commits/<n>``)."""
    return _has_batch_file(spark, checkpoint, "commits")


def has_planned_batch(spark: SparkSession, checkpoint: str) -> bool:
    """A micro-batch of the checkpoint's query has been planned (``offsets/<n>``)."""
    return _has_batch_file(spark, checkpoint, "offsets")


def parse_offset_log(text: str, topic: str) -> dict[int, int] | None:
    """The source positions of one ``<checkpoint>/offsets/<batch>`` file (Spark's OffsetSeqLog: a
    version line, the metadata line, then one JSON line per source; the Kafka source's is
    ``{"topic": {"partition": offset}}``) for ``topic``; None when no line names it."""
    for line in text.splitlines()[2:]:
        try:
            data = json.loads(line)
        except ValueError:
            continue
        if isinstance(data, dict) and isinstance(data.get(topic), dict):
            return {int(p): int(o) for p, o in data[topic].items()}
    return None


def offset_log_has_ticks(text: str) -> bool:
    """Whether one ``<checkpoint>/offsets/<batch>`` file holds the tick source's position
    (`streaming.pipeline.source.ticks`: Spark's rate source, whose offset is a bare number, where
    the Kafka source's and the file source's are JSON objects)."""
    for line in text.splitlines()[2:]:
        try:
            data = json.loads(line)
        except ValueError:
            continue
        if isinstance(data, int) and not isinstance(data, bool):
            return True
    return False


def read_text(spark: SparkSession, path: Any) -> str:
    fs = path.getFileSystem(spark._jsc.hadoopConfiguration())
    stream = fs.open(path)
    try:
        return str(spark._jvm.org.apache.commons.io.IOUtils.toString(stream, "UTF-8"))
    finally:
        stream.close()


def planned_with_ticks(spark: SparkSession, checkpoint: str) -> bool:
    """Whether the checkpoint's query was planned with the tick source: its last ``offsets/<n>``
    file has the rate source's line.  A checkpoint with no planned batch has none (a new query
    gets no ticks; Spark refuses a source added to, or taken from, a planned query)."""
    jvm = spark._jvm
    folder = jvm.org.apache.hadoop.fs.Path(f"{checkpoint.rstrip('/')}/offsets")
    fs = folder.getFileSystem(spark._jsc.hadoopConfiguration())
    if not fs.exists(folder):
        return False
    batches = [
        int(st.getPath().getName()) for st in fs.listStatus(folder) if st.getPath().getName().isdigit()
    ]
    if not batches:
        return False
    return offset_log_has_ticks(read_text(spark, jvm.org.apache.hadoop.fs.Path(folder, str(max(batches)))))


def read_committed_offsets(spark: SparkSession, checkpoint: str, topic: str) -> dict[int, int] | None:
    """Where the last committed micro-batch left ``topic`` (the next offset to read per partition),
    from the checkpoint's ``commits/`` and ``offsets/`` logs; None without a committed batch."""
    jvm = spark._jvm
    conf = spark._jsc.hadoopConfiguration()
    root = checkpoint.rstrip("/")
    commits = jvm.org.apache.hadoop.fs.Path(f"{root}/commits")
    fs = commits.getFileSystem(conf)
    if not fs.exists(commits):
        return None
    batches = [
        int(st.getPath().getName()) for st in fs.listStatus(commits) if st.getPath().getName().isdigit()
    ]
    if not batches:
        return None
    path = jvm.org.apache.hadoop.fs.Path(f"{root}/offsets/{max(batches)}")
    if not fs.exists(path):
        return None
    stream = fs.open(path)
    try:
        text = jvm.org.apache.commons.io.IOUtils.toString(stream, "UTF-8")
    finally:
        stream.close()
    return parse_offset_log(str(text), topic)


def _summary_rows(
    config: OffsetConfig, rows: Iterator[tuple[str, int | None, bytes]]
) -> list[tuple[str, bytes | None, str | None, str | None]]:
    """Each state row's summary; a quarantined row (negative codec version) or one whose bytes do
    not decode comes back with ``quarantine`` set, so the API shows it after the restart too."""
    out: list[tuple[str, bytes | None, str | None, str | None]] = []
    for gid, version, blob in rows:
        quarantine = None
        if version is not None and int(version) < 0:
            quarantine = "quarantined before the restart (the details were not kept)"
        try:
            g = codec.decode(bytes(blob)) if len(blob) else None
        except codec.StateCodecError as exc:
            g, quarantine = None, f"{type(exc).__name__}: {exc}"
        if g is not None and g.exists:
            text = json.dumps(summary(g, config), separators=(",", ":"), ensure_ascii=False)
            out.append((g.group_id, bytes(blob), text, quarantine))
        elif quarantine is not None:
            out.append((gid, None, None, quarantine))
    return out


_SUMMARY_DDL = "group_id string, blob binary, summary string, quarantine string"
_SUMMARY_COLUMNS = ["group_id", "blob", "summary", "quarantine"]


def _summaries(config: OffsetConfig) -> Any:
    """`_summary_rows` of the state store's rows (group_id, codec_version, blob)."""

    def fn(frames: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        for df in frames:
            rows = zip(df["group_id"], df["codec_version"], df["blob"], strict=True)
            yield pd.DataFrame(_summary_rows(config, rows), columns=_SUMMARY_COLUMNS)

    return fn


def _seed_summaries(config: OffsetConfig) -> Any:
    """`_summary_rows` of the seed's cells (group_id, packed: `adapter.seed_cell`)."""

    def fn(frames: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        for df in frames:
            cells = (
                (gid, read_seed_cell(bytes(cell)))
                for gid, cell in zip(df["group_id"], df["packed"], strict=True)
            )
            rows = ((gid, seed.version, seed.blob) for gid, seed in cells)
            yield pd.DataFrame(_summary_rows(config, rows), columns=_SUMMARY_COLUMNS)

    return fn


def recover_snapshots(
    spark: SparkSession, settings: Settings, config: OffsetConfig
) -> list[tuple[str, bytes | None, dict[str, Any] | None, str | None]] | None:
    """(group id, state bytes, summary, quarantine reason or None) of every live or quarantined
    group in the checkpoint's state store; the driver store renders full snapshots from the bytes
    when they are read.

    A seeded checkpoint (`streaming.pipeline.backfill`) whose first batch was planned but not
    committed has its groups in the seed instead: that batch emits nothing for the groups it
    stores from the seed, so they are read from there."""
    checkpoint = settings.checkpoint_location
    if not has_committed_batch(spark, checkpoint):
        if (
            settings.source != "kafka"
            or not has_seed_file(spark, checkpoint)
            or not has_planned_batch(spark, checkpoint)
        ):
            return None
        log.info("the first micro-batch was planned but not committed: the groups come from the seed")
        frame = spark.read.schema(SEED_DDL).parquet(f"{seed_path(checkpoint)}/{SEED_FILE}")
        return _collected(frame.mapInPandas(_seed_summaries(config), _SUMMARY_DDL))
    # Spark >= 4.1 (coordinatorReportSnapshotUploadLag, on by default): loading a RocksDB store
    # reports the loaded snapshot to the driver's StateStoreCoordinator, which only exists once the
    # session's StreamingQueryManager does.  Before the query starts, in a fresh process, the report
    # fails ("Cannot find endpoint: spark://StateStoreCoordinator@..."), auto snapshot repair takes
    # it for a bad snapshot and the read ends in CANNOT_LOAD_STATE_STORE.AUTO_SNAPSHOT_REPAIR_FAILED.
    # A Spark bug (apache/spark#58211, SPARK-58973).  ``spark.streams`` builds the manager, which
    # registers the coordinator (docs/operating.md "Checkpoint, restarts and sizing";
    # tests/test_streaming/test_pipeline/test_spark_workarounds.py fails once Spark no longer needs this).
    spark.streams  # noqa: B018
    state = spark.read.format("statestore").load(checkpoint)
    value = state.schema["value"].dataType
    blob = "value.groupState.blob" if "groupState" in value.fieldNames() else "value.blob"
    version = blob.replace(".blob", ".codec_version")
    rows = (
        state.selectExpr("key.group_id AS group_id", f"{version} AS codec_version", f"{blob} AS blob")
        .where("blob IS NOT NULL")
        .mapInPandas(_summaries(config), _SUMMARY_DDL)
    )
    return _collected(rows)


def _collected(frame: Any) -> list[tuple[str, bytes | None, dict[str, Any] | None, str | None]]:
    return [
        (
            r.group_id,
            bytes(r.blob) if r.blob is not None else None,
            json.loads(r.summary) if r.summary else None,
            r.quarantine,
        )
        for r in frame.collect()
    ]


#: the format of ``<checkpoint>/mirror.json`` this code writes (and the newest it reads)
CHECKPOINT_META_FORMAT = 1


def _meta_path(spark: SparkSession, checkpoint: str) -> tuple[Any, Any]:
    jvm = spark._jvm
    path = jvm.org.apache.hadoop.fs.Path(f"{checkpoint.rstrip('/')}/mirror.json")
    return path, path.getFileSystem(spark._jsc.hadoopConfiguration())


def read_checkpoint_meta(spark: SparkSession, checkpoint: str) -> dict[str, Any] | None:
    """``<checkpoint>/mirror.json``: the cluster id the checkpoint belongs to, its format, when the
    mirror last completed a batch (None: a checkpoint from before this file, or none at all)."""
    path, fs = _meta_path(spark, checkpoint)
    if not fs.exists(path):
        return None
    stream = fs.open(path)
    try:
        text = spark._jvm.org.apache.commons.io.IOUtils.toString(stream, "UTF-8")
    finally:
        stream.close()
    data = json.loads(text)
    return data if isinstance(data, dict) else None


def write_checkpoint_meta(spark: SparkSession, checkpoint: str, meta: dict[str, Any]) -> None:
    path, fs = _meta_path(spark, checkpoint)
    out = fs.create(path, True)
    try:
        out.write(bytearray(json.dumps(meta, sort_keys=True).encode()))
    finally:
        out.close()


class SparkCheckpointFiles:
    """The checkpoint's ``mirror.json`` and committed position, read and written through the
    session's Hadoop file system (`streaming.app.drift.CheckpointFiles`)."""

    def __init__(self, spark: SparkSession, checkpoint: str, topic: str) -> None:
        self.spark = spark
        self.checkpoint = checkpoint
        self.topic = topic

    def read_meta(self) -> dict[str, Any] | None:
        return read_checkpoint_meta(self.spark, self.checkpoint)

    def write_meta(self, meta: dict[str, Any]) -> None:
        write_checkpoint_meta(self.spark, self.checkpoint, meta)

    def committed_offsets(self) -> dict[int, int] | None:
        return read_committed_offsets(self.spark, self.checkpoint, self.topic)
