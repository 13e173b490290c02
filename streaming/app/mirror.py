"""The mirror as a running application -- the composition root: it builds the parts, hands them
to each other, starts them in order and stops them (Burrow's coordinators' lifecycle: configure
validates and opens nothing; start returns promptly; stop is idempotent) -- the supervisor first,
so nothing restarts while stopping, then the query after its running batch, then the rest::

    mirror = Mirror(settings)      # nothing started
    mirror.start()                 # client, session, checks, query, threads, HTTP
    mirror.wait_ready(timeout)     # caught up with the end of __consumer_offsets seen at start
    mirror.stop()                  # the running batch completes (or is re-run), then the rest

The parts, in start order (ARCHITECTURE.md "Threads" says who starts and stops each thread):

==========================  ===================================  ==============================
part                        module                               thread
==========================  ===================================  ==============================
driver's Kafka client       streaming.cluster.jvm / .groups      (py4j's)
Spark session, warm-up      streaming.pipeline.session           mirror-warm-up
checkpoint claim, drift     streaming.app.drift                  --
output topics, readiness,   streaming.app.startup                --
recovery, first start
the query definition        streaming.pipeline.query             Spark's
the lag loop                streaming.app.lag_loop               mirror-offsets
share-state query           streaming.pipeline.share_state       mirror-share-state
progress following          streaming.pipeline.progress          mirror-progress
the query supervisor        streaming.app.supervisor             mirror-supervisor
(restarts, source check,    streaming.app.reconcile
reconciliation, the heap)   streaming.app.heap
HTTP (API, /metrics)        streaming.serving.api / .metrics     uvicorn's
==========================  ===================================  ==============================
"""

from __future__ import annotations

import json
import logging
import threading
import time
from typing import TYPE_CHECKING, Any

from streaming.app.backfill import DriverBackfill, local_checkpoint_is_new
from streaming.app.drift import CheckpointClaim, DriftReporter
from streaming.app.driver_events import DriverEvents
from streaming.app.heap import DriverHeap
from streaming.app.lag_loop import LagLoop
from streaming.app.reconcile import Reconciler
from streaming.app.startup import Beginning, SourceCheck, ensure_output_topics, open_cluster, recover_store
from streaming.app.supervisor import QueryRun, QuerySupervisor, RestartPolicy
from streaming.cluster.groups import ClusterClient
from streaming.cluster.jvm import Jvm
from streaming.cluster.offsets import OffsetReader
from streaming.health.lag import LagTracker
from streaming.health.retention import RECORDS_LOST, RetentionWatch
from streaming.pipeline.prepare import GroupFilter
from streaming.pipeline.progress import ProgressFollower
from streaming.pipeline.query import MirrorQuery, stop_between_batches
from streaming.pipeline.recovery import SparkCheckpointFiles, has_planned_batch
from streaming.pipeline.session import add_plugin_jars, mirror_session, warm_in_background
from streaming.pipeline.share_state import ShareStateMirror
from streaming.pipeline.sinks import HEALTH_EVENTS, MirrorSink
from streaming.serving.api import MirrorHTTPServer, credentials_from
from streaming.serving.burrow import Burrow, lag_route
from streaming.serving.lag_metrics import LagExporter
from streaming.serving.metrics import MirrorMetrics, exposition, openmetrics_exposition
from streaming.serving.offset_history import OffsetHistory
from streaming.serving.render import snapshot_renderer
from streaming.serving.reset_plan import needs_command_config, offsets_route
from streaming.serving.run_status import RunStatus
from streaming.serving.share import ShareStateStore
from streaming.serving.store import SnapshotStore
from streaming.settings import Settings

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.streaming import StreamingQuery

    from streaming.app.errors import StartupError

log = logging.getLogger("coordinator_mirror")


def _now_ms() -> int:
    return int(time.time() * 1000)


class Mirror:
    def __init__(
        self,
        settings: Settings,
        *,
        spark: SparkSession | None = None,
        store: SnapshotStore | None = None,
        serve_http: bool = True,
    ) -> None:
        s = self.settings = settings
        self.spark = spark
        self._owns_session = spark is None
        self.serve_http = serve_http
        # (an empty store is falsy: compare with None)
        self.store = (
            store
            if store is not None
            else SnapshotStore(
                cache_bytes=s.snapshot_cache_bytes, timeline_events=s.timeline_events_per_group
            )
        )
        #: the state layer's configuration, built once: the fold, recovery and rendering share it
        self.offset_config = s.offset_config()
        if self.store.renderer is None:
            self.store.renderer = snapshot_renderer(self.offset_config, s.default_server_assignor)
        self.run = QueryRun()
        self.run_status = RunStatus(query_running=self.query_running)
        self.events = DriverEvents()
        # lag and consumer health: fed by the sink (groups) and the lag loop (log offsets)
        self.lag = LagTracker(s.lag_isolation, s.lag_lookup_points)
        self.burrow = Burrow(self.lag, s.cluster_name, s.burrow_intervals, s.burrow_min_distance_s)
        # issue 38: records lost to retention (a round listener), offsets as of a moment
        self.retention = RetentionWatch(self.lag)
        self.retention.emit = self._retention_events
        self.lag_exporter = LagExporter(self.lag, self.burrow, s, retention=self.retention)
        self.offset_history = OffsetHistory.from_settings(
            s, states=self.store.states, topic_names=lambda: self.lag.topic_names, retention=self.retention
        )
        # issue 26: __share_group_state's query (started by `start`, docs/insights.md)
        self.share_store = ShareStateStore()
        if self.offset_history is not None:
            self.share_store.listeners.append(self.offset_history.on_share_state)
        self.share_state: ShareStateMirror | None = None
        self.metrics = MirrorMetrics(
            s, self.offset_config, self.store, self.run_status, lag=self.lag_exporter, share=self.share_store
        )
        self._group_filter = GroupFilter(*s.group_filter)  # the reason of a lag 404
        self.jvm: Jvm | None = None
        self.cluster: ClusterClient | None = None
        self.offset_reader: OffsetReader | None = None
        self.lag_loop = LagLoop(
            s.lag_interval_s, self.store, self.lag, self.burrow, reader=None, events=self.events
        )
        self.query_def: MirrorQuery | None = None
        self.beginning: Beginning | None = None
        self.reconciler: Reconciler | None = None
        self.progress: ProgressFollower | None = None
        #: ``backfill: driver`` on a new checkpoint: the driver's read and fold (until handed over)
        self.backfill: DriverBackfill | None = None
        self.supervisor: QuerySupervisor | None = None
        #: the driver's long-lived objects frozen once ready (the supervisor's loop steps it)
        self.heap = DriverHeap(lambda: self.store.readiness.ready)
        self.http: Any = None
        self._stopped = threading.Event()

    # -- start -----------------------------------------------------------------------------------
    def start(self) -> Mirror:
        """The parts in order; when `__consumer_offsets` does not exist yet the supervisor waits
        for it.  Raises `StartupError` for what a user must fix."""
        s = self.settings
        s.check_client_files()  # a missing key store stops here, before Spark
        java_options = s.kafka_java_options()
        secrets = s.secret_values()
        if s.source == "kafka":
            assert s.bootstrap_servers
            # the driver's Kafka client: Kafka's Java Admin in a JVM of its own, with kafka_options
            # verbatim (`streaming.cluster.jvm`); a bad option or an unreadable key store stops
            # here, naming the option, before Spark starts
            self.jvm = Jvm.launch(
                plugin_jars=s.kafka_plugin_jars, java_options=java_options, quick_start=False
            )
            self.cluster = open_cluster(
                self.jvm, s.bootstrap_servers, s.kafka_options, "kafka_options", secrets
            )
            if s.lag_enabled:
                self.offset_reader = self.lag_loop.reader = OffsetReader(self.cluster)
            if s.backfill == "driver" and local_checkpoint_is_new(s.checkpoint_location):
                # read and fold while Spark starts (streaming.app.backfill)
                self.backfill = DriverBackfill(s, self.jvm, _now_ms).start()
        if self.spark is None:
            began = time.monotonic()
            self.spark = mirror_session(s, java_options)
            log.info("Spark session up in %.1fs", time.monotonic() - began)
        else:
            self.spark.conf.set("spark.sql.shuffle.partitions", str(s.shuffle_partitions))
        spark = self.spark
        add_plugin_jars(spark, s.kafka_plugin_jars)
        # the Python workers' warm-up readies the first batch; with the backfill folded on the
        # driver that batch (the seed's) comes after ready, and the warm-up only took CPU from the
        # fold on the way there
        warming = None if self.backfill is not None else warm_in_background(spark)
        claim: CheckpointClaim | None = None
        if self.cluster is not None:
            drift = DriftReporter(self.store, self.events, _now_ms)
            files = SparkCheckpointFiles(spark, s.checkpoint_location, s.topic)
            claim = CheckpointClaim(
                s.checkpoint_location,
                s.topic,
                s.bootstrap_servers,
                files=files,
                cluster=self.cluster,
                drift=drift,
                clock_ms=_now_ms,
            )
            claim.claim()
        ensure_output_topics(s, self._open_output_client)
        if self.offset_history is not None:
            self.offset_history.start()  # loaded before the first batch
        self.query_def = MirrorQuery(
            spark,
            s,
            self.store,
            self.offset_config,
            on_batch=[self.lag_loop.on_batch]
            + ([self.offset_history.on_batch] if self.offset_history is not None else []),
            on_sink=self.events.attach,
            on_observed=self.run_status.add_observed,
        )
        self.beginning = Beginning(
            s,
            self.store,
            self.cluster,
            recover=lambda: recover_store(spark, s, self.offset_config, self.store, self.lag_loop),
            start_query=self.query_def.start,
            warming=warming,
            hand_over_backfill=self._hand_over_backfill,
        )
        self.run.query = self.beginning.try_begin()
        if self.run.query is None:
            log.info(
                "%s does not exist yet (a new cluster where no group has committed): waiting for it, "
                "checking every %.0fs; /ready answers 503 meanwhile",
                s.topic,
                s.topic_wait_interval_s,
            )
        self.lag_loop.start()
        self.share_state = ShareStateMirror.attach(
            s,
            spark,
            self.share_store,
            self.store,
            self.lag,
            partition_offsets=self.cluster.partition_offsets if self.cluster is not None else None,
        )
        self.progress = ProgressFollower(
            s, self.store, self.run_status, lambda: self.run.query, stopping=self._stopped.is_set
        )
        self.progress.start()
        kafka = s.source == "kafka" and self.cluster is not None
        if kafka:
            assert self.cluster is not None
            self.reconciler = Reconciler(self.cluster, self.store, self.events, _now_ms)
        self.supervisor = QuerySupervisor(
            s,
            self.store,
            self.run,
            RestartPolicy(
                s.query_restart_backoff_s, s.query_restart_backoff_max_s, s.bootstrap_servers, secrets
            ),
            begin=self.beginning.try_begin,
            restart=self.query_def.start,
            check_source=SourceCheck(self.cluster, s.topic, self.store) if self.cluster is not None else None,
            keep_meta=(lambda: claim.keep(self.store.last_batch.finished_at_ms))
            if claim is not None
            else lambda: None,
            reconcile=self.reconciler.round if self.reconciler is not None else None,
            housekeeping=[self.heap.step],
        )
        self.supervisor.start()
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
                offsets_at=self._offsets_at,
            ).start()
            log.info("HTTP API at %s", self.http.url)
        return self

    def _hand_over_backfill(self) -> dict[int, int] | None:
        """At the query's first start on a new checkpoint (``backfill: driver``): the driver's fold
        applied and seeded (`streaming.app.backfill`); where its read ended, or None when the
        query folds the backfill itself."""
        s = self.settings
        spark, query_def = self.spark, self.query_def
        if s.source != "kafka" or s.backfill != "driver" or self.jvm is None:
            return None
        assert spark is not None and query_def is not None
        if has_planned_batch(spark, s.checkpoint_location):
            self.backfill = None  # a checkpoint on another file system, found in use: it resumes
            return None
        if self.backfill is None:  # not started early (a checkpoint not on a local disk)
            self.backfill = DriverBackfill(s, self.jvm, _now_ms)
            self.backfill.run()
        elif self.backfill.topic_was_missing:  # a new cluster's topic, created since
            self.backfill.run()
        backfill, self.backfill = self.backfill, None
        if not backfill.hand_over(spark, query_def):
            return None
        return dict(backfill.read.ends)

    def _open_output_client(self, bootstrap: str, options: dict[str, str], setting: str) -> ClusterClient:
        s = self.settings
        if self.jvm is None:  # a capture source writing to Kafka
            self.jvm = Jvm.launch(plugin_jars=s.kafka_plugin_jars, java_options=s.kafka_java_options())
        return open_cluster(self.jvm, bootstrap, options, setting, s.secret_values())

    def _lag_route(self, path: str) -> tuple[int, Any] | None:
        keep = self._group_filter

        def mirrored(group_id: str) -> bool:
            snap = self.store.group(group_id)
            return snap is not None and bool(snap.get("exists", True))

        return lag_route(
            self.lag,
            self.burrow,
            path,
            _now_ms(),
            filtered=lambda gid: bool(keep) and not keep.keeps(gid),
            mirrored=mirrored,
            retention=self.retention,
            share=self.share_store,
        )

    def _offsets_at(self, group_id: str, at: str | None) -> tuple[int, Any]:
        """``GET /groups/{id}/offsets?at=`` (issue 38, `streaming.serving.reset_plan`)."""
        r = self.lag.round
        return offsets_route(
            self.offset_history,
            group_id,
            at,
            _now_ms(),
            bootstrap=self.settings.bootstrap_servers,
            command_config=needs_command_config(self.settings.kafka_options),
            log_starts=lambda: (
                {}
                if r is None
                else {tp: e.earliest for tp, e in r.partitions.items() if e.earliest is not None}
            ),
        )

    def _retention_events(self, events: list[dict[str, Any]], at_ms: int) -> None:
        """Records lost to retention (issue 38): counted, logged, written as driver events."""
        self.store.add_tallies({("event", RECORDS_LOST): len(events)})
        for e in events:
            log.warning("records lost to retention: %s", json.dumps(e, ensure_ascii=False))
        self.events.write(events, at_ms, HEALTH_EVENTS)

    # -- what the parts hold, for the commands and the tests --------------------------------------
    @property
    def query(self) -> StreamingQuery | None:
        return self.run.query

    @property
    def fatal(self) -> StartupError | None:
        """The last query failure that `serve` should end the process for (config-type causes)."""
        return self.run.fatal

    @property
    def sink(self) -> MirrorSink | None:
        return self.query_def.sink if self.query_def is not None else None

    @property
    def recovered_groups(self) -> int:
        return self.beginning.recovered_groups if self.beginning is not None else 0

    @property
    def observed(self) -> dict[str, int]:
        return self.run_status.observed_counts()

    @property
    def progress_history(self) -> list[dict[str, Any]]:
        return self.run_status.history()

    def reconcile_round(self) -> bool:
        """One reconciliation round now (`streaming.app.reconcile.Reconciler.round`)."""
        assert self.reconciler is not None
        return self.reconciler.round()

    def metrics_exposition(self) -> tuple[bytes, str]:
        return exposition(self.metrics)

    def openmetrics_exposition(self) -> tuple[bytes, str]:
        return openmetrics_exposition(self.metrics)

    # -- status -----------------------------------------------------------------------------------
    def health(self) -> tuple[bool, dict[str, Any]]:
        """Liveness: healthy while the supervisor runs -- also while the query is waiting for the
        topic or being restarted after a failure (the detail says which); unhealthy once the mirror
        gave up (a failure no restart can fix) or stopped."""
        q = self.run.query
        status = self.store.status
        if self.run.fatal is not None:
            return False, {"error": self.run.fatal.message}
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
        q = self.run.query
        return q is not None and bool(q.isActive) and self.run.fatal is None

    def wait_ready(self, timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.store.readiness.ready:
                return True
            ok, detail = self.health()
            if not ok and self.run.query is not None:
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
    def stop(self, drain_timeout_s: float = 60.0) -> None:
        """The parts in reverse: no more restarts; the query stopped between two micro-batches
        when possible (a batch interrupted mid-way is simply re-run from the checkpoint at the
        next start, but stopping between batches is quieter and faster to resume) and its last
        progress taken; then the threads, HTTP, the driver's Kafka client and -- if this mirror
        created it -- the Spark session."""
        if self._stopped.is_set():
            return
        self._stopped.set()
        if self.supervisor is not None:
            self.supervisor.stop()
        self.heap.stop()
        if self.share_state is not None:  # first: it must not start its query during the stop
            self.share_state.stop(restore=not self._owns_session)
        q = self.run.query
        if q is not None and self.spark is not None:
            try:
                stop_between_batches(q, self.spark, drain_timeout_s, restore=not self._owns_session)
                if self.progress is not None:
                    self.progress.take(q)  # the last batches' progress (readiness, history)
            except Exception:  # stopping is best effort; the checkpoint keeps what completed
                log.exception("stopping the query failed")
        if self.progress is not None:
            self.progress.stop()
        if self.offset_history is not None:  # after the last batch: its final snapshot
            self.offset_history.stop()
        if self.http is not None:
            self.http.stop()
        # the driver's own Kafka clients: dropping them closes their Admin client (no
        # reconnecting to a cluster this mirror left)
        self.lag_loop.stop()
        if self.backfill is not None:  # stopped during the start, before the hand-over
            self.backfill.stop()
        self.offset_reader = None
        if self.cluster is not None:
            self.cluster.close()
            self.cluster = None
        if self.jvm is not None:
            self.jvm.close()
            self.jvm = None
        if self._owns_session and self.spark is not None:
            self.spark.stop()
