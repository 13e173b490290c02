"""Rebuild the driver's snapshot store from the checkpointed state store after a restart.

The state store already holds every group (codec bytes); reading it with Spark's state data source
(``format("statestore")``) and turning the blobs into snapshots on the executors makes the HTTP API
and the metrics complete before the query's first new batch -- without re-reading the topic.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pandas as pd

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


def _snapshots(retention_ms: int, semantics: str, grace_ms: int, default_assignor: str) -> Any:
    def fn(frames: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        from state import codec
        from state.settings import Settings as StateSettings
        from state.snapshot import snapshot, summary
        from streaming.enrich import with_assignor

        settings = StateSettings(retention_ms=retention_ms, semantics=semantics, confirm_grace_ms=grace_ms)
        for df in frames:
            rows = []
            for blob in df["blob"]:
                g = codec.decode(bytes(blob))
                if not g.exists:
                    continue
                rows.append(
                    (
                        g.group_id,
                        json.dumps(
                            with_assignor(snapshot(g, settings), default_assignor),
                            separators=(",", ":"),
                            ensure_ascii=False,
                        ),
                        json.dumps(summary(g, settings), separators=(",", ":"), ensure_ascii=False),
                    )
                )
            yield pd.DataFrame(rows, columns=["group_id", "body", "summary"])

    return fn


def recover_snapshots(
    spark: SparkSession, settings: Settings
) -> Iterator[tuple[str, dict[str, Any], dict[str, Any]]] | None:
    if not has_committed_batch(spark, settings.checkpoint_location):
        return None
    state = spark.read.format("statestore").load(settings.checkpoint_location)
    value = state.schema["value"].dataType
    blob = "value.groupState.blob" if "groupState" in value.fieldNames() else "value.blob"
    rows = (
        state.selectExpr(f"{blob} AS blob")
        .where("blob IS NOT NULL")
        .mapInPandas(
            _snapshots(
                settings.retention_ms,
                settings.expiry_semantics,
                settings.confirm_grace_ms,
                settings.default_server_assignor,
            ),
            "group_id string, body string, summary string",
        )
        .collect()
    )
    return ((r.group_id, json.loads(r.body), json.loads(r.summary)) for r in rows)
