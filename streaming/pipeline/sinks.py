"""The query's ``foreachBatch`` sink: the driver's snapshot store, change events, the offsets feed.

Per micro-batch (idempotent per batch id; a batch replayed after a crash has the same id and the
same rows):

* snapshot store -- last write wins, so a replay rewrites the same values;
* change events to JSON-lines files -- one file per batch id (``events-<batch>.jsonl``), written
  atomically, so a replay overwrites it;
* change events the driver makes (`MirrorSink.write_driver_events`: reconciliation and drift as
  ``events-driver-<ms>.jsonl``, consumer health from the lag rounds as ``health-<ms>.jsonl``) to
  the same places: files beside the batch files and the events topic;
* change events / committed offsets to Kafka topics -- written with Spark's Kafka sink (the same
  ``kafka.*`` client options as the source), then a per-sink marker file under the checkpoint
  records the batch id; a batch at or below the marker is not written again.  A crash between the
  write and the marker re-sends that batch once, with the same events (a re-run batch has the same
  rows and time): consumers drop them by their identity (`state.events.event_key`); the offsets
  feed is a compacted topic keyed by partition, so its consumers see no difference.
"""

from __future__ import annotations

import abc
import json
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from state.events import RebalanceTimed
from streaming.pipeline.recovery import parse_offset_log, read_text
from streaming.serving.catalogue import REBALANCE_DURATION_BUCKETS, reason_label, record_type_label
from streaming.serving.status import BatchStats, MirrorStatus
from streaming.serving.store import SnapshotStore
from streaming.settings import Settings

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger("coordinator_mirror.sink")

#: the Java exceptions Spark's StreamExecution takes for an interruption (query.stop()) when they
#: reach it through a Python foreachBatch function (``isInterruptionException``, Spark 4.2)
_INTERRUPTIONS: Final = (
    "java.lang.InterruptedException",
    "java.io.InterruptedIOException",
    "java.nio.channels.ClosedByInterruptException",
)


class BatchInterruptedError(Exception):
    """The micro-batch was interrupted inside the sink (``query.stop()`` while its job ran)."""


def interruption_line(exc: BaseException) -> str | None:
    """For the py4j error of a JVM call interrupted by ``query.stop()``: the error in one line,
    worded as Spark recognises an interrupted foreachBatch; None for any other error.

    Why: Spark finds an interruption in the Python traceback it gets back with the regex
    ``Py4JJavaError: An error occurred while calling((.|\\n)*)(InterruptedException|...)``, whose
    alternation recurses once per character -- on py4j's full text (the Java stack trace of the
    InterruptedException, ~6 KB) it overflowed the stream thread's stack: the process printed
    ``Exception in thread "stream execution thread ..." java.lang.StackOverflowError`` on a
    SIGTERM during a backfill.  The short line keeps Spark's graceful path."""
    from py4j.protocol import Py4JJavaError

    if not isinstance(exc, Py4JJavaError):
        return None
    try:
        text = str(exc)  # asks the JVM for the Java exception's text
    except Exception:
        return None
    head = text.split("\n\tat ", 1)[0].strip()  # the call and the Java exception, no stack
    if not any(name in head for name in _INTERRUPTIONS):
        return None
    return "py4j.protocol.Py4JJavaError: " + head


class InterruptibleSink(abc.ABC):
    """A ``foreachBatch`` function whose batch, interrupted by ``query.stop()``, fails with
    `interruption_line`'s one line -- Spark's graceful stop -- rather than py4j's whole text: every
    query's sink must, or a stop during its batch prints a StackOverflowError (the share-state
    query's sink did not, and a SIGTERM during one of its batches printed 1,000 lines)."""

    def __call__(self, df: DataFrame, batch_id: int) -> None:
        try:
            self._batch(df, batch_id)
        except Exception as exc:
            line = interruption_line(exc)
            if line is None:
                raise
            raise BatchInterruptedError(line) from None

    @abc.abstractmethod
    def _batch(self, df: DataFrame, batch_id: int) -> None:
        """The sink's own work on one micro-batch."""


#: file name prefixes of the driver's own events (`MirrorSink.write_driver_events`)
DRIVER_EVENTS: Final = "events-driver"
HEALTH_EVENTS: Final = "health"


class BatchMarker:
    """The last batch id a sink completed, in a small file under the checkpoint (any Hadoop FS)."""

    def __init__(self, spark: SparkSession, checkpoint: str, name: str) -> None:
        jvm = self._jvm = spark._jvm
        conf = spark._jsc.hadoopConfiguration()
        self._path = jvm.org.apache.hadoop.fs.Path(f"{checkpoint.rstrip('/')}/sinks/{name}")
        self._fs = self._path.getFileSystem(conf)

    def last(self) -> int:
        if not self._fs.exists(self._path):
            return -1
        stream = self._fs.open(self._path)
        try:
            text = self._jvm.org.apache.commons.io.IOUtils.toString(stream, "UTF-8")
            return int(json.loads(text)["batch_id"])
        finally:
            stream.close()

    def set(self, batch_id: int) -> None:
        out = self._fs.create(self._path, True)  # overwrite
        try:
            out.write(bytearray(json.dumps({"batch_id": batch_id}).encode()))
        finally:
            out.close()


def batch_tallies(
    events: list[str], errors: list[dict[str, Any]], quarantined: Sequence[dict[str, Any]] = ()
) -> dict[tuple[str, ...], int]:
    """What the mirror-level metrics count per batch (`MirrorStatus.tallies`): events by type,
    expired offsets by origin and deleted groups by reason -- which outlive the groups' own series
    -- and skipped records by status, record type and reason class.  ``events``: the event rows'
    tallies as the adapter made them (`streaming.pipeline.adapter.event_tally`), not their JSON."""
    out: dict[tuple[str, ...], int] = {}
    for tally in events:
        etype, _, detail = tally.partition("\t")
        key: tuple[str, ...] = ("event", etype)
        out[key] = out.get(key, 0) + 1
        if etype == RebalanceTimed.TYPE:
            observe_rebalance(out, detail)
            continue
        if detail:
            label, _, n = detail.partition("\t")
            key = (etype, label)
            out[key] = out.get(key, 0) + int(n)
    for q in quarantined:
        key = ("fold_failure", str(q.get("error_type") or "Exception"))
        out[key] = out.get(key, 0) + 1
    for err in errors:
        status = str(err.get("status") or "error")
        key = (
            "skipped",
            status,
            record_type_label(err.get("record_type")),
            reason_label(err.get("error_kind"), status),
        )
        out[key] = out.get(key, 0) + 1
    return out


def observe_rebalance(out: dict[tuple[str, ...], int], detail: str) -> None:
    """A timed rebalance's phase durations into the histogram's tallies: per (kind, phase) the
    count, the sum in ms and one count per bucket it falls in (``le:<seconds>``, cumulative)."""
    kind, _, observations = detail.partition("\t")
    for obs in filter(None, observations.split(",")):
        phase, _, ms_text = obs.rpartition(":")
        ms = int(ms_text)
        base = ("rebalance_seconds", kind, phase)
        for name, n in (("count", 1), ("sum_ms", ms)):
            out[(*base, name)] = out.get((*base, name), 0) + n
        for bound in REBALANCE_DURATION_BUCKETS:
            if ms <= bound * 1000:
                key = (*base, f"le:{bound}")
                out[key] = out.get(key, 0) + 1


#: the name the query observes its decode counts under (``DataFrame.observe``)
OBSERVATION: Final = "decode"
#: the local property Spark's stream thread carries its query's id in (StreamExecution.QUERY_ID_KEY)
QUERY_ID_PROPERTY: Final = "sql.streaming.queryId"


class MirrorSink(InterruptibleSink):
    def __init__(
        self,
        settings: Settings,
        store: SnapshotStore,
        status: MirrorStatus,
        spark: SparkSession,
        *,
        on_observed: Callable[[Mapping[str, int]], None] | None = None,
    ) -> None:
        self.settings = settings
        self.store = store
        self.status = status
        self.spark = spark
        #: told each batch's observed decode counts, once per batch id (`observed_counts`)
        self.on_observed = on_observed
        self._observe_failures = 0
        self.markers: dict[str, BatchMarker] = {}
        self.events_dir = Path(settings.events_path) if settings.events_path else None
        if self.events_dir:
            self.events_dir.mkdir(parents=True, exist_ok=True)
        for name, topic in (
            ("events_topic", settings.events_topic),
            ("offsets_topic", settings.offsets_topic),
        ):
            if topic:
                self.markers[name] = BatchMarker(spark, settings.checkpoint_location, name)
        self.on_batch: list[Callable[[int, list[Any]], None]] = []

    def _batch(self, df: DataFrame, batch_id: int) -> None:
        started = time.monotonic()
        df.persist()
        try:
            # Every partition is computed (required by the stateful commit validation); the
            # offsets feed rows stay on the executors -- only Spark's Kafka writer reads them.
            rows = df.where(df.kind != "offset").collect()
            collected = time.monotonic()
            execution = self._execution(batch_id)
            observed = self.observed_counts(batch_id, execution) if self.on_observed is not None else None
            self._apply(batch_id, rows, observed, covered=self.batch_ends(batch_id))
            applied = time.monotonic()
            self._write_topics(df, batch_id)
        finally:
            df.unpersist()
        done = time.monotonic()
        stats = BatchStats(
            batch_id=batch_id,
            output_rows=len(rows),
            duration_ms=int((done - started) * 1000),
            finished_at_ms=int(time.time() * 1000),
            compute_ms=int((collected - started) * 1000),
            apply_ms=int((applied - collected) * 1000),
            write_ms=int((done - applied) * 1000),
            timestamp_ms=self.batch_timestamp_ms(execution),
        )
        self.status.batch_done(stats)
        log.debug("batch %d: %s", batch_id, stats)
        for hook in self.on_batch:
            hook(batch_id, rows)

    def _execution(self, batch_id: int) -> Any:
        """The query's own execution of this batch (``StreamExecution.lastExecution``, an internal
        but long-stable handle), or the exception that kept it from being found.

        Spark's stream thread runs this function (py4j pins the calling thread), so its local
        property names the query.  None outside a query (a sink called directly)."""
        try:
            query_id = self.spark.sparkContext.getLocalProperty(QUERY_ID_PROPERTY)
            if not query_id:
                return None
            jquery = self.spark._jsparkSession.streams().get(query_id)
            if jquery is None:
                raise LookupError(f"query {query_id} is not active in this session")
            execution = jquery.streamingQuery().lastExecution()
            running = None if execution is None else int(execution.currentBatchId())
            if running != batch_id:
                raise LookupError(f"the query's execution is of batch {running}")
            return execution
        except Exception as exc:
            if interruption_line(exc) is not None:
                raise  # query.stop(): the batch is interrupted (and run again)
            return exc

    def batch_ends(self, batch_id: int) -> dict[int, int] | None:
        """Where the batch's read of the topic ends (the next offset per partition, from the
        checkpoint's ``offsets/<batch>``), for the preview (`streaming.app.preview`); None with the
        preview off, or when the file cannot be read (the preview then waits for the next batch)."""
        s = self.settings
        if not (s.preview and s.source == "kafka"):
            return None
        try:
            jvm = self.spark._jvm
            path = jvm.org.apache.hadoop.fs.Path(f"{s.checkpoint_location.rstrip('/')}/offsets/{batch_id}")
            return parse_offset_log(read_text(self.spark, path), s.topic)
        except Exception as exc:
            if interruption_line(exc) is not None:
                raise
            log.debug("batch %d: its offsets could not be read: %s", batch_id, exc)
            return None

    @staticmethod
    def batch_timestamp_ms(execution: Any) -> int | None:
        """The batch's timestamp (Spark's processing time for it: every timeout due before it
        fires in it); None when the execution was not found."""
        if execution is None or isinstance(execution, Exception):
            return None
        try:
            return int(execution.offsetSeqMetadata().batchTimestampMs())
        except Exception as exc:
            if interruption_line(exc) is not None:
                raise
            return None

    def observed_counts(self, batch_id: int, execution: Any = None) -> dict[str, int] | None:
        """The decode counts the query observed on this batch (``observe`` before the shuffle),
        read from the query's own execution of the batch (`_execution`) once the sink has
        computed its rows.

        Read here rather than from the batch's progress: they then count exactly when the batch's
        rows are applied -- once per batch id, as the sink's tallies -- whatever moment the query
        is stopped at.  Counted from progress, a batch stopped as it finished could miss both:
        once in CI a batch (its quarantine logged once: not run again) was in no progress the
        driver read, and its 26 decode errors and 2 unknown records were never counted.

        None outside a query (a sink called directly); anything else that finds no counts -- an
        error, the query or the batch's execution not found, no metrics -- is logged (first, then
        every 100th) and loses only these counts, never the batch."""
        if execution is None:
            execution = self._execution(batch_id)
        try:
            if execution is None:
                return None
            if isinstance(execution, Exception):
                raise execution
            row = execution.observedMetrics().get(OBSERVATION)
            if row.isEmpty():
                raise LookupError(f"no {OBSERVATION!r} metrics in the batch's execution")
            values = json.loads(row.get().json())
        except Exception as exc:
            if interruption_line(exc) is not None:
                raise  # query.stop(): the batch is interrupted (and run again), not its counts lost
            self._observe_failures += 1
            if self._observe_failures % 100 == 1:
                log.warning(
                    "batch %d: reading the query's observed decode counts failed (%d time(s)): %s",
                    batch_id,
                    self._observe_failures,
                    str(exc).splitlines()[0][:300] if str(exc) else type(exc).__name__,
                )
            return None
        return {str(k): int(v) for k, v in values.items() if v}

    def apply_backfill(self, rows: list[Any], observed: Mapping[str, int]) -> None:
        """The rows of the backfill the driver folded (`streaming.pipeline.backfill`) -- what the
        query's first batch would have made -- applied as a batch is, before the query starts:
        counted once, events to ``events-backfill.jsonl`` and the events topic, the offsets feed
        to its topic.  A start stopped before the query's first batch commits folds the backfill
        again: the files are replaced, the topics get the same records again (deterministic event
        ids; the offsets feed is compacted), as for a batch run again."""
        started = time.monotonic()
        self._apply(
            -1, [r for r in rows if r.kind != "offset"], observed, count=True, events_name="events-backfill"
        )
        applied = time.monotonic()
        targets = (
            (self.settings.events_topic, "event", "group_id"),
            (self.settings.offsets_topic, "offset", "key"),
        )
        for topic, kind, key_column in targets:
            records = [(getattr(r, key_column), r.body) for r in rows if r.kind == kind]
            if topic and records:
                self._save(self.spark.createDataFrame(records, "key string, value string"), topic)
        log.info(
            "the backfill's %d rows applied in %.1fs, written in %.1fs",
            len(rows),
            applied - started,
            time.monotonic() - applied,
        )
        for hook in self.on_batch:
            hook(-1, rows)

    def _apply(
        self,
        batch_id: int,
        rows: list[Any],
        observed: Mapping[str, int] | None = None,
        *,
        count: bool = False,
        events_name: str | None = None,
        covered: Mapping[int, int] | None = None,
    ) -> None:
        snapshots: list[tuple[str, bytes | None, dict[str, Any] | None]] = []
        events: list[str] = []
        tallies: list[str] = []
        errors: list[dict[str, Any]] = []
        quarantined: list[dict[str, Any]] = []
        for r in rows:
            if r.kind == "snapshot":
                summ = json.loads(r.summary)
                live = summ.get("exists", True)
                snapshots.append((r.group_id, bytes(r.blob) if live else None, summ if live else None))
            elif r.kind == "deleted":
                snapshots.append((r.group_id, None, None))
            elif r.kind == "event":
                events.append(r.body)
                tallies.append(r.summary)
            elif r.kind == "error":
                errors.append(json.loads(r.body))
            elif r.kind == "quarantine":
                quarantined.append(json.loads(r.body))
        self.store.apply(batch_id, snapshots, covered)
        # a batch run again (the query restarted from the checkpoint after this sink saw it, before
        # its commit) is applied again -- the same values -- but counted once
        fresh = self.status.count_batch(batch_id, force=count)
        if fresh:
            self.status.add_tallies(batch_tallies(tallies, errors, quarantined))
            if observed and self.on_observed is not None:
                self.on_observed(observed)
            self.store.timeline.add_json(events)  # issue 26: GET /groups/{id}/timeline
        if quarantined:
            self.store.quarantine(quarantined)
            for q in quarantined:
                log.error(
                    "batch %d: group %r quarantined (keeps its last good state): %s: %s at %s/%s",
                    batch_id,
                    q["group_id"],
                    q["error_type"],
                    q["message"],
                    q["source_partition"],
                    q["source_offset"],
                )
        if errors and fresh:
            self.store.add_errors(errors)
            # one line per batch, never one per record
            log.warning(
                "batch %d: %d record(s) could not be decoded (GET /errors lists them)", batch_id, len(errors)
            )
        if self.events_dir is not None and events:
            path = self.events_dir / f"{events_name or f'events-{batch_id:012d}'}.jsonl"
            tmp = path.with_name("." + path.name + ".tmp")
            tmp.write_text("".join(e + "\n" for e in events))
            tmp.replace(path)

    def _write_topics(self, df: DataFrame, batch_id: int) -> None:
        targets = (
            ("events_topic", self.settings.events_topic, "event", "group_id"),
            ("offsets_topic", self.settings.offsets_topic, "offset", "key"),
        )
        for name, topic, kind, key_column in targets:
            if not topic:
                continue
            marker = self.markers[name]
            if batch_id <= marker.last():
                log.info("batch %d already written to %s; skipping", batch_id, topic)
                continue
            self._save(df.where(df.kind == kind).selectExpr(f"{key_column} AS key", "body AS value"), topic)
            marker.set(batch_id)

    def _save(self, out: DataFrame, topic: str) -> None:
        """``out`` (key, value) to ``topic`` with Spark's Kafka sink and the output client options."""
        writer = out.write.format("kafka").option("topic", topic)
        bootstrap = self.settings.output_bootstrap()
        assert bootstrap is not None  # validated by Settings
        writer = writer.option("kafka.bootstrap.servers", bootstrap)
        for key, value in self.settings.output_options().items():
            writer = writer.option(f"kafka.{key}", value)
        writer.save()

    def write_driver_events(self, events: list[dict[str, Any]], at_ms: int, name: str) -> None:
        """Change events the driver makes itself, not a batch -- ``DRIVER_EVENTS`` (reconciliation,
        drift at start) or ``HEALTH_EVENTS`` (`streaming.serving.burrow.StatusWatcher`'s
        ``group_status_changed``, ``offset_rewound``, ``partition_stalled`` from a round of log
        offsets) -- where the batch's events go: ``<name>-<at_ms>.jsonl`` beside the batch files
        (atomic), and the events topic keyed by group id.  They carry no batch id (so no marker):
        written once."""
        if not events:
            return
        self.store.timeline.add(events)  # issue 26: consumer-status changes in the timeline
        bodies = [json.dumps(e, separators=(",", ":"), ensure_ascii=False) for e in events]
        if self.events_dir is not None:
            path = self.events_dir / f"{name}-{at_ms:013d}.jsonl"
            tmp = path.with_name("." + path.name + ".tmp")
            tmp.write_text("".join(b + "\n" for b in bodies))
            tmp.replace(path)
        if self.settings.events_topic:
            rows = [(str(e["group_id"]), b) for e, b in zip(events, bodies, strict=True)]
            out = self.spark.createDataFrame(rows, "key string, value string")
            self._save(out, self.settings.events_topic)
