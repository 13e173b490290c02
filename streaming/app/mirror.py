"""The mirror as a running application: Spark session, the streaming query, the driver store, HTTP.

Lifecycle (Burrow's: configure validates and opens nothing; start returns promptly; stop is
idempotent)::

    mirror = Mirror(settings)      # nothing started
    mirror.start()                 # session, end offsets, state recovery, query, HTTP
    mirror.wait_ready(timeout)     # caught up with the end of __consumer_offsets seen at start
    mirror.stop()                  # query.stop() (the running batch completes or is re-run), HTTP

The query::

    __consumer_offsets (Kafka source, read_committed)  |  capture file (file source)
      -> mapInArrow(decode, collapse commits,          streaming.pipeline.prepare   [observed: decode counts]
                    pack rows per group)
      -> groupBy(group_id).applyInPandasWithState      streaming.pipeline.adapter   [state: codec bytes,
                                                                             ProcessingTimeTimeout]
      -> foreachBatch                                   streaming.pipeline.sinks     [store, events, offsets]
"""

from __future__ import annotations

import json
import logging
import re
import threading
import time
from typing import TYPE_CHECKING, Any, Final

from state import codec
from state.events import DriftSuspected, ReconcileMismatch
from state.model import Group
from streaming.app.errors import (
    EXIT_AUTHENTICATION,
    EXIT_AUTHORIZATION,
    EXIT_CONFIG,
    EXIT_CONNECTOR,
    EXIT_TLS,
    StartupError,
    classify,
    client_options_error,
    first_line,
    scrub,
)
from streaming.cluster.groups import ClusterClient, log_start_drift
from streaming.cluster.jvm import Jvm, KafkaCallError
from streaming.cluster.offsets import OffsetReader
from streaming.health.lag import LagTracker
from streaming.pipeline.adapter import OUTPUT_DDL, STATE_DDL, make_group_function
from streaming.pipeline.prepare import GroupFilter, counter_names, make_decode_collapse_pack, packed_spark_ddl
from streaming.pipeline.recovery import (
    CHECKPOINT_META_FORMAT,
    read_checkpoint_meta,
    read_committed_offsets,
    recover_snapshots,
    write_checkpoint_meta,
)
from streaming.pipeline.session import build_session, warm_python_workers
from streaming.pipeline.share_state import ShareStateMirror
from streaming.pipeline.sinks import DRIVER_EVENTS, HEALTH_EVENTS, MirrorSink
from streaming.pipeline.source import read_source
from streaming.serving.api import MirrorHTTPServer, credentials_from
from streaming.serving.burrow import Burrow, lag_route
from streaming.serving.lag_metrics import LagExporter
from streaming.serving.metrics import exposition, openmetrics_exposition
from streaming.serving.render import snapshot_renderer
from streaming.serving.share import ShareStateStore
from streaming.serving.store import SnapshotStore
from streaming.settings import Settings

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming import StreamingQuery

log = logging.getLogger("coordinator_mirror")

#: query failures no restart fixes: settings, connector jars, credentials, certificates, ACLs
_FATAL = frozenset({EXIT_CONFIG, EXIT_CONNECTOR, EXIT_AUTHENTICATION, EXIT_TLS, EXIT_AUTHORIZATION})

QUERY_NAME = "coordinator_mirror"


class OutputTopicError(RuntimeError):
    """An output topic could not be checked or created; names the topic and its setting."""


def _kafka_words(exc: BaseException) -> str:
    """``Class: message`` of the innermost Kafka exception in a (py4j) error text."""
    found = re.findall(r"org\.apache\.kafka\.common\.errors\.(\w+: [^\n]*)", str(exc))
    return found[-1].strip() if found else str(exc).splitlines()[0]


def observed_columns() -> list[Any]:
    """Aggregates observed per batch (``DataFrame.observe``) on the packed rows: records by type
    and version, errors, unknown types, commits -- `streaming.pipeline.prepare.counter_names`."""
    from pyspark.sql import functions as F

    return [F.sum(f"n_{name}").alias(name) for name in counter_names()]


class Mirror:
    def __init__(
        self,
        settings: Settings,
        *,
        spark: SparkSession | None = None,
        store: SnapshotStore | None = None,
        serve_http: bool = True,
    ) -> None:
        self.settings = settings
        self.spark = spark
        # (an empty store is falsy: compare with None)
        self.store = (
            store
            if store is not None
            else SnapshotStore(
                cache_bytes=settings.snapshot_cache_bytes, timeline_events=settings.timeline_events_per_group
            )
        )
        #: the state layer's configuration, built once: the fold, recovery and rendering share it
        self.offset_config = settings.offset_config()
        if self.store.renderer is None:
            self.store.renderer = snapshot_renderer(self.offset_config, settings.default_server_assignor)
        self.serve_http = serve_http
        self.query: StreamingQuery | None = None
        self.http: Any = None
        self.recovered_groups = 0
        self.sink: MirrorSink | None = None
        #: driver events made before the sink exists (start-up drift checks)
        self._driver_events: list[dict[str, Any]] = []
        self.observed: dict[str, int] = {}
        self.progress_history: list[dict[str, Any]] = []
        #: keys of the progress entries taken, oldest first (`_take_progress`)
        self._progress_taken: dict[tuple[str, int, str], None] = {}
        self._progress_lock = threading.Lock()
        self._progress_failures = 0
        self._progress_thread: threading.Thread | None = None
        self._stopped = threading.Event()
        self._lock = threading.Lock()
        self._owns_session = spark is None
        # lag and consumer health: fed by the sink (groups) and the offsets thread (log offsets)
        self.lag = LagTracker(settings.lag_isolation, settings.lag_lookup_points)
        self.burrow = Burrow(
            self.lag, settings.cluster_name, settings.burrow_intervals, settings.burrow_min_distance_s
        )
        self.lag_exporter = LagExporter(self.lag, self.burrow, settings)
        self._group_filter = GroupFilter(*settings.group_filter)  # the reason of a lag 404
        self.offset_reader: OffsetReader | None = None
        self._offsets_thread: threading.Thread | None = None
        #: groups changed since the offsets thread's last round (`_on_batch_lag`)
        self._lag_pending: dict[str, bytes | None] = {}
        self.cluster: ClusterClient | None = None
        self.jvm: Jvm | None = None
        self._supervisor: threading.Thread | None = None
        self._warming: threading.Thread | None = None
        self._meta: dict[str, Any] = {}
        self._meta_written = 0.0
        #: the reconciliation's previous round: side -> group ids (a mismatch must persist a round)
        self._suspects: dict[str, set[str]] = {}
        #: the last query failure that `serve` should end the process for (config-type causes)
        self.fatal: StartupError | None = None
        # issue 26: __share_group_state's query (started by `start`, docs/insights.md)
        self.share_store = ShareStateStore()
        self.share_state: ShareStateMirror | None = None

    # -- start -----------------------------------------------------------------------------------
    def start(self) -> Mirror:
        """Session, checkpoint ownership, then -- when `__consumer_offsets` exists -- readiness
        targets, state recovery and the query; HTTP and the supervisor (restarts, checks,
        reconciliation) either way.  Raises `StartupError` for what a user must fix."""
        s = self.settings
        s.check_client_files()  # a missing key store stops here, before Spark
        java_options = s.kafka_java_options()
        if s.source == "kafka":
            assert s.bootstrap_servers
            # the driver's Kafka client: Kafka's Java Admin in a JVM of its own, with kafka_options
            # verbatim (`streaming.cluster.jvm`); a bad option or an unreadable key store stops
            # here, naming the option, before Spark starts
            self.jvm = Jvm.launch(
                plugin_jars=s.kafka_plugin_jars, java_options=java_options, quick_start=False
            )
            self.cluster = self._open_cluster(s.bootstrap_servers, s.kafka_options, "kafka_options")
            if s.lag_enabled:
                self.offset_reader = OffsetReader(self.cluster)
        if self.spark is None:
            conf = {
                "spark.sql.shuffle.partitions": str(s.shuffle_partitions),
                "spark.ui.enabled": "false",
                **s.spark_conf,
            }
            # what the Kafka clients of Spark's source need of their JVMs (the OAUTHBEARER token
            # endpoint allowed, a krb5.conf ...), on executors started elsewhere too
            flags = " ".join(java_options)
            for key in ("spark.driver.extraJavaOptions", "spark.executor.extraJavaOptions"):
                if flags:
                    conf[key] = f"{conf[key]} {flags}" if conf.get(key) else flags
            self.spark = build_session(
                master=s.spark_master,
                jars=s.spark_jars,
                packages=s.spark_packages,
                conf=conf,
                log_format=s.log_format,
            )
        else:
            self.spark.conf.set("spark.sql.shuffle.partitions", str(s.shuffle_partitions))
        for jar in s.kafka_plugin_jars:
            # ADD JAR: into the session's class loader, through which the source's driver-side
            # consumer loads the classes its options name, and to the executors (spark.jars would
            # reach only the executors)
            self.spark.sql(f"ADD JAR '{jar}'")
        self._warming = threading.Thread(target=self._warm_workers, name="mirror-warm-up", daemon=True)
        self._warming.start()
        if s.source == "kafka":
            self._claim_checkpoint()
        self._ensure_output_topics()
        if not self._try_begin():
            log.info(
                "%s does not exist yet (a new cluster where no group has committed): waiting for it, "
                "checking every %.0fs; /ready answers 503 meanwhile",
                s.topic,
                s.topic_wait_interval_s,
            )
        self._start_lag()
        self.share_state = ShareStateMirror.attach(self)
        self._progress_thread = threading.Thread(
            target=self._poll_progress, name="mirror-progress", daemon=True
        )
        self._progress_thread.start()
        self._supervisor = threading.Thread(target=self._supervise, name="mirror-supervisor", daemon=True)
        self._supervisor.start()
        if self.serve_http:
            self.http = MirrorHTTPServer(
                (s.http_host, s.http_port),
                self.store,
                metrics=self.metrics_exposition,
                health=self.health,
                lag_route=self._lag_route,
                topic_names=lambda: self.lag.topic_names,
                openmetrics=self.openmetrics_exposition if s.http_openmetrics else None,
                credentials=credentials_from(s.http_auth_token_file, s.http_basic_auth_file),
                open_probes=s.http_open_probes,
                tls_cert_file=s.http_tls_cert_file,
                tls_key_file=s.http_tls_key_file,
                idle_timeout_s=s.http_idle_timeout_s,
            ).start()
            log.info("HTTP API at %s", self.http.url)
        return self

    def _open_cluster(self, bootstrap: str, options: dict[str, str], setting: str) -> ClusterClient:
        """An Admin client for ``bootstrap``; a client option Kafka refuses (a bad value, a key
        store it cannot open) is a `StartupError` naming ``setting`` and the option."""
        assert self.jvm is not None
        try:
            return ClusterClient(self.jvm, bootstrap, options)
        except KafkaCallError as exc:
            secrets = self.settings.secret_values()
            raise client_options_error(setting, exc, options, secrets, bootstrap=bootstrap) from None

    def _warm_workers(self) -> None:
        """Python workers started while the driver talks to the cluster (`warm_python_workers`);
        a failure here only costs the first batch its warm start."""
        assert self.spark is not None
        try:
            warm_python_workers(self.spark)
        except Exception:
            log.debug("warming the Python workers failed", exc_info=True)

    def _claim_checkpoint(self) -> None:
        """Refuse another cluster's checkpoint (or a newer format); record ours in
        ``<checkpoint>/mirror.json``; warn when the mirror was down longer than the topic's
        ``delete.retention.ms`` (tombstones of groups deleted meanwhile may be compacted away: the
        first reconciliation round runs right after the catch-up)."""
        assert self.spark is not None and self.cluster is not None
        s = self.settings
        cluster_id = self.cluster.cluster_id()
        meta = read_checkpoint_meta(self.spark, s.checkpoint_location)
        if meta is not None:
            if int(meta.get("format", 0)) > CHECKPOINT_META_FORMAT:
                raise StartupError(
                    f"the checkpoint at {s.checkpoint_location} was written by a newer mirror (format "
                    f"{meta.get('format')}, this one reads up to {CHECKPOINT_META_FORMAT}): run that "
                    "version, or point checkpoint_location at a new directory (the mirror then "
                    "rebuilds from the topic).",
                    EXIT_CONFIG,
                )
            if meta.get("cluster_id") and meta["cluster_id"] != cluster_id:
                raise StartupError(
                    f"the checkpoint at {s.checkpoint_location} belongs to Kafka cluster "
                    f"{meta['cluster_id']}, but {s.bootstrap_servers} is cluster {cluster_id}: point "
                    "checkpoint_location at this cluster's checkpoint (or a new directory), or fix "
                    "bootstrap_servers.",
                    EXIT_CONFIG,
                )
            last = meta.get("last_batch_ms")
            retention = self.cluster.delete_retention_ms(s.topic)
            if last and retention is not None and time.time() * 1000 - int(last) > retention:
                log.warning(
                    "the mirror was down %.1f h, longer than %s's delete.retention.ms (%.1f h): "
                    "tombstones of groups deleted meanwhile may be gone; reconciling with the "
                    "coordinators after the catch-up",
                    (time.time() * 1000 - int(last)) / 3_600_000,
                    s.topic,
                    retention / 3_600_000,
                )
                self._suspect_drift("downtime", ())
        self._check_log_start()
        self._meta = {
            "format": CHECKPOINT_META_FORMAT,
            "cluster_id": cluster_id,
            "last_batch_ms": (meta or {}).get("last_batch_ms"),
        }
        write_checkpoint_meta(self.spark, s.checkpoint_location, self._meta)
        self._meta_written = time.monotonic()

    def _check_log_start(self) -> None:
        """A log start offset past the checkpoint's position: records (possibly tombstones) were
        removed while the mirror was down, and the query will skip them."""
        assert self.spark is not None and self.cluster is not None
        s = self.settings
        committed = read_committed_offsets(self.spark, s.checkpoint_location, s.topic)
        if not committed:
            return
        try:
            starts = self.cluster.log_start_offsets(s.topic)
        except Exception as exc:  # not fatal: the periodic reconciliation still runs
            log.warning(
                "drift check: the log start offsets of %s are unknown: %s", s.topic, first_line(str(exc))
            )
            return
        drift = log_start_drift(committed, starts)
        if drift:
            parts = tuple(f"{p}:{c}->{start}" for p, (c, start) in drift.items())
            log.warning(
                "%s: the log start offset of %d partition(s) is past the checkpoint (%s): records removed "
                "while the mirror was down are skipped, groups deleted meanwhile may look alive; "
                "reconciling with the coordinators after the catch-up",
                s.topic,
                len(drift),
                ", ".join(parts[:5]),
            )
            self._suspect_drift("log_start", parts)  # the query then starts with failOnDataLoss off

    def _suspect_drift(self, reason: str, partitions: tuple[str, ...]) -> None:
        """Metric, event (written once the sink exists) and an early reconciliation round."""
        status = self.store.status
        status.possible_missed_tombstones = True
        status.drift_suspected[reason] = status.drift_suspected.get(reason, 0) + 1
        now_ms = int(time.time() * 1000)
        event = DriftSuspected("", None, None, None, reason=reason, partitions=partitions, at_ms=now_ms)
        self._driver_events.append(event.to_json())
        self.store.add_tallies({("event", DriftSuspected.TYPE): 1})

    def _flush_driver_events(self) -> None:
        if self.sink is not None and self._driver_events:
            events, self._driver_events = self._driver_events, []
            self.sink.write_driver_events(events, int(time.time() * 1000), DRIVER_EVENTS)

    def _try_begin(self) -> bool:
        """Readiness targets, recovery and the query -- if the topic and its partitions are known
        (False: not yet; the supervisor tries again)."""
        s = self.settings
        if s.source == "kafka":
            assert self.cluster is not None
            if self.cluster.topic_partitions(s.topic) is None:
                self.store.status.waiting_reason = f"waiting for {s.topic}"
                return False
        try:
            self._init_readiness()
        except Exception as exc:  # the topic vanished or lost its leaders between the two calls
            if "UnknownTopicOrPartition" in str(exc) or "LeaderNotAvailable" in str(exc):
                self.store.status.waiting_reason = f"waiting for {s.topic}"
                return False
            raise
        self.recovered_groups = self._recover_store()
        if self._warming is not None:
            self._warming.join(60)
        self.query = self._start_query()
        self.store.status.waiting_reason = None
        return True

    def _init_readiness(self) -> None:
        s = self.settings
        r = self.store.readiness
        if s.source != "kafka":
            return
        assert self.cluster is not None
        starts, ends = self.cluster.partition_offsets(s.topic)
        r.starts, r.targets, r.latest = dict(starts), dict(ends), dict(ends)
        log.info(
            "%s: %d partitions, %d records (log positions) to catch up with",
            s.topic,
            len(ends),
            sum(ends[p] - starts.get(p, 0) for p in ends),
        )
        if all(ends[p] <= starts.get(p, 0) for p in ends):
            r.mark_ready()

    def _ensure_output_topics(self) -> None:
        s = self.settings
        if not (s.events_topic or s.offsets_topic):
            return
        bootstrap = s.output_bootstrap()
        assert self.spark is not None and bootstrap
        if self.jvm is None:  # a capture source writing to Kafka
            self.jvm = Jvm.launch(plugin_jars=s.kafka_plugin_jars, java_options=s.kafka_java_options())
        options = s.output_options()
        setting = "output_kafka_options" if s.output_kafka_options else "kafka_options"
        client = self._open_cluster(bootstrap, options, setting)
        try:
            for name, topic, compacted in (
                ("events_topic", s.events_topic, False),
                ("offsets_topic", s.offsets_topic, True),
            ):
                if not topic:
                    continue
                try:
                    created = client.ensure_topic(topic, compacted=compacted)
                except Exception as exc:
                    # Kafka's own words, then which topic and setting: its message names neither
                    # when a missing topic cannot be created (e.g. no Write and no Create ACL)
                    raise OutputTopicError(
                        f"{_kafka_words(exc)} (output topic {topic}, setting {name})"
                    ) from exc
                if created:
                    log.info("created output topic %s%s", topic, " (compacted)" if compacted else "")
        finally:
            client.close()

    def _recover_store(self) -> int:
        """After a restart, rebuild the driver's snapshots from the checkpointed state store (on the
        executors), so the API and metrics are complete before the first new batch."""
        assert self.spark is not None
        started = time.monotonic()
        rows = recover_snapshots(self.spark, self.settings, self.offset_config)
        if rows is None:
            return 0
        found = list(rows)
        recovered = [(gid, blob, summ) for gid, blob, summ, _q in found if blob is not None and summ]
        n = self.store.load(recovered)
        self._lag_apply((gid, blob) for gid, blob, _ in recovered)
        self.store.quarantine(
            {"group_id": gid, "error_type": "unknown", "message": q, "phase": "recovery"}
            for gid, _b, _s, q in found
            if q is not None
        )
        log.info("recovered %d groups from the checkpoint in %.1fs", n, time.monotonic() - started)
        return n

    def _start_query(self) -> StreamingQuery:
        from pyspark.sql.streaming.state import GroupStateTimeout

        s = self.settings
        assert self.spark is not None
        raw = read_source(
            self.spark,
            s,
            sorted(self.store.readiness.targets) or None,
            fail_on_data_loss=not self.store.status.drift_suspected.get("log_start"),
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
        prepared = packed.observe("decode", *observed_columns()).select("group_id", "packed")
        if keep:  # filtered groups: counted above, dropped here, before the shuffle
            prepared = prepared.where("length(packed) > 0")
        fold = make_group_function(self.offset_config, emit_offsets=bool(s.offsets_topic))
        out = prepared.groupBy("group_id").applyInPandasWithState(
            fold, OUTPUT_DDL, STATE_DDL, "update", GroupStateTimeout.ProcessingTimeTimeout
        )
        sink = self.sink = MirrorSink(s, self.store, self.spark)
        sink.on_batch.append(self._on_batch_lag)  # groups changed: to the lag tracker
        self._flush_driver_events()
        query = (
            out.writeStream.queryName(QUERY_NAME)
            .outputMode("update")
            .option("checkpointLocation", s.checkpoint_location)
            .trigger(processingTime=f"{s.trigger_interval_ms} milliseconds")
            .foreachBatch(sink)
            .start()
        )
        log.info("query %s started (checkpoint %s)", query.id, s.checkpoint_location)
        return query

    # -- lag ----------------------------------------------------------------------------------------
    def _start_lag(self) -> None:
        """The offsets thread (once; the sink of every query the supervisor starts feeds it)."""
        if self.offset_reader is None or self._offsets_thread is not None:
            return
        self._offsets_thread = threading.Thread(target=self._poll_offsets, name="mirror-offsets", daemon=True)
        self._offsets_thread.start()

    def _lag_route(self, path: str) -> tuple[int, Any] | None:
        keep = self._group_filter

        def mirrored(group_id: str) -> bool:
            snap = self.store.group(group_id)
            return snap is not None and bool(snap.get("exists", True))

        return lag_route(
            self.lag,
            self.burrow,
            path,
            int(time.time() * 1000),
            filtered=lambda gid: bool(keep) and not keep.keeps(gid),
            mirrored=mirrored,
        )

    def _lag_apply(self, groups: Any) -> None:
        """Groups as applied to the store (state bytes, a rendered snapshot, or None: deleted) into
        the lag tracker and Burrow's window of commits."""
        changed: list[tuple[str, Group | None]] = []
        for gid, blob in groups:
            if blob is None:
                changed.append((gid, None))
            elif isinstance(blob, bytes | bytearray):
                changed.append((gid, codec.decode(bytes(blob))))
        views = self.lag.apply_groups(changed)
        self.burrow.history.record(views, self.lag)

    def _on_batch_lag(self, batch_id: int, rows: list[Any]) -> None:
        """The sink's hook: the changed groups' state bytes are only parked here (the newest per
        group wins); the offsets thread decodes them before its next round, off the batch's path
        and once per round however many batches changed a group in between.  Without a reader
        (lag off, capture source) they are applied at once."""
        changed: dict[str, bytes | None] = {}
        for r in rows:
            if r.kind == "snapshot":
                live = json.loads(r.summary).get("exists", True)
                changed[r.group_id] = bytes(r.blob) if live else None
            elif r.kind == "deleted":
                changed[r.group_id] = None
        if self._offsets_thread is None:
            self._lag_apply(changed.items())
            return
        with self._lock:
            self._lag_pending.update(changed)

    def _drain_lag_pending(self) -> None:
        with self._lock:
            pending, self._lag_pending = self._lag_pending, {}
        if pending:
            self._lag_apply(pending.items())

    def _poll_offsets(self) -> None:
        """Every ``lag_interval_s``: one round of log offsets, then one Burrow evaluation whose
        status changes become change events (counted in coordinator_mirror_events_total)."""
        assert self.offset_reader is not None
        interval = self.settings.lag_interval_s
        while True:
            started = time.monotonic()
            try:
                self._drain_lag_pending()
                r = self.offset_reader.read(self.lag.wanted(), self.lag.subscribed())
                self.lag.apply_round(r)
                now_ms = int(time.time() * 1000)
                # paced: at most a third of a core, so that a round over thousands of changed
                # groups does not halve the CPU of the micro-batches running meanwhile (on 2
                # cores a 2.5 s evaluation made them 2-3x slower for as long: the latency p99)
                events = self.burrow.evaluate_all(now_ms, pause=lambda busy: self._stopped.wait(2 * busy))
                if events:
                    tallies: dict[tuple[str, ...], int] = {}
                    for e in events:
                        tallies[("event", e["type"])] = tallies.get(("event", e["type"]), 0) + 1
                        log.info("consumer health: %s", json.dumps(e))
                    self.store.add_tallies(tallies)
                    self._write_health_events(events, now_ms)
            except Exception:  # a failed round is counted and retried, never fatal
                self.lag.failed_rounds += 1
                log.warning("log offsets round failed", exc_info=True)
            if self._stopped.wait(max(0.0, interval - (time.monotonic() - started))):
                return

    def _write_health_events(self, events: list[dict[str, Any]], now_ms: int) -> None:
        if self.sink is None:
            return
        try:
            self.sink.write_driver_events(events, now_ms, HEALTH_EVENTS)
        except Exception:  # the events stay in the log and in Burrow's paths; the next round goes on
            log.warning("%d consumer-health event(s) not written", len(events), exc_info=True)

    # -- progress ---------------------------------------------------------------------------------
    def _poll_progress(self) -> None:
        """Follow the query's progress (positions, observed decode counts, batch stats).

        Polls ``query.lastProgress`` / ``recentProgress`` instead of registering a Python
        StreamingQueryListener.  The reason first given -- a listener added after another was
        removed from the same session receives no events -- did not reproduce in a minimal
        add/remove/add check on PySpark 4.0.0 or 4.2.0; polling stays as the design.  A query the
        supervisor replaced (failed, restarted from the checkpoint) is read to its end first: the
        batches it completed since the last poll carry observed counts nothing else reports."""
        following: StreamingQuery | None = None
        while not self._stopped.wait(0.2):
            q = self.query
            try:
                if following is not None and following is not q:
                    self._take_progress(following)
                following = q
                if q is not None:
                    self._take_progress(q)
            except Exception:  # py4j hiccups while the JVM stops: keep following, never crash
                if self._stopped.is_set():
                    return
                self._progress_failures += 1
                # not once per poll: the first failure, then every 100th
                if self._progress_failures % 100 == 1:
                    log.warning(
                        "reading the query's progress failed (%d time(s))",
                        self._progress_failures,
                        exc_info=True,
                    )

    def _take_progress(self, q: StreamingQuery) -> None:
        """Every progress of ``q`` not taken yet, oldest first.

        Progress entries are told apart by (run id, batch id, trigger start), not by batch id
        alone: a trigger that ran no batch (no source had new data -- e.g. the first trigger after
        a restart, before the tick source's first row) reports the *next* batch's id with no
        observed metrics, and the batch that then runs under that id must still be taken.

        Only the new tail of Spark's buffer (up to 100 entries) crosses py4j: PySpark's
        ``recentProgress`` converts all of them, each a JSON of every partition's offsets and the
        state store's metrics -- with a micro-batch every half second that was a sizeable share of
        the driver's CPU (py-spy: ~20% of a core under 500 commits/s)."""
        from pyspark.sql.streaming.listener import StreamingQueryProgress

        with self._progress_lock:
            buffer = q._jsq.recentProgress()
            fresh: list[tuple[tuple[str, int, str], Any]] = []
            for i in range(len(buffer) - 1, -1, -1):  # newest first, down to the first one taken
                jp = buffer[i]
                key = (str(jp.runId().toString()), int(jp.batchId()), str(jp.timestamp()))
                if key in self._progress_taken:
                    break
                fresh.append((key, jp))
            for key, jp in reversed(fresh):
                self._on_progress(StreamingQueryProgress.fromJson(json.loads(jp.json())))
                self._progress_taken[key] = None
            while len(self._progress_taken) > _PROGRESS_KEYS_KEPT:
                del self._progress_taken[next(iter(self._progress_taken))]

    def _on_progress(self, progress: Any) -> None:
        topic = self.settings.topic
        src = next((x for x in progress.sources if topic in str(x.endOffset or "")), None)
        positions = _partition_offsets(src.endOffset if src else None, topic)
        latest = _partition_offsets(getattr(src, "latestOffset", None) if src else None, topic)
        r = self.store.readiness
        if positions:
            r.update(positions, latest)
        elif self.settings.source == "capture" and self.store.last_batch.batch_id >= 0:
            files = [x for x in progress.sources if "FileStreamSource" in str(x.description)]
            if files and all(int(x.numInputRows) == 0 for x in files):
                r.mark_ready()  # a replayed capture has been read completely
        obs = progress.observedMetrics.get("decode") if progress.observedMetrics else None
        if obs is not None:
            with self._lock:
                for key, value in obs.asDict().items():
                    if value:
                        self.observed[key] = self.observed.get(key, 0) + int(value)
        if "addBatch" not in progress.durationMs:
            return  # a trigger that ran no batch: not a batch of the history (nor of its metrics)
        entry = {
            "batch_id": progress.batchId,
            "input_rows": int(progress.numInputRows),
            "duration_ms": dict(progress.durationMs),
            "timestamp": progress.timestamp,
            "state_rows": [int(op.numRowsTotal) for op in progress.stateOperators],
            "state_bytes": [int(op.memoryUsedBytes) for op in progress.stateOperators],
        }
        with self._lock:
            self.progress_history.append(entry)
            del self.progress_history[:-100]

    # -- status -----------------------------------------------------------------------------------
    def health(self) -> tuple[bool, dict[str, Any]]:
        """Liveness: healthy while the supervisor runs -- also while the query is waiting for the
        topic or being restarted after a failure (the detail says which); unhealthy once the mirror
        gave up (a failure no restart can fix) or stopped."""
        q = self.query
        status = self.store.status
        if self.fatal is not None:
            return False, {"error": self.fatal.message}
        if self._stopped.is_set():
            return False, {"error": "stopped"}
        if q is None:
            if status.waiting_reason:
                return True, {"query": "waiting", "reason": status.waiting_reason}
            return False, {"error": "query not started"}
        if not q.isActive:
            return True, {"query": "restarting", "error": self.store.failure or "query stopped"}
        return True, {"query": "running", "query_id": str(q.id), "last_batch": self.store.last_batch.batch_id}

    def query_running(self) -> bool:
        """Whether the streaming query runs now (``coordinator_mirror_query_healthy``)."""
        q = self.query
        return q is not None and bool(q.isActive) and self.fatal is None

    # -- supervisor -------------------------------------------------------------------------------
    def _supervise(self) -> None:
        """Wait for the topic, restart a failed query from the checkpoint with backoff, check the
        source, keep the checkpoint's mirror.json current, reconcile with the coordinators."""
        s = self.settings
        failures = 0
        next_topic_check = next_source_check = 0.0
        next_reconcile = time.monotonic() + (s.reconcile_interval_s or 0)
        restart_at: float | None = None
        while not self._stopped.wait(0.25):
            now = time.monotonic()
            try:
                if s.source == "kafka" and now >= next_source_check:
                    next_source_check = now + s.source_check_interval_s
                    self._check_source()
                if self.query is None:
                    if now >= next_topic_check:
                        next_topic_check = now + s.topic_wait_interval_s
                        if self.store.status.source_up and self._try_begin():
                            log.info("%s appeared: mirroring starts", s.topic)
                    continue
                if not self.query.isActive:
                    if restart_at is None:
                        failures += 1
                        restart_at = self._on_query_failure(failures)
                        if restart_at is None:
                            return
                    if now >= restart_at and self.store.status.source_up:
                        restart_at = None
                        self.query = self._start_query()
                        self.store.status.query_restarts += 1
                        self.store.failure = None
                        log.info("query restarted from the checkpoint (restart %d)", failures)
                    continue
                if self.store.last_batch.batch_id >= 0 and restart_at is None:
                    failures = 0 if self.store.readiness.ready else failures
                self._keep_meta()
                if s.source == "kafka" and s.reconcile_interval_s and self.store.readiness.ready:
                    due = now >= next_reconcile or self.store.status.possible_missed_tombstones
                    if due:
                        next_reconcile = now + s.reconcile_interval_s
                        self.store.status.possible_missed_tombstones = False
                        self.reconcile_round()
            except Exception:  # the supervisor must outlive anything it supervises
                if self._stopped.is_set():
                    return
                log.exception("supervisor step failed")

    def _on_query_failure(self, failures: int) -> float | None:
        """Record a failed query; the monotonic time to restart it at, or None to give up (a cause
        a restart cannot fix: the process then exits with the cause's code)."""
        assert self.query is not None
        s = self.settings
        exc = self.query.exception()
        text = str(exc) if exc is not None else "query stopped"
        secrets = s.secret_values()
        self.store.failure = scrub(first_line(text), secrets)
        cause = classify(RuntimeError(text), bootstrap=s.bootstrap_servers, secrets=secrets)
        if cause.exit_code in (
            EXIT_CONFIG,
            EXIT_CONNECTOR,
            EXIT_AUTHENTICATION,
            EXIT_TLS,
            EXIT_AUTHORIZATION,
        ):
            log.error("the mirror's query failed and a restart cannot fix it: %s", cause.message)
            self.fatal = cause
            return None
        delay = min(s.query_restart_backoff_max_s, s.query_restart_backoff_s * 2 ** (failures - 1))
        log.error(
            "the mirror's query failed (%s); restarting it from the checkpoint in %.0fs "
            "(failure %d in a row)",
            self.store.failure,
            delay,
            failures,
        )
        return float(time.monotonic() + delay)

    def _check_source(self) -> None:
        """Does the cluster answer (a metadata request for the topic)?  A missing topic is not an
        outage: a new cluster has none until the first group commits."""
        assert self.cluster is not None
        status = self.store.status
        error: str | None = None
        try:
            self.cluster.topic_partitions(self.settings.topic)
        except Exception as exc:
            error = first_line(f"{type(exc).__name__}: {exc}")
        if error is None and not status.source_up:
            log.info("the Kafka cluster answers again")
        elif error is not None and status.source_up:
            log.warning("the Kafka cluster does not answer: %s", error)
        status.source_up = error is None
        status.source_error = error

    def _keep_meta(self) -> None:
        """Keep ``mirror.json``'s ``last_batch_ms`` (how long the mirror was down, at the next start)
        within a minute of the truth."""
        if not self._meta or time.monotonic() - self._meta_written < 60:
            return
        finished = self.store.last_batch.finished_at_ms
        if finished and finished != self._meta.get("last_batch_ms"):
            assert self.spark is not None
            self._meta["last_batch_ms"] = finished
            write_checkpoint_meta(self.spark, self.settings.checkpoint_location, self._meta)
        self._meta_written = time.monotonic()

    def reconcile_round(self) -> bool:
        """Compare the mirrored groups with the coordinators' ListGroups.  A group missing on one
        side in two rounds in a row (an in-flight commit or tombstone is mirrored within a round)
        is a mismatch: metric, event, and -- missing in the coordinator -- ``exists: false``.  A
        partial answer (a coordinator still loading) does not count.  True if the round counted."""
        assert self.cluster is not None
        status = self.store.status
        try:
            complete = self.cluster.may_list_every_group()
            listing = self.cluster.list_groups() if complete else None
        except Exception as exc:
            status.reconcile_rounds["error"] = status.reconcile_rounds.get("error", 0) + 1
            log.warning("reconciliation: ListGroups failed: %s", first_line(str(exc)))
            return False
        if listing is None:
            # the coordinators would leave out every group the principal may not Describe, and
            # those would look deleted: no round rather than a wrong one
            if not status.reconcile_rounds.get("not_authorized"):
                log.warning(
                    "reconciliation is off: the mirror's principal may not Describe the cluster, so "
                    "ListGroups would leave out the groups it may not Describe -- grant Cluster "
                    "Describe (docs: Security, ACLs) or set reconcile_interval_s=0"
                )
            status.reconcile_rounds["not_authorized"] = status.reconcile_rounds.get("not_authorized", 0) + 1
            return False
        if not listing.complete:
            status.reconcile_rounds["error"] = status.reconcile_rounds.get("error", 0) + 1
            log.info("reconciliation: partial answer (%s); round skipped", "; ".join(listing.errors))
            return False
        mine = self.store.group_ids() - set(self.store.gone)
        theirs = set(listing.groups)
        now_ms = int(time.time() * 1000)
        seen = {"missing_in_coordinator": mine - theirs, "missing_in_mirror": theirs - mine}
        confirmed = {side: ids & self._suspects.get(side, set()) for side, ids in seen.items()}
        self._suspects = seen
        events = []
        for side, ids in confirmed.items():
            for gid in sorted(ids - status.mismatches.get(side, set())):
                events.append(ReconcileMismatch(gid, None, None, None, side=side, at_ms=now_ms).to_json())
                if side == "missing_in_coordinator":
                    self.store.mark_gone(
                        gid,
                        {
                            "reason": "the coordinator no longer lists this group (Admin ListGroups, "
                            "two rounds in a row): its tombstone was probably compacted away while "
                            "the mirror was not reading",
                            "since_ms": now_ms,
                        },
                    )
        # groups marked gone stay counted until a record for them arrives
        confirmed["missing_in_coordinator"] |= set(self.store.gone)
        status.mismatches = confirmed
        status.reconcile_rounds["ok"] = status.reconcile_rounds.get("ok", 0) + 1
        status.reconciled_at_ms = now_ms
        if events:
            log.warning(
                "reconciliation: %d group(s) differ from the coordinators' list (%s)",
                len(events),
                ", ".join(f"{e['group_id']}: {e['side']}" for e in events[:5]),
            )
            self.store.add_tallies({("event", "reconcile_mismatch"): len(events)})
            if self.sink is not None:
                self.sink.write_driver_events(events, now_ms, DRIVER_EVENTS)
        return True

    def metrics_exposition(self) -> tuple[bytes, str]:
        return exposition(self)

    def openmetrics_exposition(self) -> tuple[bytes, str]:
        return openmetrics_exposition(self)

    def wait_ready(self, timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.store.readiness.ready:
                return True
            ok, detail = self.health()
            if not ok and self.query is not None:
                raise RuntimeError(f"mirror query failed while catching up: {detail}")
            time.sleep(0.2)
        return self.store.readiness.ready

    def wait_batches(self, n: int, timeout_s: float) -> None:
        """Wait until ``n`` more micro-batches completed (each sees all data available at its start)."""
        target = self.store.last_batch.batch_id + n
        deadline = time.monotonic() + timeout_s
        while self.store.last_batch.batch_id < target:
            ok, detail = self.health()
            if not ok:
                raise RuntimeError(f"mirror query failed: {detail}")
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"no batch {target} within {timeout_s}s (at {self.store.last_batch.batch_id})"
                )
            time.sleep(0.1)

    # -- stop -------------------------------------------------------------------------------------
    def _stop_query_quietly(self) -> None:
        """``query.stop()`` with Spark's logging off: with micro-batches back to back (the 0.5 s
        trigger on a busy cluster) the batch that started after the drained one is interrupted,
        and Spark logs that as ERRORs with stack traces (a broadcast it could not store, killed
        tasks) although nothing is lost -- the batch re-runs from the checkpoint at the next
        start.  The root level is restored afterwards (a session the mirror does not own)."""
        assert self.query is not None and self.spark is not None
        jvm = self.spark._jvm
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
            self.query.stop()
        finally:
            if not self._owns_session:
                configurator.setRootLevel(before)
                py4j_log.setLevel(py4j_before)

    def stop(self, drain_timeout_s: float = 60.0) -> None:
        """Stop between two micro-batches when possible (a batch interrupted mid-way is simply
        re-run from the checkpoint at the next start, but stopping between batches is quieter and
        faster to resume), then stop HTTP and -- if this mirror created it -- the Spark session."""
        if self._stopped.is_set():
            return
        self._stopped.set()
        if self.query is not None:
            # Let the running micro-batch finish (its sink output and commit), then stop at once:
            # with batches running back to back there may never be an idle moment to wait for.
            deadline = time.monotonic() + drain_timeout_s
            running_batch = self.store.last_batch.batch_id
            try:
                while (
                    self.query.isActive
                    and self.query.status.get("isTriggerActive")
                    and self.store.last_batch.batch_id == running_batch
                    and time.monotonic() < deadline
                ):
                    time.sleep(0.05)
                self._stop_query_quietly()
                self._take_progress(self.query)  # the last batches' progress (observed counts)
            except Exception:  # stopping is best effort; the checkpoint keeps what completed
                log.exception("stopping the query failed")
        if self.share_state is not None:
            self.share_state.stop()
        if self.http is not None:
            self.http.stop()
        # the driver's own Kafka clients: their threads end with _stopped; dropping the clients
        # closes their Admin client (no reconnecting to a cluster this mirror left)
        for thread in (self._offsets_thread, self._supervisor):
            if thread is not None:
                thread.join(timeout=15)
        self.offset_reader = None
        if self.cluster is not None:
            self.cluster.close()
            self.cluster = None
        if self.jvm is not None:
            self.jvm.close()
            self.jvm = None
        if self._owns_session and self.spark is not None:
            self.spark.stop()


#: more than Spark's buffer of recent progress (spark.sql.streaming.numRecentProgressUpdates, 100)
_PROGRESS_KEYS_KEPT: Final = 1000


def _partition_offsets(raw: Any, topic: str) -> dict[int, int]:
    """Spark's KafkaSourceOffset JSON ``{"topic": {"0": 12, ...}}`` -> {partition: offset}."""
    if not raw:
        return {}
    try:
        data = json.loads(raw) if isinstance(raw, str) else raw
    except (TypeError, ValueError):
        return {}
    if not isinstance(data, dict) or topic not in data:
        return {}
    return {int(p): int(o) for p, o in data[topic].items()}
