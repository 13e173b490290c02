"""Start-up steps of the mirror besides the checkpoint's (`streaming.app.drift`): the driver's
Kafka client, the output topics, readiness targets, state recovery, and `Beginning` -- readiness,
recovery and the query's first start, once the topic exists -- plus the supervisor's source check.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING

from state.config import OffsetConfig
from streaming.app.errors import client_options_error, first_line
from streaming.cluster.groups import ClusterClient
from streaming.cluster.jvm import Jvm, KafkaCallError
from streaming.pipeline.recovery import read_committed_offsets, recover_snapshots
from streaming.serving.status import MirrorStatus
from streaming.serving.store import SnapshotStore
from streaming.settings import Settings

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.streaming import StreamingQuery

    from streaming.app.lag_loop import LagLoop

log = logging.getLogger("coordinator_mirror")


class OutputTopicError(RuntimeError):
    """An output topic could not be checked or created; names the topic and its setting."""


def kafka_words(exc: BaseException) -> str:
    """``Class: message`` of the innermost Kafka exception in a (py4j) error text."""
    found = re.findall(r"org\.apache\.kafka\.common\.errors\.(\w+: [^\n]*)", str(exc))
    return found[-1].strip() if found else str(exc).splitlines()[0]


def open_cluster(
    jvm: Jvm, bootstrap: str, options: dict[str, str], setting: str, secrets: Iterable[str]
) -> ClusterClient:
    """An Admin client for ``bootstrap``; a client option Kafka refuses (a bad value, a key store
    it cannot open) is a `StartupError` naming ``setting`` and the option."""
    try:
        return ClusterClient(jvm, bootstrap, options)
    except KafkaCallError as exc:
        raise client_options_error(setting, exc, options, secrets, bootstrap=bootstrap) from None


def ensure_output_topics(
    settings: Settings, open_client: Callable[[str, dict[str, str], str], ClusterClient]
) -> None:
    """Check (create, when missing) ``events_topic`` and ``offsets_topic`` (compacted)."""
    s = settings
    if not (s.events_topic or s.offsets_topic):
        return
    bootstrap = s.output_bootstrap()
    assert bootstrap
    setting = "output_kafka_options" if s.output_kafka_options else "kafka_options"
    client = open_client(bootstrap, s.output_options(), setting)
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
                raise OutputTopicError(f"{kafka_words(exc)} (output topic {topic}, setting {name})") from exc
            if created:
                log.info("created output topic %s%s", topic, " (compacted)" if compacted else "")
    finally:
        client.close()


def init_readiness(topic: str, cluster: ClusterClient, status: MirrorStatus) -> None:
    """The catch-up targets: the topic's end offsets now (ready at once when it is empty)."""
    starts, ends = cluster.partition_offsets(topic)
    status.set_targets(starts, ends)
    log.info(
        "%s: %d partitions, %d records (log positions) to catch up with",
        topic,
        len(ends),
        sum(ends[p] - starts.get(p, 0) for p in ends),
    )


def recover_store(
    spark: SparkSession, settings: Settings, config: OffsetConfig, store: SnapshotStore, lag: LagLoop
) -> int:
    """After a restart, rebuild the driver's snapshots from the checkpointed state store (on the
    executors), so the API and metrics are complete before the first new batch."""
    started = time.monotonic()
    rows = recover_snapshots(spark, settings, config)
    if rows is None:
        return 0
    found = list(rows)
    recovered = [(gid, blob, summ) for gid, blob, summ, _q in found if blob is not None and summ]
    n = store.load(recovered)
    if settings.preview and settings.source == "kafka":
        # the preview (`streaming.app.preview`) goes on from where the recovered states end
        committed = read_committed_offsets(spark, settings.checkpoint_location, settings.topic)
        if committed:
            store.cover(committed)
    lag.apply((gid, blob) for gid, blob, _ in recovered)
    store.quarantine(
        {"group_id": gid, "error_type": "unknown", "message": q, "phase": "recovery"}
        for gid, _b, _s, q in found
        if q is not None
    )
    log.info("recovered %d groups from the checkpoint in %.1fs", n, time.monotonic() - started)
    return n


class Beginning:
    """Readiness targets, recovery and the query's first start -- if the topic and its partitions
    are known (`try_begin` None: not yet; the supervisor tries again)."""

    def __init__(
        self,
        settings: Settings,
        status: MirrorStatus,
        cluster: ClusterClient | None,
        *,
        recover: Callable[[], int],
        start_query: Callable[[], StreamingQuery],
        warm: Callable[[float], None] = lambda _timeout_s: None,
        hand_over_backfill: Callable[[], Mapping[int, int] | None] | None = None,
    ) -> None:
        self.settings = settings
        self.status = status
        self.cluster = cluster
        self.recover = recover
        self.start_query = start_query
        #: waits for the Python workers' warm-up, if one runs (`streaming.pipeline.session.SessionPart`)
        self.warm = warm
        #: the driver's backfill (`streaming.app.backfill`): applied, seeded; where its read ended
        self.hand_over_backfill = hand_over_backfill
        self.recovered_groups = 0

    def try_begin(self) -> StreamingQuery | None:
        s = self.settings
        status = self.status
        if s.source == "kafka":
            assert self.cluster is not None
            if self.cluster.topic_partitions(s.topic) is None:
                status.waiting(f"waiting for {s.topic}")
                return None
            try:
                init_readiness(s.topic, self.cluster, status)
            except Exception as exc:  # the topic vanished or lost its leaders between the two calls
                if "UnknownTopicOrPartition" in str(exc) or "LeaderNotAvailable" in str(exc):
                    status.waiting(f"waiting for {s.topic}")
                    return None
                raise
        self.recovered_groups = self.recover()
        seeded = self.hand_over_backfill() if self.hand_over_backfill is not None else None
        if seeded is None:
            # the first batch folds the backfill: it waits for warm Python workers (with a seed,
            # the first batch comes after ready: its query need not wait)
            self.warm(60)
        query = self.start_query()
        status.waiting(None)
        if seeded is not None:
            # the driver's fold reached the ends its own read saw at start (on a busy cluster a
            # little before the targets read above): the query goes on from there, and they are
            # the ends this start catches up with
            status.seeded(seeded)
        return query


class SourceCheck:
    """Does the cluster answer (a metadata request for the topic)?  A missing topic is not an
    outage: a new cluster has none until the first group commits.

    Bounded, and never in the caller's way.  The supervisor calls it every half
    ``source_check_interval_s``; a call starts the request in a thread of its own
    (``mirror-source-check``) and returns at once.  The request carries a timeout of half the
    interval (the Admin call's own, ``DescribeTopicsOptions.timeoutMs``: the client's
    ``default.api.timeout.ms``, 30 s, made every check block that long and the supervisor with it),
    so the last answer and the verdict "does not answer" are at most one interval apart -- on
    ``/ready``, ``coordinator_mirror_source_up`` and in the log -- and the first answer after an
    outage clears it, at most half an interval after the cluster answers again.  A request still
    running past its timeout (the guard for a client that never completes it) counts as no answer.
    Once ``stopping()`` says the mirror stops, results are dropped: a request cut short by the
    client's close is no outage."""

    def __init__(
        self,
        cluster: ClusterClient,
        topic: str,
        status: MirrorStatus,
        interval_s: float = 10.0,
        *,
        stopping: Callable[[], bool] = lambda: False,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.cluster = cluster
        self.topic = topic
        self.status = status
        #: how long one request may take: half the interval (the other half is the wait until the
        #: next one starts)
        self.timeout_s = interval_s / 2
        self.stopping = stopping
        self.clock = clock
        self._lock = threading.Lock()
        #: the request under way: its thread and when it started
        self._running: tuple[threading.Thread, float] | None = None

    def __call__(self) -> None:
        """Start a request unless one is under way; one under way past its timeout: no answer."""
        with self._lock:
            running = self._running
            if running is None or not running[0].is_alive():
                thread = threading.Thread(target=self.check, name="mirror-source-check", daemon=True)
                self._running = (thread, self.clock())
                thread.start()
                return
        waited = self.clock() - running[1]
        if waited > self.timeout_s:
            self._verdict(f"no answer within {waited:.0f}s")

    def check(self) -> None:
        """One request, and its verdict (in the caller's thread)."""
        error: str | None = None
        try:
            self.cluster.topic_partitions(self.topic, timeout_s=self.timeout_s)
        except Exception as exc:
            error = first_line(f"{type(exc).__name__}: {exc}")
        if not self.stopping():
            self._verdict(error)

    def _verdict(self, error: str | None) -> None:
        with self._lock:  # a verdict and its log line together (the request's and the caller's)
            change = self.status.source_checked(error)
            if change is True:
                log.info("the Kafka cluster answers again")
            elif change is False:
                log.warning("the Kafka cluster does not answer: %s", error)
