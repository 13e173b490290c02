"""One cluster's mirror: what it holds (its store, status, lag tracker, Burrow, share-state store,
exporter) and its parts -- one `streaming.lifecycle.PartGroup`, started in order and stopped in
reverse -- on the process's shared parts (the client JVM, the Spark session).

==============  ==================================================  ==============================
part            what it does                                        thread
==============  ==================================================  ==============================
client          the driver's Kafka Admin (`streaming.cluster`)      (py4j's)
backfill        a new checkpoint's read and fold on the driver      mirror-backfill
checkpoint      claim, cluster binding, drift (`drift.py`)          --
outputs         the output topics checked (created when missing)    --
offsets         the lag loop: log offsets, lag, Burrow              mirror-offsets
progress        the query's progress: readiness, batch history      mirror-progress
query           the streaming query: first start, drain at stop     Spark's
share-state     the ``__share_group_state`` query, supervised       mirror-share-state
supervisor      restarts, source check, reconciliation, meta        mirror-supervisor
==============  ==================================================  ==============================

Stopped in reverse: the supervisor first (no restart while stopping), the share-state query, the
main query after its running batch (its last progress taken), then the threads that fed on it and
the client.  Adding a part is a line in `ClusterMirror.__init__`'s list and its module.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from streaming.app.backfill import DriverBackfill, local_checkpoint_is_new
from streaming.app.drift import CheckpointClaim, DriftReporter
from streaming.app.driver_events import DriverEvents
from streaming.app.lag_loop import LagLoop
from streaming.app.reconcile import Reconciler
from streaming.app.startup import Beginning, SourceCheck, ensure_output_topics, open_cluster, recover_store
from streaming.app.supervisor import QueryRun, QuerySupervisor, RestartPolicy, SideQuerySupervisor
from streaming.cluster.groups import ClusterClient
from streaming.cluster.jvm import Jvm
from streaming.cluster.offsets import OffsetReader
from streaming.health.lag import LagTracker
from streaming.lifecycle import PartGroup, Step
from streaming.pipeline.prepare import GroupFilter
from streaming.pipeline.progress import ProgressFollower
from streaming.pipeline.query import MirrorQuery, stop_between_batches
from streaming.pipeline.recovery import SparkCheckpointFiles, has_planned_batch
from streaming.pipeline.session import SessionPart
from streaming.pipeline.share_state import ShareStateQuery, share_view_of, wanted_by
from streaming.serving.burrow import Burrow, lag_route
from streaming.serving.lag_metrics import LagExporter
from streaming.serving.metrics import MirrorMetrics
from streaming.serving.render import snapshot_renderer
from streaming.serving.run_status import RunStatus
from streaming.serving.share import ShareStateStore
from streaming.serving.status import MirrorStatus
from streaming.serving.store import SnapshotStore
from streaming.settings import Settings

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.streaming import StreamingQuery

log = logging.getLogger("coordinator_mirror")


def now_ms() -> int:
    return int(time.time() * 1000)


class ClientPart:
    """The driver's Kafka Admin on the process's client JVM, with ``kafka_options`` verbatim: a
    bad option or an unreadable key store fails the start here, naming the option, before Spark
    is asked for anything."""

    name = "client"

    def __init__(self, settings: Settings, jvm: Callable[[], Jvm]) -> None:
        self.settings = settings
        self.jvm = jvm
        self.client: ClusterClient | None = None

    def start(self) -> None:
        s = self.settings
        assert s.bootstrap_servers
        self.client = open_cluster(
            self.jvm(), s.bootstrap_servers, s.kafka_options, "kafka_options", s.secret_values()
        )

    def get(self) -> ClusterClient:
        assert self.client is not None, "the cluster client is not open"
        return self.client

    def stop(self) -> None:
        # dropping the Admin client: no reconnecting to a cluster this mirror left
        client, self.client = self.client, None
        if client is not None:
            client.close()


class BackfillPart:
    """``backfill: driver`` on a new checkpoint: the read and fold started at once, on its own
    thread, while Spark starts (`streaming.app.backfill`); handed over at the query's first start
    (`hand_over`).  A checkpoint not on a local disk is known new only once Spark is up: then the
    read and fold run at the hand-over."""

    name = "backfill"

    def __init__(self, settings: Settings, jvm: Callable[[], Jvm]) -> None:
        self.settings = settings
        self.jvm = jvm
        self.worker: DriverBackfill | None = None

    @property
    def wanted(self) -> bool:
        s = self.settings
        return s.source == "kafka" and s.backfill == "driver"

    def start(self) -> None:
        if self.wanted and local_checkpoint_is_new(self.settings.checkpoint_location):
            self.worker = DriverBackfill(self.settings, self.jvm(), now_ms)
            self.worker.start()

    def will_fold(self) -> bool:
        """The driver will fold this start's backfill (the first batch then comes after ready):
        the Python workers' warm-up would only take CPU from the fold."""
        return self.wanted and bool(local_checkpoint_is_new(self.settings.checkpoint_location))

    def hand_over(self, spark: SparkSession, query: MirrorQuery) -> dict[int, int] | None:
        """At the query's first start: the driver's fold applied and seeded; where its read ended,
        or None when the query folds the backfill itself."""
        if not self.wanted:
            return None
        if has_planned_batch(spark, self.settings.checkpoint_location):
            self.worker = None  # a checkpoint on another file system, found in use: it resumes
            return None
        if self.worker is None:  # not started early (a checkpoint not on a local disk)
            self.worker = DriverBackfill(self.settings, self.jvm(), now_ms)
            self.worker.run()
        elif self.worker.topic_was_missing:  # a new cluster's topic, created since
            self.worker.run()
        backfill, self.worker = self.worker, None
        if not backfill.hand_over(spark, query):
            return None
        return dict(backfill.read.ends)

    def stop(self) -> None:
        worker, self.worker = self.worker, None
        if worker is not None:  # stopped during the start, before the hand-over
            worker.stop()


class QueryPart:
    """The main streaming query: defined once the session is up; its first start (readiness
    targets, recovery, the backfill's hand-over: `streaming.app.startup.Beginning`) -- or, when
    ``__consumer_offsets`` does not exist yet, the supervisor's once it does; stopped between two
    micro-batches, its last progress taken."""

    name = "query"

    def __init__(
        self,
        cluster: ClusterMirror,
        session: SessionPart,
        client: ClientPart | None,
        backfill: BackfillPart,
        progress: ProgressFollower,
    ) -> None:
        self.cluster = cluster
        self.session = session
        self.client = client
        self.backfill = backfill
        self.progress = progress
        self.definition: MirrorQuery | None = None
        self.beginning: Beginning | None = None

    def start(self) -> None:
        c, s = self.cluster, self.cluster.settings
        spark = self.session.get()
        self.definition = MirrorQuery(
            spark,
            s,
            c.store,
            c.status,
            c.offset_config,
            on_batch=[c.lag_loop.on_batch],
            on_sink=c.events.attach,
            on_observed=c.run_status.add_observed,
        )
        definition = self.definition
        self.beginning = Beginning(
            s,
            c.status,
            self.client.get() if self.client is not None else None,
            recover=lambda: recover_store(spark, s, c.offset_config, c.store, c.lag_loop),
            start_query=definition.start,
            warm=self.session.wait_warm,
            hand_over_backfill=lambda: self.backfill.hand_over(spark, definition),
        )
        c.run.query = self.beginning.try_begin()
        if c.run.query is None:
            log.info(
                "%s does not exist yet (a new cluster where no group has committed): waiting for it, "
                "checking every %.0fs; /ready answers 503 meanwhile",
                s.topic,
                s.topic_wait_interval_s,
            )

    def begin(self) -> StreamingQuery | None:
        assert self.beginning is not None
        return self.beginning.try_begin()

    def restart(self) -> StreamingQuery:
        assert self.definition is not None
        return self.definition.start()

    def stop(self, drain_timeout_s: float = 60.0) -> None:
        """Between two micro-batches when possible (a batch interrupted mid-way is simply re-run
        from the checkpoint at the next start, but stopping between batches is quieter and faster
        to resume), then the query's last progress (readiness, history)."""
        q = self.cluster.run.query
        spark = self.session.session
        if q is None or spark is None:
            return
        try:
            stop_between_batches(q, spark, self.cluster.drain_timeout_s, restore=not self.session.owned)
            self.progress.take(q)
        except Exception:  # stopping is best effort; the checkpoint keeps what completed
            log.exception("stopping the query failed")


class ClusterMirror:
    """One cluster: its state (no I/O until `parts` start) and its `PartGroup`."""

    def __init__(
        self,
        settings: Settings,
        *,
        jvm: Callable[[], Jvm],
        session: SessionPart,
        stopping: Callable[[], bool],
    ) -> None:
        s = self.settings = settings
        self.session = session
        #: the state layer's configuration, built once: the fold, recovery and rendering share it
        self.offset_config = s.offset_config()
        self.store = SnapshotStore(
            cache_bytes=s.snapshot_cache_bytes,
            timeline_events=s.timeline_events_per_group,
            renderer=snapshot_renderer(self.offset_config, s.default_server_assignor),
        )
        self.status = MirrorStatus()
        self.run = QueryRun()
        self.run_status = RunStatus(query_running=self.query_running)
        self.events = DriverEvents()
        # lag and consumer health: fed by the sink (groups) and the lag loop (log offsets)
        self.lag = LagTracker(s.lag_isolation, s.lag_lookup_points)
        self.burrow = Burrow(self.lag, s.cluster_name, s.burrow_intervals, s.burrow_min_distance_s)
        self.lag_exporter = LagExporter(self.lag, self.burrow, s)
        self.share_store = ShareStateStore()
        self.metrics = MirrorMetrics(
            s, self.offset_config, self.store, self.status, self.run_status, lag=self.lag_exporter,
            share=self.share_store,
        )  # fmt: skip
        self._group_filter = GroupFilter(*s.group_filter)  # the reason of a lag 404
        self.drain_timeout_s = 60.0
        kafka = s.source == "kafka"

        # -- the parts, in start order ------------------------------------------------------------
        self.client = ClientPart(s, jvm) if kafka else None
        self.backfill = BackfillPart(s, jvm)
        self.lag_loop = LagLoop(
            s.lag_interval_s, self.status, self.lag, self.burrow, reader=None, events=self.events
        )
        self.progress = ProgressFollower(s, self.status, self.run_status, lambda: self.run.query, stopping)
        self.query = QueryPart(self, session, self.client, self.backfill, self.progress)
        self.claim: CheckpointClaim | None = None
        self.reconciler: Reconciler | None = None
        self.share_state: SideQuerySupervisor | None = None
        policy = RestartPolicy(
            s.query_restart_backoff_s, s.query_restart_backoff_max_s, s.bootstrap_servers, s.secret_values()
        )
        if kafka and s.share_state_enabled:
            self.share_state = SideQuerySupervisor(
                ShareStateQuery(
                    s,
                    session.get,
                    self.share_store,
                    self.store,
                    lambda topic: self._client().partition_offsets(topic),
                    ready=lambda: self.status.ready,
                    restore_logging=not session.owned,
                ),
                self.status,
                policy,
                wait_interval_s=s.topic_wait_interval_s,
            )
            # the share-state query's wiring: the lag rounds read its share-partitions' ends, and
            # GET /groups/{id} shows a share group's delivery state
            self.lag.add_wanted(wanted_by(self.share_store, self.lag))
        self.supervisor = QuerySupervisor(
            s,
            self.status,
            self.run,
            policy,
            begin=self.query.begin,
            restart=self.query.restart,
            check_source=self._check_source if kafka else None,
            keep_meta=self._keep_meta,
            reconcile=self._reconcile if kafka else None,
        )
        self.parts = PartGroup(
            f"cluster {s.cluster_name}",
            [
                *([self.client] if self.client is not None else []),
                self.backfill,
                Step("checkpoint", self._claim),
                Step("outputs", lambda: ensure_output_topics(s, self._open_output_client)),
                Step("lag-reader", self._open_reader),
                self.lag_loop,
                self.progress,
                self.query,
                *([self.share_state] if self.share_state is not None else []),
                self.supervisor,
            ],
        )
        self._jvm = jvm
        self._source_check: SourceCheck | None = None

    # -- wiring made at start (what needs the client or the session) ---------------------------
    def _client(self) -> ClusterClient:
        assert self.client is not None
        return self.client.get()

    def _claim(self) -> None:
        """Whose checkpoint this is, and whether records went missing while the mirror was down."""
        if self.client is None:
            return
        s = self.settings
        files = SparkCheckpointFiles(self.session.get(), s.checkpoint_location, s.topic)
        self.claim = CheckpointClaim(
            s.checkpoint_location,
            s.topic,
            s.bootstrap_servers,
            files=files,
            cluster=self._client(),
            drift=DriftReporter(self.status, self.events, now_ms),
            clock_ms=now_ms,
        )
        self.claim.claim()

    def _open_reader(self) -> None:
        if self.client is not None and self.settings.lag_enabled:
            self.lag_loop.reader = OffsetReader(self._client())

    def _open_output_client(self, bootstrap: str, options: dict[str, str], setting: str) -> ClusterClient:
        return open_cluster(self._jvm(), bootstrap, options, setting, self.settings.secret_values())

    def _check_source(self) -> None:
        if self._source_check is None:
            self._source_check = SourceCheck(self._client(), self.settings.topic, self.status)
        self._source_check()

    def _keep_meta(self) -> None:
        if self.claim is not None:
            self.claim.keep(self.status.last_batch.finished_at_ms)

    def _reconcile(self) -> bool:
        if self.reconciler is None:
            self.reconciler = Reconciler(self._client(), self.store, self.status, self.events, now_ms)
        return self.reconciler.round()

    # -- what the API asks of a cluster ----------------------------------------------------------
    def share_view(self) -> Callable[[str], dict[str, Any] | None] | None:
        """``GET /groups/{id}``'s ``share_state`` (None: the share-state query is off)."""
        return share_view_of(self.share_store, self.lag) if self.share_state is not None else None

    def lag_route(self, path: str) -> tuple[int, Any] | None:
        keep = self._group_filter

        def mirrored(group_id: str) -> bool:
            snap = self.store.group(group_id)
            return snap is not None and bool(snap.get("exists", True))

        return lag_route(
            self.lag,
            self.burrow,
            path,
            now_ms(),
            filtered=lambda gid: bool(keep) and not keep.keeps(gid),
            mirrored=mirrored,
        )

    @property
    def offset_reader(self) -> OffsetReader | None:
        reader = self.lag_loop.reader
        return reader if isinstance(reader, OffsetReader) else None

    def query_running(self) -> bool:
        """Whether the streaming query runs now (``coordinator_mirror_query_healthy``)."""
        q = self.run.query
        return q is not None and bool(q.isActive) and self.run.fatal is None
