"""The `__share_group_state` query: share-partition delivery state (issue 26), beside the main query.

A second streaming query, not a second source of the main one, because (measured and argued in
docs/insights.md): the topic exists only once a share group initialised a share-partition (a
cluster may never have it), and a Kafka source cannot be added to a running query's checkpoint --
the main query would need a new checkpoint when the topic appears; the share coordinator's records
carry their own K space and log positions (a share group's records spread over several partitions
of this topic), so mixing them into the main query's per-group log order would need a second
ordering everywhere; and a query with no new data runs no micro-batch, so the second query costs
nothing while share groups are idle.

    __share_group_state (Kafka source, assign every partition, read_committed)
      -> mapInArrow(pack_rows)          the share group id from each key; rows packed per group
      -> groupBy(group_id).applyInPandasWithState(fold_share)     state: `state.share` bytes
      -> foreachBatch(ShareSink)        `streaming.serving.share.ShareStateStore`, GET /errors

`ShareStateMirror.attach(...)` wires it beside the mirror's query (a thread that waits for the
topic, starts the query from its own checkpoint -- ``<checkpoint_location>/share-group-state`` --
and restarts it after a failure; the lag reader's share-partitions; the ``share_state`` of
``GET /groups/{id}``); the exporter renders the share metrics from the same `ShareStateStore`.
Its collaborators are handed in by the composition root (`streaming.app.mirror`): the session,
the stores, the lag tracker and the cluster's log offsets (`streaming.cluster.groups`).  It does
not gate ``/ready``.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any, Final

import msgpack
import pandas as pd
import pyarrow as pa

from decoders import decode_share_state_record
from decoders.records import DecodeError, Record, Source, UnknownRecord
from state import share
from streaming.health.lag import LagTracker
from streaming.pipeline.query import stop_between_batches
from streaming.pipeline.source import kafka_options
from streaming.serving.share import ShareStateStore, share_view
from streaming.serving.store import SnapshotStore
from streaming.settings import Settings

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming import StreamingQuery

log = logging.getLogger("coordinator_mirror.share_state")

TOPIC: Final = "__share_group_state"
QUERY_NAME: Final = "coordinator_mirror_share_state"
#: a topic's (log start, log end) offsets per partition (`streaming.cluster.groups.ClusterClient`)
PartitionOffsets = Callable[[str], tuple[dict[int, int], dict[int, int]]]
CHECKPOINT_DIR: Final = "share-group-state"
PACKED_DDL: Final = "group_id string, packed binary"
STATE_DDL: Final = "version int, blob binary"
OUTPUT_DDL: Final = "group_id string, kind string, body string, blob binary"
_OUTPUT_COLUMNS: Final = ("group_id", "kind", "body", "blob")


# ------------------------------------------------------------------------------------ executors
def pack_rows(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """``mapInArrow``: Kafka rows -> one row per share group, its records ``[partition, offset,
    timestamp, key, value]`` packed (MessagePack); a key that does not decode goes under a null id."""
    for batch in batches:
        if batch.num_rows == 0:
            continue
        cols = batch.to_pydict()
        groups: dict[str | None, list[list[Any]]] = {}
        for key, value, p, o, t in zip(
            cols["key"], cols["value"], cols["partition"], cols["offset"], cols["timestamp"], strict=True
        ):
            rec = decode_share_state_record(key or b"", None)
            gid = rec.key.group_id if isinstance(rec, Record) else None
            groups.setdefault(gid, []).append([p, o, t, key, value])
        yield pa.RecordBatch.from_pydict(
            {
                "group_id": pa.array(list(groups), pa.string()),
                "packed": pa.array(
                    [msgpack.packb(rows, use_bin_type=True) for rows in groups.values()], pa.binary()
                ),
            }
        )


def _dumps(obj: Any) -> str:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False, default=str)


def _frame(rows: list[tuple[Any, ...]]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=list(_OUTPUT_COLUMNS), dtype=object)


def fold_share(key: tuple[Any, ...], frames: Iterator[pd.DataFrame], gstate: Any) -> Iterator[pd.DataFrame]:
    """``applyInPandasWithState``: one share group's records of a trigger into its `state.share`
    bytes.  Undecodable and unknown records become ``error`` rows (partition, offset, why); a
    failure of the fold keeps the group's last good state (``error`` row, phase "fold")."""
    group_id = key[0]
    records = []
    for frame in frames:
        for packed in frame["packed"]:
            for p, o, t, k, v in msgpack.unpackb(packed, raw=False):
                src = Source(int(p), int(o), int(t))
                records.append(decode_share_state_record(k or b"", v, src))
    records.sort(key=lambda r: (r.source.partition, r.source.offset))
    rows: list[tuple[Any, ...]] = []
    counts = {"ok": 0, "error": 0, "unknown": 0}
    for rec in records:
        if isinstance(rec, Record):
            counts["ok"] += 1
            continue
        status = "unknown" if isinstance(rec, UnknownRecord) else "error"
        counts[status] += 1
        body: dict[str, Any] = {
            "topic": TOPIC,
            "status": status,
            "group_id": group_id,
            "source_partition": rec.source.partition,
            "source_offset": rec.source.offset,
            "record_type": rec.record_type,
        }
        if isinstance(rec, DecodeError):
            body.update(error_field=rec.field, error_kind=str(rec.kind), error_reason=rec.reason)
        rows.append((group_id, "error", _dumps(body), None))
    rows.append((group_id, "counts", _dumps(counts), None))
    if group_id is not None and records:
        try:
            held = share.decode(bytes(gstate.get[1])) if gstate.exists else None
            g = share.fold(held, records, group_id)
            if g is None:
                if gstate.exists:
                    gstate.remove()
                rows.append((group_id, "deleted", None, None))
            else:
                blob = share.encode(g)
                gstate.update((share.CODEC_VERSION, blob))
                rows.append((group_id, "state", _dumps(share.summary(g)), blob))
        except Exception as exc:  # the group boundary: one group's failure never fails the query
            reason = f"{type(exc).__name__}: {exc}"[:500]
            body = {"topic": TOPIC, "status": "error", "group_id": group_id, "phase": "fold",
                    "error_kind": "internal", "error_reason": reason}  # fmt: skip
            rows.append((group_id, "error", _dumps(body), None))
    yield _frame(rows)


# ----------------------------------------------------------------------------------------- driver
class ShareSink:
    """``foreachBatch``: states into the `ShareStateStore`, undecodable records into it and into
    ``GET /errors`` (the main store's list, with ``topic`` set) -- counted once per batch id."""

    def __init__(self, store: ShareStateStore, errors_to: Any | None = None) -> None:
        self.store = store
        self.errors_to = errors_to

    def __call__(self, df: DataFrame, batch_id: int) -> None:
        rows = df.collect()
        states: list[tuple[str, bytes | None, dict[str, Any] | None]] = []
        counts = {"ok": 0, "error": 0, "unknown": 0}
        errors: list[dict[str, Any]] = []
        for r in rows:
            if r.kind == "state":
                states.append((r.group_id, bytes(r.blob), json.loads(r.body)))
            elif r.kind == "deleted":
                states.append((r.group_id, None, None))
            elif r.kind == "counts":
                for status, n in json.loads(r.body).items():
                    counts[status] = counts.get(status, 0) + int(n)
            elif r.kind == "error":
                errors.append(json.loads(r.body))
        self.store.apply(batch_id, states)
        fresh = batch_id > self.store.counted_batch
        self.store.count(batch_id, counts, errors)
        if errors and fresh:
            if self.errors_to is not None:
                self.errors_to.add_errors(errors)
            log.warning(
                "share-state batch %d: %d record(s) could not be read (GET /errors)", batch_id, len(errors)
            )


def checkpoint_of(settings: Settings) -> str:
    return f"{settings.checkpoint_location.rstrip('/')}/{CHECKPOINT_DIR}"


def start_query(
    spark: SparkSession, settings: Settings, sink: ShareSink, partitions: list[int]
) -> StreamingQuery:
    from pyspark.sql import functions as F
    from pyspark.sql.streaming.state import GroupStateTimeout

    reader = spark.readStream.format("kafka")
    options = kafka_options(settings, partitions)
    options["assign"] = json.dumps({TOPIC: sorted(partitions)})
    for k, v in options.items():
        reader = reader.option(k, v)
    raw = reader.load().select(
        "key", "value", "partition", "offset", F.unix_millis(F.col("timestamp")).alias("timestamp")
    )
    raw = raw.coalesce(settings.source_tasks or spark.sparkContext.defaultParallelism)
    packed = raw.mapInArrow(pack_rows, PACKED_DDL)
    out = packed.groupBy("group_id").applyInPandasWithState(
        fold_share, OUTPUT_DDL, STATE_DDL, "update", GroupStateTimeout.NoTimeout
    )
    return (
        out.writeStream.queryName(QUERY_NAME)
        .outputMode("update")
        .option("checkpointLocation", checkpoint_of(settings))
        .trigger(processingTime=f"{settings.trigger_interval_ms} milliseconds")
        .foreachBatch(sink)
        .start()
    )


def recover(spark: SparkSession, settings: Settings) -> list[tuple[str, bytes, dict[str, Any]]]:
    """The share groups in the share query's checkpointed state store (after a restart)."""
    from streaming.pipeline.recovery import has_committed_batch

    path = checkpoint_of(settings)
    if not has_committed_batch(spark, path):
        return []
    spark.streams  # noqa: B018 - see streaming.pipeline.recovery.recover_snapshots (SPARK-58973)
    state = spark.read.format("statestore").load(path)
    value = state.schema["value"].dataType
    blob = "value.groupState.blob" if "groupState" in value.fieldNames() else "value.blob"
    out = []
    for r in (
        state.selectExpr("key.group_id AS group_id", f"{blob} AS blob").where("blob IS NOT NULL").collect()
    ):
        g = share.decode(bytes(r.blob))
        out.append((r.group_id, bytes(r.blob), share.summary(g)))
    return out


class ShareStateMirror:
    """The share-state query's lifecycle beside a `Mirror`: wait for the topic, start, restart."""

    def __init__(
        self,
        settings: Settings,
        spark: SparkSession,
        store: ShareStateStore,
        groups: SnapshotStore,
        partition_offsets: PartitionOffsets,
    ) -> None:
        self.settings = settings
        self.spark = spark
        self.store = store
        #: the mirror's store (undecodable records of the topic go to its ``GET /errors``)
        self.groups = groups
        self.partition_offsets = partition_offsets
        self.query: StreamingQuery | None = None
        self.failure: str | None = None
        self.restarts = 0
        self._denied = False
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, name="mirror-share-state", daemon=True)

    @classmethod
    def attach(
        cls,
        settings: Settings,
        spark: SparkSession,
        store: ShareStateStore,
        groups: SnapshotStore,
        lag: LagTracker,
        *,
        partition_offsets: PartitionOffsets | None,
    ) -> ShareStateMirror | None:
        """Wire the share-state query beside the mirror's (None: off, or not a Kafka source)."""
        s = settings
        if not (s.share_state_enabled and s.source == "kafka") or partition_offsets is None:
            return None
        self = cls(settings, spark, store, groups, partition_offsets)

        def names() -> dict[str, str]:
            return dict(lag.topic_names)

        def ends() -> dict[tuple[str, int], int]:
            r = lag.round
            return {} if r is None else {tp: e.high_watermark for tp, e in r.partitions.items()}

        lag.also_wanted.append(lambda: self.store.wanted(names()))
        groups.share_state = lambda gid: (
            None if (blob := self.store.blob(gid)) is None else share_view(blob, names(), ends())
        )
        self._thread.start()
        return self

    def _partitions(self) -> list[int] | None:
        """``__share_group_state``'s partitions (None: no share group initialised one yet, or the
        principal may not Describe the topic -- said once)."""
        try:
            _, ends = self.partition_offsets(TOPIC)
        except PermissionError as exc:  # the cluster client's TopicAuthorizationError
            if not self._denied:
                log.warning("share groups' delivery state not read: %s (Describe and Read on %s)", exc, TOPIC)
                self._denied = True
            return None
        except Exception as exc:
            if "UnknownTopicOrPartition" in str(exc) or "LeaderNotAvailable" in str(exc):
                return None  # no share group initialised a share-partition yet
            raise
        return sorted(ends) or None

    def _run(self) -> None:
        s = self.settings
        next_check = 0.0
        backoff = s.query_restart_backoff_s
        recovered = False
        while not self._stopped.wait(0.5):
            try:
                if self.query is not None and self.query.isActive:
                    continue
                now = time.monotonic()
                if now < next_check or not self.groups.readiness.ready:
                    # not before the mirror is ready: the backfill has the cores to itself
                    continue
                if self.query is not None:  # failed
                    exc = self.query.exception()
                    self.failure = str(exc).splitlines()[0] if exc is not None else "stopped"
                    log.error("the share-state query failed (%s); restarting in %.0fs", self.failure, backoff)
                    self.query = None
                    next_check = now + backoff
                    backoff = min(s.query_restart_backoff_max_s, backoff * 2)
                    self.restarts += 1
                    continue
                partitions = self._partitions()
                if partitions is None:
                    next_check = now + s.topic_wait_interval_s
                    continue
                if not recovered:
                    n = self.store.load(recover(self.spark, s))
                    recovered = True
                    if n:
                        log.info("recovered %d share groups from %s", n, checkpoint_of(s))
                if self._stopped.is_set():
                    return  # the mirror is stopping: no query now
                sink = ShareSink(self.store, self.groups)
                self.query = start_query(self.spark, s, sink, partitions)
                self.failure = None
                if self._stopped.is_set():
                    return  # started as the mirror began to stop: stop() (joining us) stops it, unannounced
                log.info("share-state query started (%s, %d partitions)", TOPIC, len(partitions))
            except Exception:  # never fatal for the mirror: retried
                if self._stopped.is_set():
                    return
                log.warning("share-state query step failed", exc_info=True)
                next_check = time.monotonic() + backoff

    def running(self) -> bool:
        q = self.query
        return q is not None and bool(q.isActive)

    def stop(self, *, restore: bool = True) -> None:
        """No query starts after this (the thread is joined first: one it is starting is then
        stopped too).  Spark's logging is restored afterwards only when ``restore``: the
        DAGScheduler logs about the cancelled job group on its own thread, after ``stop()``
        returned."""
        self._stopped.set()
        if self._thread.is_alive():
            self._thread.join(30)
        q = self.query
        if q is not None:
            try:
                # between two batches, and Spark's lines about stopping (a job group with no
                # active job to cancel: a WARN at every stop) are not the user's business
                stop_between_batches(q, self.spark, 30.0, restore=restore)
            except Exception:
                log.debug("stopping the share-state query failed", exc_info=True)
