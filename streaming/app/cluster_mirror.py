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
offset-history  committed offsets over time (issue 38), if enabled  mirror-offset-history
preview         new records folded before their micro-batch         mirror-preview
query           the streaming query: first start, drain at stop     Spark's
wake            a micro-batch when an expiry deadline is due        mirror-wake
share-state     the ``__share_group_state`` query, supervised       mirror-share-state
supervisor      restarts, source check, reconciliation, meta        mirror-supervisor
==============  ==================================================  ==============================

Stopped in reverse: the supervisor first (no restart while stopping), the share-state query, the
main query after its running batch (its last progress taken), then the threads that fed on it and
the client.  Adding a part is a line in `ClusterMirror.__init__`'s list and its module.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from streaming.app.backfill import DriverBackfill, local_checkpoint_is_new
from streaming.app.drift import CheckpointClaim, DriftReporter
from streaming.app.driver_events import DriverEvents
from streaming.app.errors import UNREACHABLE_AT_START, classify
from streaming.app.lag_loop import LagLoop
from streaming.app.preview import Preview
from streaming.app.reconcile import Reconciler
from streaming.app.startup import Beginning, SourceCheck, ensure_output_topics, open_cluster, recover_store
from streaming.app.supervisor import QueryRun, QuerySupervisor, RestartPolicy, SideQuerySupervisor
from streaming.app.wake import ExpiryWake, idle
from streaming.cluster.groups import ClusterClient
from streaming.cluster.jvm import Jvm
from streaming.cluster.offsets import OffsetReader
from streaming.health.lag import LagTracker
from streaming.health.lag_history import LagHistory
from streaming.health.retention import RECORDS_LOST, RetentionWatch
from streaming.lifecycle import Part, PartGroup, Step, Worker
from streaming.pipeline.prepare import GroupFilter
from streaming.pipeline.progress import ProgressFollower
from streaming.pipeline.query import MirrorQuery, stop_between_batches
from streaming.pipeline.recovery import SparkCheckpointFiles, has_planned_batch
from streaming.pipeline.session import ClusterSession, SessionPart
from streaming.pipeline.share_state import ShareStateQuery, share_view_of, wanted_by
from streaming.pipeline.sinks import HEALTH_EVENTS
from streaming.serving.api import ClusterView
from streaming.serving.burrow import Burrow, lag_route
from streaming.serving.lag_metrics import LagExporter
from streaming.serving.metrics import MirrorMetrics
from streaming.serving.offset_history import OffsetHistory
from streaming.serving.render import snapshot_renderer
from streaming.serving.reset_plan import needs_command_config, offsets_route
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
        session: SessionPart | ClusterSession,
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
        #: this start found no micro-batch in the checkpoint: the cluster is read from its beginning
        self.from_beginning: bool | None = None

    def start(self) -> None:
        c, s = self.cluster, self.cluster.settings
        spark = self.session.get()
        self.from_beginning = not has_planned_batch(spark, s.checkpoint_location)
        self.definition = MirrorQuery(
            spark,
            s,
            c.store,
            c.status,
            c.offset_config,
            on_batch=[c.lag_loop.on_batch, c.wake.on_batch]
            + ([c.offset_history.on_batch] if c.offset_history is not None else []),
            on_sink=c.events.attach,
            on_observed=c.run_status.add_observed,
            pool=getattr(self.session, "pool", None),
        )
        definition = self.definition
        self.beginning = Beginning(
            s,
            c.status,
            self.client.get() if self.client is not None else None,
            recover=lambda: recover_store(spark, s, c.offset_config, c.store, c.lag_loop),
            start_query=definition.start,
            warm=self.session.wait_warm,
            hand_over_backfill=lambda: self._handed_over(self.backfill.hand_over(spark, definition)),
        )
        c.run.query = self.beginning.try_begin()
        if c.run.query is None:
            log.info(
                "%s does not exist yet (a new cluster where no group has committed): waiting for it, "
                "checking every %.0fs; /ready answers 503 meanwhile",
                s.topic,
                s.topic_wait_interval_s,
            )

    def _handed_over(self, ends: dict[int, int] | None) -> dict[int, int] | None:
        if ends is not None and self.cluster.settings.preview:
            self.cluster.store.cover(ends)  # the preview goes on from where the driver's read ended
        return ends

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


class ClusterRunner(Worker):
    """One of several clusters, started on a thread of its own (``mirror-cluster-<name>``) so that a
    cluster that is down, slow or refuses the mirror's credentials holds up no other: a start that
    fails is reported -- the cluster's ``/ready`` reason and ``coordinator_mirror_source_up`` 0, one
    log line per new cause, naming the cluster and the setting -- and tried again after the restart
    policy's backoff, with fresh parts over the same state.  Once started, the cluster's supervisor
    keeps it (restarts, source check); `stop` stops its parts."""

    join_timeout_s = (
        45.0  # a start blocked on a cluster that does not answer ends within the client's timeout
    )

    def __init__(self, cluster: ClusterMirror, index: int) -> None:
        name = cluster.settings.cluster_name
        super().__init__(f"mirror-cluster-{name}", cluster.policy.backoff_s, first_wait=False)
        self.name = f"cluster {name}"
        self.cluster = cluster
        self.index = index
        self.failures = 0
        self._said: str | None = None

    def work(self) -> bool | None:
        c = self.cluster
        s = c.settings
        try:
            c.parts.start()
        except Exception as exc:
            if self.stopping:
                return False
            self.failures += 1
            cause = classify(exc, bootstrap=s.bootstrap_servers, secrets=s.secret_values())
            message = cause.message.replace(UNREACHABLE_AT_START, "")
            delay = c.policy.delay(self.failures)
            c.status.source_checked(message)
            c.status.waiting(f"start failed: clusters[{self.index}] ({s.cluster_name}): {message}")
            if message != self._said:
                log.error(
                    "clusters[%d] (%s): %s -- trying again in %.0fs; the other clusters go on",
                    self.index,
                    s.cluster_name,
                    message,
                    delay,
                )
                self._said = message
            c.rebuild()
            self.interval_s = delay
            return None
        if self.failures:
            c.status.source_checked(None)
            log.info(
                "clusters[%d] (%s): started after %d failed start(s)",
                self.index,
                s.cluster_name,
                self.failures,
            )
        return False

    def on_stop(self) -> None:
        self.cluster.parts.stop()


class ClusterMirror:
    """One cluster: its state (no I/O until its parts start) and its `PartGroup` (`parts`), built
    anew by `rebuild` after a start that failed (a part stopped is not started again; the state --
    store, status, lag, Burrow -- stays, and so does what the HTTP API holds of it)."""

    def __init__(
        self,
        settings: Settings,
        *,
        jvm: Callable[[], Jvm],
        session: SessionPart | ClusterSession,
        stopping: Callable[[], bool],
        isolated: bool = False,
    ) -> None:
        s = self.settings = settings
        self.session = session
        self._jvm = jvm
        self._stopping = stopping
        #: one of several clusters: a failure no restart fixes is this cluster's (retried), never
        #: the process's end
        self.isolated = isolated
        #: the state layer's configuration, built once: the fold, recovery and rendering share it
        self.offset_config = s.offset_config()
        self.store = SnapshotStore(
            cache_bytes=s.snapshot_cache_bytes,
            timeline_events=s.timeline_events_per_group,
            renderer=snapshot_renderer(self.offset_config, s.default_server_assignor),
        )
        self.status = MirrorStatus()
        # not ready before the query's first start, whatever the targets say (an empty topic is
        # caught up at once): `startup.Beginning` clears it when the query starts
        self.status.waiting("starting")
        self.run = QueryRun()
        self.run_status = RunStatus(query_running=self.query_running)
        self.events = DriverEvents()
        # lag and consumer health: fed by the sink (groups) and the lag loop (log offsets)
        self.lag = LagTracker(s.lag_isolation, s.lag_lookup_points)
        self.burrow = Burrow(self.lag, s.cluster_name, s.burrow_intervals, s.burrow_min_distance_s)
        # issue 38: records lost to retention (a lag round's listener), offsets as of a moment
        self.retention = RetentionWatch(self.lag)
        self.retention.emit = self._retention_events
        self.lag_exporter = LagExporter(self.lag, self.burrow, s, retention=self.retention)
        # issue 37: each group's lag over the last hour, after every round (the lag loop's thread,
        # paced as Burrow's evaluation is; `pause` waits in that loop, ended by its stop)
        self.lag_history = LagHistory(self.lag, s.lag_history_minutes, s.lag_interval_s, pause=self._pause)
        self.share_store = ShareStateStore()
        self.offset_history = OffsetHistory.from_settings(
            s, states=self.store.states, topic_names=lambda: self.lag.topic_names, retention=self.retention
        )
        if self.offset_history is not None:
            self.share_store.listeners.append(self.offset_history.on_share_state)
        self.metrics = MirrorMetrics(
            s, self.offset_config, self.store, self.status, self.run_status, lag=self.lag_exporter,
            share=self.share_store,
        )  # fmt: skip
        self._group_filter = GroupFilter(*s.group_filter)  # the reason of a lag 404
        self.drain_timeout_s = 60.0
        self.policy = RestartPolicy(
            s.query_restart_backoff_s, s.query_restart_backoff_max_s, s.bootstrap_servers, s.secret_values()
        )
        self.kafka = s.source == "kafka"
        if self.kafka and s.share_state_enabled:
            # the share-state query's wiring: the lag rounds read its share-partitions' ends, and
            # GET /groups/{id} shows a share group's delivery state (`share_view`)
            self.lag.add_wanted(wanted_by(self.share_store, self.lag))
        self.parts = self._build()

    def rebuild(self) -> PartGroup:
        """Fresh parts over the same state (after a start that failed and stopped the old ones)."""
        self.parts = self._build()
        return self.parts

    def _build(self) -> PartGroup:
        """The parts, in start order (the module's table)."""
        s, kafka, session = self.settings, self.kafka, self.session
        pool = getattr(session, "pool", None)
        self.client = ClientPart(s, self._jvm) if kafka else None
        self.backfill = BackfillPart(s, self._jvm)
        self.lag_loop = LagLoop(
            s.lag_interval_s, self.status, self.lag, self.burrow, reader=None, events=self.events
        )
        self.progress = ProgressFollower(
            s, self.status, self.run_status, lambda: self.run.query, self._stopping
        )
        self.query = QueryPart(self, session, self.client, self.backfill, self.progress)
        self.wake = ExpiryWake(
            self.store,
            self.status,
            lambda: self.query.definition,
            lambda: self.run.query,
            s.trigger_interval_s,
        )
        #: the served states ahead of the micro-batches (`streaming.app.preview`)
        self.preview = Preview(s, self._jvm, self.store, now_ms) if kafka and s.preview else None
        self.claim: CheckpointClaim | None = None
        self.reconciler: Reconciler | None = None
        self._source_check: SourceCheck | None = None
        self.share_state: SideQuerySupervisor | None = None
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
                    pool=pool,
                ),
                self.status,
                self.policy,
                wait_interval_s=s.topic_wait_interval_s,
            )
        self.supervisor = QuerySupervisor(
            s,
            self.status,
            self.run,
            self.policy,
            begin=self.query.begin,
            restart=self.query.restart,
            check_source=self._check_source if kafka else None,
            keep_meta=self._keep_meta,
            reconcile=self._reconcile if kafka else None,
            fatal_ends=not self.isolated,
        )
        parts: list[Part] = [
            *([self.client] if self.client is not None else []),
            self.backfill,
            Step("checkpoint", self._claim),
            Step("outputs", lambda: ensure_output_topics(s, self._open_output_client)),
            Step("lag-reader", self._open_reader),
            self.lag_loop,
            self.progress,
            # loaded before the first batch; stopped after the query's last one (its final snapshot)
            *(
                [Step("offset-history", self.offset_history.start, self.offset_history.stop)]
                if self.offset_history is not None
                else []
            ),
            # before the query: its consumer is made, and follows from where the served states end
            # as soon as that is known (the backfill's hand-over, a recovery) -- not after ready
            *([self.preview] if self.preview is not None else []),
            self.query,
            self.wake,
            *([self.share_state] if self.share_state is not None else []),
            self.supervisor,
        ]
        if self.isolated:  # one of several clusters: its threads carry its name (mirror-offsets-<name>)
            for part in parts:
                if isinstance(part, Worker):
                    part.thread_name = f"{part.thread_name}-{s.cluster_name}"
            if self.offset_history is not None:
                self.offset_history.thread_name = f"{self.offset_history.thread_name}-{s.cluster_name}"
        return PartGroup(f"cluster {s.cluster_name}", parts)

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
            s = self.settings
            self._source_check = SourceCheck(
                self._client(), s.topic, self.status, s.source_check_interval_s, stopping=self._stopping
            )
        self._source_check()

    def _keep_meta(self) -> None:
        # the last trigger counts as much as the last batch: a trigger that found no new record had
        # read the topic to its end (a quiet cluster runs no batch for hours, and was not down)
        if self.claim is not None:
            self.claim.keep(max(self.status.last_batch.finished_at_ms, self.status.last_trigger_ms))

    def _reconcile(self) -> bool:
        if self.reconciler is None:
            self.reconciler = Reconciler(self._client(), self.store, self.status, self.events, now_ms)
        return self.reconciler.round()

    def _pause(self, busy_s: float) -> None:
        # the lag loop of the parts now built (`rebuild` makes a new one): its stop ends the wait
        self.lag_loop.sleep(busy_s)

    # -- what the API asks of a cluster ----------------------------------------------------------
    def view(self) -> ClusterView:
        """What the HTTP API reads of this cluster."""
        return ClusterView(
            self.store,
            self.status,
            self.lag_route,
            lambda: self.lag.topic_names,
            self.share_view(),
            offsets_at=self.offsets_at if self.offset_history is not None else None,
            history=self.lag_history,
            statuses=lambda: self.burrow.watcher.groups,
        )

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
            retention=self.retention,
            share=self.share_store,
        )

    def offsets_at(self, group_id: str, at: str | None) -> tuple[int, Any]:
        """``GET /groups/{id}/offsets?at=`` (issue 38, `streaming.serving.reset_plan`)."""
        r = self.lag.round
        return offsets_route(
            self.offset_history,
            group_id,
            at,
            now_ms(),
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
        self.status.add_tallies({("event", RECORDS_LOST): len(events)})
        for e in events:
            log.warning("records lost to retention: %s", json.dumps(e, ensure_ascii=False))
        self.events.write(events, at_ms, HEALTH_EVENTS)

    @property
    def offset_reader(self) -> OffsetReader | None:
        reader = self.lag_loop.reader
        return reader if isinstance(reader, OffsetReader) else None

    def nudge(self) -> bool:
        """A micro-batch soon, new data or not, if the query is idle and runs none without new
        data (`streaming.app.wake`); False when it was not woken."""
        definition, q = self.query.definition, self.run.query
        if definition is None or not definition.wakes or q is None or not idle(q):
            return False
        definition.wake(now_ms())
        return True

    def query_running(self) -> bool:
        """Whether the streaming query runs now (``coordinator_mirror_query_healthy``)."""
        q = self.run.query
        return q is not None and bool(q.isActive) and self.run.fatal is None
