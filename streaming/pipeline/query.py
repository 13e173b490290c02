"""The mirror's streaming query, defined: the path every record of ``__consumer_offsets`` takes.

    __consumer_offsets (Kafka source, read_committed)  |  capture file (file source)
      -> coalesce(source_tasks)                        log order per partition kept
      -> mapInArrow(decode, collapse commits,          streaming.pipeline.prepare   [observed: decode counts]
                    pack rows per group)
      (+ the seed: the driver's backfill, a file        streaming.pipeline.backfill  [a new checkpoint with
         source read once)                                                            backfill: driver]
      -> groupBy(group_id).applyInPandasWithState      streaming.pipeline.adapter   [state: codec bytes,
                                                                             ProcessingTimeTimeout]
      -> foreachBatch                                   streaming.pipeline.sinks     [store, events, offsets]

`MirrorQuery.start` starts it (again, after a failure: from the checkpoint) with a new sink each
time; the sink's ``on_batch`` hooks (the lag loop's) are handed in, not looked up.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

from state.config import OffsetConfig
from streaming.pipeline.adapter import OUTPUT_DDL, STATE_DDL, make_group_function
from streaming.pipeline.backfill import (
    Backfill,
    add_side_source,
    has_seed,
    remove_wakes,
    seed_source,
    starting_offsets,
    write_wake,
)
from streaming.pipeline.prepare import GroupFilter, counter_names, make_decode_collapse_pack, packed_spark_ddl
from streaming.pipeline.recovery import has_planned_batch, planned_with_ticks
from streaming.pipeline.sinks import OBSERVATION, MirrorSink
from streaming.pipeline.source import read_source
from streaming.serving.status import MirrorStatus
from streaming.serving.store import SnapshotStore
from streaming.settings import Settings

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming import StreamingQuery

log = logging.getLogger("coordinator_mirror")

QUERY_NAME: Final = "coordinator_mirror"

#: a sink hook: (batch id, the batch's output rows)
BatchHook = Callable[[int, list[Any]], None]


def observed_columns() -> list[Any]:
    """Aggregates observed per batch (``DataFrame.observe``) on the packed rows: records by type
    and version, errors, unknown types, commits -- `streaming.pipeline.prepare.counter_names`."""
    from pyspark.sql import functions as F

    return [F.sum(f"n_{name}").alias(name) for name in counter_names()]


class MirrorQuery:
    """The query definition and the sink of its latest start."""

    def __init__(
        self,
        spark: SparkSession,
        settings: Settings,
        store: SnapshotStore,
        status: MirrorStatus,
        config: OffsetConfig,
        *,
        on_batch: Sequence[BatchHook] = (),
        on_sink: Callable[[MirrorSink], None] | None = None,
        on_observed: Callable[[Mapping[str, int]], None] | None = None,
        pool: str | None = None,
    ) -> None:
        self.spark = spark
        #: the FAIR scheduler pool its jobs run in (a process mirroring several clusters)
        self.pool = pool
        self.settings = settings
        self.store = store
        self.status = status
        self.config = config
        self.on_batch = list(on_batch)
        #: told of every new sink (driver events made before it existed are written then)
        self.on_sink = on_sink
        #: told each batch's observed decode counts, once per batch id (the run status)
        self.on_observed = on_observed
        self.sink: MirrorSink | None = None
        #: where the driver's backfill read ended, per partition (`streaming.pipeline.backfill`):
        #: a new checkpoint's Kafka source starts there, beside the seed
        self.seed_ends: dict[int, int] | None = None
        #: the last start's query reads the side input (`streaming.pipeline.backfill`): it runs no
        #: micro-batch without new data, and `wake` makes it run one
        self.wakes = False

    def start(self) -> StreamingQuery:
        """Start the query from the checkpoint, reading the partitions readiness knows; with
        failOnDataLoss off once the start-up drift check found the log start past the checkpoint.

        A checkpoint with no micro-batch yet gets the side input (the seed's folder) even when no
        seed comes, so that its query can be woken.  A checkpoint made before the side input
        existed keeps its query's shape (Spark refuses another source on it): its query runs a
        micro-batch every trigger, as Spark does for processing-time timeouts."""
        s = self.settings
        if s.source == "kafka" and not has_planned_batch(self.spark, s.checkpoint_location):
            add_side_source(self.spark, s.checkpoint_location)
        side = s.source == "kafka" and has_seed(self.spark, s.checkpoint_location)
        # the tick source only where the checkpoint's query was planned with it (every checkpoint
        # made before the expiry wake): a query with the side input is woken instead
        ticks = not side or planned_with_ticks(self.spark, s.checkpoint_location)
        out = self._plan(
            side,
            starting_offsets(s.topic, self.seed_ends) if side and self.seed_ends else "earliest",
            ticks,
        )
        sink = self._new_sink()
        in_pool(self.spark, self.pool)
        with no_data_batches(self.spark, enabled=ticks):
            query = self._writer(out).foreachBatch(sink).start()
        self.wakes = not ticks
        log.info(
            "query %s started (checkpoint %s%s)",
            query.id,
            s.checkpoint_location,
            ""
            if not ticks or s.source != "kafka"
            else "; made before the expiry wake: a micro-batch every trigger",
        )
        return query

    def wake(self, at_ms: int) -> None:
        """Make the query run a micro-batch (`streaming.pipeline.backfill.write_wake`), and remove
        the wakes read by batches committed since."""
        write_wake(self.spark, self.settings.checkpoint_location, at_ms)

    def remove_wakes(self, before_ms: int) -> int:
        return remove_wakes(self.spark, self.settings.checkpoint_location, before_ms)

    def _plan(self, side: bool, starting: str, ticks: bool) -> DataFrame:
        from pyspark.sql.streaming.state import GroupStateTimeout

        s = self.settings
        raw = read_source(
            self.spark,
            s,
            sorted(self.status.targets()) or None,
            fail_on_data_loss=not self.status.drift_suspected("log_start"),
            starting_offsets=starting,
            with_ticks=ticks,
        )
        # Spark's Kafka source runs one task per partition with new records (50 for a default
        # __consumer_offsets), each with ~0.1 s of fixed cost (Python worker round trip, the
        # reader's ListOffsets requests): on 2 cores that was 2.8 s of a 1,000-record batch,
        # 0.7 s in 2 tasks.  coalesce() only ever lowers the count and reads each partition in
        # order, so log order per partition -- all a group needs -- is kept.
        raw = raw.coalesce(s.source_tasks or self.spark.sparkContext.defaultParallelism)
        keep = GroupFilter(*s.group_filter)
        packed: DataFrame = raw.mapInArrow(make_decode_collapse_pack(keep), packed_spark_ddl())
        # the counters are observed, then pruned: only (group_id, packed) crosses the shuffle
        prepared = packed.observe(OBSERVATION, *observed_columns()).select("group_id", "packed")
        if keep:  # filtered groups: counted above, dropped here, before the shuffle
            prepared = prepared.where("length(packed) > 0")
        if side:  # the driver's backfill's state, read once, and wakes (streaming.pipeline.backfill)
            prepared = prepared.unionByName(seed_source(self.spark, s.checkpoint_location))
        fold = make_group_function(self.config, emit_offsets=bool(s.offsets_topic))
        return prepared.groupBy("group_id").applyInPandasWithState(
            fold, OUTPUT_DDL, STATE_DDL, "update", GroupStateTimeout.ProcessingTimeTimeout
        )

    def _writer(self, out: DataFrame) -> Any:
        s = self.settings
        return (
            out.writeStream.queryName(QUERY_NAME)
            .outputMode("update")
            .option("checkpointLocation", s.checkpoint_location)
            .trigger(processingTime=f"{s.trigger_interval_ms} milliseconds")
        )

    def _new_sink(self) -> MirrorSink:
        sink = self.sink = MirrorSink(
            self.settings, self.store, self.status, self.spark, on_observed=self.on_observed
        )
        sink.on_batch.extend(self.on_batch)
        if self.on_sink is not None:
            self.on_sink(sink)
        return sink

    def apply_backfill(self, backfill: Backfill) -> None:
        """The driver's fold of the backfill through a sink, as the first batch's rows would go
        (`streaming.pipeline.backfill`)."""
        self._new_sink().apply_backfill(backfill.rows, backfill.observed)


#: Spark's switch for micro-batches without new data (`no_data_batches`)
NO_DATA_BATCHES: Final = "spark.sql.streaming.noDataMicroBatches.enabled"
#: one query start at a time sets the switch: clusters start their queries on threads of their own
#: against one session, and a checkpoint made before the side input must never start with it off
_NO_DATA_BATCHES_LOCK = threading.Lock()


@contextlib.contextmanager
def no_data_batches(spark: SparkSession, *, enabled: bool) -> Iterator[None]:
    """The query started inside runs micro-batches without new data (``enabled``) or not.

    Spark runs one every trigger for ``GroupStateTimeout.ProcessingTimeTimeout`` (to fire timeouts)
    unless this switch is off: ~0.7-0.85 core on 2 cores with nothing happening at 10k groups.  The
    query copies the session's settings when it is made, so the switch is set around ``start`` and
    restored after it -- the session's other queries, and a session the mirror does not own, keep
    theirs.  Off, timeouts fire only in a batch that runs for new data: the expiry wake
    (`streaming.app.wake`) adds a file to the side input when a deadline is due and the query is
    idle."""
    with _NO_DATA_BATCHES_LOCK:
        before = spark.conf.get(NO_DATA_BATCHES, None)
        spark.conf.set(NO_DATA_BATCHES, "true" if enabled else "false")
        try:
            yield
        finally:
            if before is None:
                spark.conf.unset(NO_DATA_BATCHES)
            else:
                spark.conf.set(NO_DATA_BATCHES, before)


def in_pool(spark: SparkSession, pool: str | None) -> None:
    """The FAIR scheduler pool of the query this thread starts next: Spark's stream thread inherits
    the calling thread's local properties, so every job of that query runs in ``pool``."""
    if pool is not None:
        spark.sparkContext.setLocalProperty("spark.scheduler.pool", pool)


def stop_quietly(query: StreamingQuery, spark: SparkSession, *, restore: bool) -> None:
    """``query.stop()`` with Spark's logging off: with micro-batches back to back (the 0.5 s
    trigger on a busy cluster) the batch that started after the drained one is interrupted, and
    Spark logs that as ERRORs with stack traces (a broadcast it could not store, killed tasks)
    although nothing is lost -- the batch re-runs from the checkpoint at the next start.  The
    root level is restored afterwards when ``restore`` (a session the mirror does not own)."""
    jvm = spark._jvm
    assert jvm is not None
    log4j = jvm.org.apache.logging.log4j
    configurator = log4j.core.config.Configurator
    before = log4j.LogManager.getRootLogger().getLevel()
    configurator.setRootLevel(log4j.Level.OFF)
    # py4j logs the interrupted foreachBatch call on the Python side too (an ERROR with the
    # traceback, before Spark takes it as the interruption it is: `sinks.BatchInterruptedError`)
    py4j_log = logging.getLogger("py4j.clientserver")
    py4j_before = py4j_log.level
    py4j_log.setLevel(logging.CRITICAL + 1)
    try:
        query.stop()
    except Exception as exc:  # py4j's error, or PySpark's UnknownException around it
        if "java.util.concurrent.TimeoutException" not in str(exc):
            raise
        # `spark.sql.streaming.stopTimeout` passed: the stream thread is stuck where no interrupt
        # reaches it; the query is marked stopped and the stop goes on without it
        log.warning(
            "the streaming query %s did not stop within %s; stopping without it",
            query.name,
            _stop_timeout(spark),
        )
    finally:
        if restore:
            configurator.setRootLevel(before)
            py4j_log.setLevel(py4j_before)


def _stop_timeout(spark: SparkSession) -> str:
    return str(spark.conf.get("spark.sql.streaming.stopTimeout", "0"))


def stop_between_batches(
    query: StreamingQuery, spark: SparkSession, timeout_s: float, *, restore: bool
) -> None:
    """`stop_quietly` once the running micro-batch, if any, has ended (its sink output and
    commit), at most ``timeout_s`` later: with batches back to back there may never be an idle
    moment to wait for, so the end of the running batch is the moment.

    A foreachBatch call cut short by ``stop()`` is not only noisy and re-run at the next start:
    Spark decides whether the py4j error is an interruption with a ``(.|\\n)*`` regex over the
    error's text, which overflows the stream thread's stack when a Spark job inside the sink was
    cancelled (a StackOverflowError the JVM prints itself, logging off or not; seen on the
    share-state query in a full test run, and in tests/test_streaming/test_pipeline/test_query.py
    without this wait)."""
    deadline = time.monotonic() + timeout_s
    running = _last_batch_id(query)
    while (
        query.isActive
        and query.status.get("isTriggerActive")
        and _last_batch_id(query) == running
        and time.monotonic() < deadline
    ):
        time.sleep(0.02)
    stop_quietly(query, spark, restore=restore)


def _last_batch_id(query: StreamingQuery) -> int | None:
    """The id of the query's last completed micro-batch (None before the first): one JVM call,
    no JSON."""
    progress = query._jsq.lastProgress()
    return None if progress is None else int(progress.batchId())
