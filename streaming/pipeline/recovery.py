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
from streaming.settings import Settings

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger("coordinator_mirror.recovery")


def has_committed_batch(spark: SparkSession, checkpoint: str) -> bool:
    jvm = spark._jvm
    conf = spark._jsc.hadoopConfiguration()
    path = jvm.org.apache.hadoop.fs.Path(f"{checkpoint.rstrip('/')}/commits")
    fs = path.getFileSystem(conf)
    if not fs.exists(path):
        return False
    return any(st.getPath().getName().isdigit() for st in fs.listStatus(path))


def _summaries(config: OffsetConfig) -> Any:
    def fn(frames: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        for df in frames:
            rows = []
            for blob in df["blob"]:
                g = codec.decode(bytes(blob))
                if not g.exists:
                    continue
                text = json.dumps(summary(g, config), separators=(",", ":"), ensure_ascii=False)
                rows.append((g.group_id, bytes(blob), text))
            yield pd.DataFrame(rows, columns=["group_id", "blob", "summary"])

    return fn


def recover_snapshots(
    spark: SparkSession, settings: Settings, config: OffsetConfig
) -> Iterator[tuple[str, bytes, dict[str, Any]]] | None:
    """(group id, state bytes, summary) of every live group in the checkpoint's state store; the
    driver store renders full snapshots from the bytes when they are read."""
    if not has_committed_batch(spark, settings.checkpoint_location):
        return None
    # Spark >= 4.1 (coordinatorReportSnapshotUploadLag, on by default): loading a RocksDB store
    # reports the loaded snapshot to the driver's StateStoreCoordinator, which only exists once the
    # session's StreamingQueryManager does.  Before the query starts, in a fresh process, the report
    # fails ("Cannot find endpoint: spark://StateStoreCoordinator@..."), auto snapshot repair takes
    # it for a bad snapshot and the read ends in CANNOT_LOAD_STATE_STORE.AUTO_SNAPSHOT_REPAIR_FAILED.
    # A Spark bug (apache/spark#58211, SPARK-58973).  ``spark.streams`` builds the manager, which
    # registers the coordinator (README "Checkpoint, restarts and sizing";
    # tests/test_streaming/test_spark_workarounds.py fails once Spark no longer needs this).
    spark.streams  # noqa: B018
    state = spark.read.format("statestore").load(settings.checkpoint_location)
    value = state.schema["value"].dataType
    blob = "value.groupState.blob" if "groupState" in value.fieldNames() else "value.blob"
    rows = (
        state.selectExpr(f"{blob} AS blob")
        .where("blob IS NOT NULL")
        .mapInPandas(
            _summaries(config),
            "group_id string, blob binary, summary string",
        )
        .collect()
    )
    return ((r.group_id, bytes(r.blob), json.loads(r.summary)) for r in rows)
