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

`ShareStateQuery` is the query as the mirror's side-query supervisor
(`streaming.app.supervisor.SideQuerySupervisor`, the ``mirror-share-state`` thread) runs it: it
waits for the topic, starts from its own checkpoint -- ``<checkpoint_location>/share-group-state``
-- and is restarted after a failure with the main query's restart policy; its health is in
``/ready``'s ``parts`` and the metrics, and never gates ``/ready``.  The mirror registers its
wiring (`wanted_by`: the lag reader's share-partitions; `share_view_of`: the ``share_state`` of
``GET /groups/{id}``); the exporter renders the share metrics from the same `ShareStateStore`.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any, Final

import msgpack
import pandas as pd
import pyarrow as pa

from decoders import decode_share_state_record
from decoders.records import DecodeError, Record, Source, UnknownRecord
from state import share
from streaming.health.lag import LagTracker
from streaming.pipeline.query import in_pool, stop_between_batches
from streaming.pipeline.sinks import InterruptibleSink
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
class ShareSink(InterruptibleSink):
    """``foreachBatch``: states into the `ShareStateStore`, undecodable records into it and into
    ``GET /errors`` (the main store's list, with ``topic`` set) -- counted once per batch id."""

    def __init__(self, store: ShareStateStore, errors_to: Any | None = None) -> None:
        self.store = store
        self.errors_to = errors_to

    def _batch(self, df: DataFrame, batch_id: int) -> None:
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
    spark: SparkSession, settings: Settings, sink: ShareSink, partitions: list[int], pool: str | None = None
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
    in_pool(spark, pool)
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


class ShareStateQuery:
    """The share-state query as `streaming.app.supervisor.SideQuerySupervisor` runs it: when it can
    start (the mirror caught up -- the backfill has the cores to itself until then -- and the topic
    has partitions), its start (the share groups recovered from its checkpoint the first time) and
    its stop.  Its wiring -- the lag tracker's wanted partitions, ``GET /groups/{id}``'s
    ``share_state`` -- is registered by the mirror (`streaming.app.mirror`)."""

    name = "share_state"

    def __init__(
        self,
        settings: Settings,
        session: Callable[[], SparkSession],
        store: ShareStateStore,
        errors_to: SnapshotStore,
        partition_offsets: PartitionOffsets,
        *,
        ready: Callable[[], bool],
        restore_logging: bool = True,
        pool: str | None = None,
    ) -> None:
        self.settings = settings
        self.session = session
        self.store = store
        #: the mirror's store: undecodable records of the topic go to its ``GET /errors``
        self.errors_to = errors_to
        self.partition_offsets = partition_offsets
        self.ready = ready
        #: restore Spark's logging after a stop (a session the mirror does not own)
        self.restore_logging = restore_logging
        self.pool = pool
        self._partitions: list[int] = []
        self._recovered = False

    def waiting(self) -> str | None:
        """Why the query cannot start now; `PermissionError` when the principal may not Describe
        ``__share_group_state``."""
        if not self.ready():
            return "waiting for the mirror to catch up"
        try:
            _, ends = self.partition_offsets(TOPIC)
        except PermissionError as exc:  # the cluster client's TopicAuthorizationError
            raise PermissionError(f"{exc} (Describe and Read on {TOPIC})") from None
        except Exception as exc:
            if "UnknownTopicOrPartition" in str(exc) or "LeaderNotAvailable" in str(exc):
                return f"waiting for {TOPIC} (no share group has initialised a share-partition yet)"
            raise
        if not ends:
            return f"waiting for {TOPIC}'s partitions"
        self._partitions = sorted(ends)
        return None

    def begin(self) -> StreamingQuery:
        s = self.settings
        spark = self.session()
        if not self._recovered:
            n = self.store.load(recover(spark, s))
            self._recovered = True
            if n:
                log.info("recovered %d share groups from %s", n, checkpoint_of(s))
        return start_query(spark, s, ShareSink(self.store, self.errors_to), self._partitions, self.pool)

    def describe(self) -> str:
        """What the supervisor's "started" line says of it."""
        return f"{TOPIC}, {len(self._partitions)} partitions"

    def end(self, query: StreamingQuery) -> None:
        # between two batches, and Spark's lines about stopping (a job group with no active job to
        # cancel: a WARN at every stop) are not the user's business; Spark's logging is restored
        # afterwards only for a session the mirror does not own: the DAGScheduler logs about the
        # cancelled job group on its own thread, after ``stop()`` returned
        stop_between_batches(query, self.session(), 30.0, restore=self.restore_logging)


def share_view_of(store: ShareStateStore, lag: LagTracker) -> Callable[[str], dict[str, Any] | None]:
    """``GET /groups/{id}``'s ``share_state``: a share group's delivery state, its topics named and
    its lag against the lag tracker's latest round."""

    def view(group_id: str) -> dict[str, Any] | None:
        blob = store.blob(group_id)
        if blob is None:
            return None
        r = lag.round
        ends = {} if r is None else {tp: e.high_watermark for tp, e in r.partitions.items()}
        return share_view(blob, dict(lag.topic_names), ends)

    return view


def wanted_by(store: ShareStateStore, lag: LagTracker) -> Callable[[], set[tuple[str, int]]]:
    """The share-partitions whose log offsets the lag rounds read (registered with the tracker)."""
    return lambda: store.wanted(dict(lag.topic_names))
