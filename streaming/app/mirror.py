"""The mirror as a running application -- the composition root: it builds the parts, hands them
to each other, and holds them in one ordered `streaming.lifecycle.PartGroup` that starts them in
order and stops them in reverse (Burrow's coordinators' lifecycle: configure validates and opens
nothing; start returns promptly; stop is idempotent)::

    mirror = Mirror(settings)      # nothing started
    mirror.start()                 # the parts in order
    mirror.wait_ready(timeout)     # caught up with the end of __consumer_offsets seen at start
    mirror.stop()                  # the parts in reverse: the running batch completes first

The process's parts, in start order (ARCHITECTURE.md "Threads" says who starts and stops each
thread):

==========================  ===================================  ==============================
part                        module                               thread
==========================  ===================================  ==============================
client JVM                  streaming.cluster.jvm                (py4j's)
Spark session, warm-up      streaming.pipeline.session           mirror-session, mirror-warm-up
HTTP (API, /metrics)        streaming.serving.api / .metrics     mirror-http
the cluster's parts         streaming.app.cluster_mirror         (its table)
the driver's heap           streaming.app.heap                   mirror-heap
==========================  ===================================  ==============================

HTTP starts before the cluster and stops after it: ``/ready`` answers 503 while the mirror starts,
and the API serves until the query has stopped.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from streaming.app.cluster_mirror import ClusterMirror, ClusterRunner
from streaming.app.heap import DriverHeap
from streaming.cluster.jvm import Jvm
from streaming.lifecycle import Part, PartGroup
from streaming.pipeline.session import ClusterSession, SessionPart
from streaming.serving.api import MirrorHTTPServer, credentials_from
from streaming.serving.metrics import (
    OPENMETRICS_CONTENT_TYPE,
    TEXT_CONTENT_TYPE,
    exposition,
    openmetrics_exposition,
    to_openmetrics,
)
from streaming.serving.text_format import merge_expositions
from streaming.serving.ui import UiContext
from streaming.settings import Settings

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.streaming import StreamingQuery

    from streaming.app.errors import StartupError
    from streaming.cluster.offsets import OffsetReader
    from streaming.pipeline.sinks import MirrorSink
    from streaming.serving.status import MirrorStatus
    from streaming.serving.store import SnapshotStore

log = logging.getLogger("coordinator_mirror")


class JvmPart:
    """The client JVM the driver's Kafka clients run in (Kafka's own Java clients, options
    verbatim): launched at start when a cluster is read, or on first use (a capture source that
    writes its output topics to Kafka); closed last but the session."""

    name = "jvm"

    def __init__(self, settings: Settings, java_options: list[str], *, needed: bool) -> None:
        self.settings = settings
        self.java_options = java_options
        self.needed = needed
        self.jvm: Jvm | None = None
        self._lock = threading.Lock()

    def start(self) -> None:
        if self.needed:
            self.get()

    def get(self) -> Jvm:
        with self._lock:
            if self.jvm is None:
                s = self.settings
                self.jvm = Jvm.launch(
                    plugin_jars=s.kafka_plugin_jars, java_options=self.java_options, quick_start=False
                )
            return self.jvm

    def stop(self) -> None:
        with self._lock:
            jvm, self.jvm = self.jvm, None
        if jvm is not None:
            jvm.close()


class HttpPart:
    """The HTTP server (API, probes, ``/metrics``): made at start -- the credentials and TLS files
    are read then, and a bad one stops the start naming its setting."""

    name = "http"

    def __init__(self, make: Callable[[], MirrorHTTPServer]) -> None:
        self.make = make
        self.server: MirrorHTTPServer | None = None

    def start(self) -> None:
        if self.server is None:
            self.server = self.make().start()
            log.info("HTTP API at %s", self.server.url)
            if self.server.ui_enabled:
                log.info("web UI at %s/ui/groups", self.server.url)

    def stop(self) -> None:
        if self.server is not None:
            self.server.stop()


class Mirror:
    """The process: its shared parts and one `ClusterMirror` per mirrored cluster (one, unless the
    settings list ``clusters``).  With several clusters each runs on its own SQL session and
    scheduler pool, starts on a thread of its own (`ClusterRunner`) and fails alone: a cluster
    that is down or refuses the mirror is reported and retried while the others serve."""

    def __init__(
        self, settings: Settings, *, spark: SparkSession | None = None, serve_http: bool = True
    ) -> None:
        s = self.settings = settings
        self._stopped = threading.Event()
        self._starting = False
        per_cluster = s.cluster_settings()  # SettingsError names clusters[i] and the setting
        self.multi = s.multi_cluster
        java = s.process_java_options(per_cluster) if self.multi else s.kafka_java_options()
        self.jvm_part = JvmPart(s, java, needed=s.source == "kafka")
        self.session = SessionPart(
            s,
            java,
            spark,
            warm=lambda: not any(c.backfill.will_fold() for c in self.clusters),
            # one pool per cluster, shared fairly: a big cluster's backfill never holds up a small one
            conf={"spark.scheduler.mode": "FAIR"} if self.multi else None,
        )
        self.clusters = [
            ClusterMirror(
                c,
                jvm=self.jvm_part.get,
                session=ClusterSession(self.session, c, pool=c.cluster_name) if self.multi else self.session,
                stopping=self._stopped.is_set,
                isolated=self.multi,
            )
            for c in per_cluster
        ]
        #: the first (the only one, without ``clusters``)
        self.cluster = self.clusters[0]
        self.http_part = HttpPart(self._http) if serve_http else None
        #: the driver's long-lived objects frozen once a cluster is ready (`streaming.app.heap`)
        self.heap = DriverHeap(lambda: any(c.status.ready for c in self.clusters))
        self.runners = [ClusterRunner(c, i) for i, c in enumerate(self.clusters)] if self.multi else []
        cluster_parts: list[Part] = [*self.runners] if self.multi else [self.cluster.parts]
        self.parts = PartGroup(
            "mirror",
            [
                self.jvm_part,
                self.session,
                *([self.http_part] if self.http_part is not None else []),
                *cluster_parts,
                self.heap,
            ],
        )

    def by_name(self, name: str) -> ClusterMirror:
        return next(c for c in self.clusters if c.settings.cluster_name == name)

    # -- start -----------------------------------------------------------------------------------
    def start(self) -> Mirror:
        """The parts in order; when `__consumer_offsets` does not exist yet the supervisor waits
        for it.  Raises `StartupError` for what a user must fix (nothing is left running); with
        several clusters, what one cluster's start raises is that cluster's (`ClusterRunner`)."""
        for c in self.clusters:
            c.settings.check_client_files()  # a missing key store stops here, before any JVM
        self._starting = True
        try:
            self.parts.start()
        finally:
            self._starting = False
        return self

    @property
    def http(self) -> MirrorHTTPServer | None:
        return self.http_part.server if self.http_part is not None else None

    def _http(self) -> MirrorHTTPServer:
        s, c = self.settings, self.cluster
        return MirrorHTTPServer(
            (s.http_host, s.http_port),
            c.store,
            metrics=self.metrics_exposition,
            health=self.health,
            clusters={x.settings.cluster_name: x.view() for x in self.clusters},
            ui=UiContext.from_settings(s),
            openmetrics=self.openmetrics_exposition if s.http_openmetrics else None,
            credentials=credentials_from(s.http_auth_token_file, s.http_basic_auth_file),
            open_probes=s.http_open_probes,
            tls_cert_file=s.http_tls_cert_file,
            tls_key_file=s.http_tls_key_file,
            idle_timeout_s=s.http_idle_timeout_s,
        )

    # -- what the parts hold, for the commands and the tests --------------------------------------
    @property
    def spark(self) -> SparkSession | None:
        return self.session.session

    @property
    def store(self) -> SnapshotStore:
        return self.cluster.store

    @property
    def status(self) -> MirrorStatus:
        return self.cluster.status

    @property
    def query(self) -> StreamingQuery | None:
        return self.cluster.run.query

    @property
    def fatal(self) -> StartupError | None:
        """The last query failure that `serve` should end the process for (config-type causes)."""
        return self.cluster.run.fatal

    @property
    def sink(self) -> MirrorSink | None:
        d = self.cluster.query.definition
        return d.sink if d is not None else None

    @property
    def recovered_groups(self) -> int:
        b = self.cluster.query.beginning
        return b.recovered_groups if b is not None else 0

    @property
    def observed(self) -> dict[str, int]:
        return self.cluster.run_status.observed_counts()

    @property
    def progress_history(self) -> list[dict[str, Any]]:
        return self.cluster.run_status.history()

    @property
    def lag(self) -> Any:
        return self.cluster.lag

    @property
    def burrow(self) -> Any:
        return self.cluster.burrow

    @property
    def share_store(self) -> Any:
        return self.cluster.share_store

    @property
    def share_state(self) -> Any:
        """The share-state query's supervisor (None: off)."""
        return self.cluster.share_state

    @property
    def offset_reader(self) -> OffsetReader | None:
        return self.cluster.offset_reader

    def reconcile_round(self) -> bool:
        """One reconciliation round now (`streaming.app.reconcile.Reconciler.round`)."""
        return self.cluster._reconcile()

    def metrics_exposition(self) -> tuple[bytes, str]:
        if not self.multi:
            return exposition(self.cluster.metrics)
        return merge_expositions([c.metrics.exposition() for c in self.clusters]), TEXT_CONTENT_TYPE

    def openmetrics_exposition(self) -> tuple[bytes, str]:
        if not self.multi:
            return openmetrics_exposition(self.cluster.metrics)
        return to_openmetrics(self.metrics_exposition()[0]), OPENMETRICS_CONTENT_TYPE

    def _lag_route(self, path: str) -> tuple[int, Any] | None:
        return self.cluster.lag_route(path)

    # -- status -----------------------------------------------------------------------------------
    def health(self) -> tuple[bool, dict[str, Any]]:
        """Liveness: healthy while the mirror starts and while the supervisor runs -- also while the
        query is waiting for the topic or being restarted after a failure (the detail says which);
        unhealthy once the mirror gave up (a failure no restart can fix) or stopped.  With several
        clusters: healthy while the process runs (a cluster's failure is that cluster's: /ready
        and the metrics say which), each cluster's detail under ``clusters``."""
        if self.multi:
            if self._stopped.is_set():
                return False, {"error": "stopped"}
            detail = {
                c.settings.cluster_name: self._cluster_health(c, starting=r.alive())[1]
                for c, r in zip(self.clusters, self.runners, strict=True)
            }
            return True, {"clusters": detail}
        return self._cluster_health(self.cluster, starting=self._starting)

    def _cluster_health(self, c: ClusterMirror, *, starting: bool) -> tuple[bool, dict[str, Any]]:
        q = c.run.query
        status = c.status
        if c.run.fatal is not None:
            return False, {"error": c.run.fatal.message}
        if self._stopped.is_set():
            return False, {"error": "stopped"}
        if q is None:
            if starting or status.waiting_reason == "starting":
                return True, {"query": "starting"}
            if status.waiting_reason:
                return True, {"query": "waiting", "reason": status.waiting_reason}
            return False, {"error": "query not started"}
        if not q.isActive:
            return True, {"query": "restarting", "error": status.failure or "query stopped"}
        return True, {"query": "running", "query_id": str(q.id), "last_batch": status.last_batch.batch_id}

    def query_running(self) -> bool:
        """Whether the streaming query runs now (``coordinator_mirror_query_healthy``)."""
        return self.cluster.query_running()

    def ready(self) -> bool:
        """Every cluster's query started and caught up."""
        return all(c.status.ready and c.status.waiting_reason is None for c in self.clusters)

    def wait_ready(self, timeout_s: float) -> bool:
        """`ready` within ``timeout_s`` (a single cluster's query failing meanwhile raises)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.ready():
                return True
            ok, detail = self.health()
            if not ok and self.cluster.run.query is not None:
                raise RuntimeError(f"mirror query failed while catching up: {detail}")
            time.sleep(0.2)
        return self.ready()

    def wait_batches(self, n: int, timeout_s: float) -> None:
        """Wait until ``n`` more micro-batches completed (each sees all data available at its
        start).  A query that runs no batch without new data is woken when it idles
        (`ClusterMirror.nudge`), so the batches come whether or not records do."""
        status = self.cluster.status
        target = status.last_batch.batch_id + n
        deadline = time.monotonic() + timeout_s
        seen, since = status.last_batch.batch_id, time.monotonic()
        while status.last_batch.batch_id < target:
            ok, detail = self.health()
            if not ok:
                raise RuntimeError(f"mirror query failed: {detail}")
            now = time.monotonic()
            if now > deadline:
                raise TimeoutError(f"no batch {target} within {timeout_s}s (at {status.last_batch.batch_id})")
            if status.last_batch.batch_id != seen:
                seen, since = status.last_batch.batch_id, now
            elif now - since > 2 * self.settings.trigger_interval_s and self.cluster.nudge():
                since = now
            time.sleep(0.1)

    # -- stop -------------------------------------------------------------------------------------
    def stop(self, drain_timeout_s: float = 60.0) -> None:
        """The parts in reverse (`streaming.app.cluster_mirror` says the cluster's order): no more
        restarts, the query stopped between two micro-batches and its last progress taken, the
        threads, the cluster's client, HTTP, the session if this mirror made it, the client JVM."""
        if self._stopped.is_set():
            return
        self._stopped.set()
        for c in self.clusters:
            c.drain_timeout_s = drain_timeout_s
        self.parts.stop()
