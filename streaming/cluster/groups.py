"""The driver's reads of the cluster through Kafka's Admin client (`streaming.cluster.jvm`): cluster
id, topics, configs, log offsets, the coordinators' group list, output topics.

ListGroups (Kafka 4.x ``Admin.listGroups``) lists every group the coordinators keep in memory --
classic groups (also the "simple" groups that only have offsets, as type classic, state empty),
KIP-848 consumer groups, share and streams groups (checked on the 4.3.1 broker) -- which is every
group the log describes.  A broker still loading a coordinator partition answers
COORDINATOR_LOAD_IN_PROGRESS for it: such a round is partial and must not count
(`GroupListing.complete`).  What a principal may list depends on its ACLs: ListGroups leaves out
the groups it may not Describe, silently (`GroupListing.authorized` says whether the list can be
complete).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from streaming.cluster.jvm import (
    CLUSTER_READS,
    FrameReader,
    Jvm,
    KafkaCallError,
    frame_partitions,
    frame_strings,
)

#: Kafka's error code of a partition the principal may not Describe (TOPIC_AUTHORIZATION_FAILED)
TOPIC_AUTHORIZATION_FAILED: Final = 29
#: ... of a partition the cluster does not have (UNKNOWN_TOPIC_OR_PARTITION)
UNKNOWN_TOPIC_OR_PARTITION: Final = 3


class TopicAuthorizationError(PermissionError):
    """The principal may not see the topic (a missing ACL)."""


class BrokerUnreachableError(ConnectionError):
    """No broker of the cluster answered in time (`streaming.app.errors` makes it exit code 3)."""


@dataclass(frozen=True)
class GroupListing:
    #: group id -> (type, state) as the coordinators report them ("classic", "empty" ...)
    groups: dict[str, tuple[str, str]]
    #: per-broker errors (e.g. COORDINATOR_LOAD_IN_PROGRESS); a round with errors is partial
    errors: tuple[str, ...]

    @property
    def complete(self) -> bool:
        return not self.errors


@dataclass(frozen=True)
class PartitionOffsets:
    """One partition's log offsets from one ListOffsets round (-1: not known)."""

    earliest: int
    high_watermark: int
    stable: int  # last stable offset (read_committed latest); -1 when not asked
    error: int  # Kafka's error code, 0 for none


class ClusterClient:
    """One Admin client for the driver's reads (thread-safe: the supervisor, the offsets thread and
    start-up share it), with the mirror's ``kafka_options`` verbatim."""

    def __init__(self, jvm: Jvm, bootstrap: str, options: Mapping[str, str], timeout_s: float = 30.0) -> None:
        self.bootstrap = bootstrap
        self.timeout_s = timeout_s
        self._reads = jvm.open(CLUSTER_READS, {**options, "bootstrap.servers": bootstrap}, timeout_s)

    def cluster_id(self) -> str:
        """The cluster id (DescribeCluster); `BrokerUnreachableError` when no broker answers in time."""
        try:
            return str(self._reads.call("clusterId"))
        except KafkaCallError as exc:
            if exc.has("TimeoutException"):
                raise BrokerUnreachableError(
                    f"no broker answered DescribeCluster within {self.timeout_s:.0f}s ({exc.innermost})"
                ) from exc
            raise

    def describe_topic(self, topic: str, timeout_s: float | None = None) -> tuple[str, int, int] | None:
        """(topic id, partitions, partitions without a leader), or None when it does not exist.
        ``timeout_s``: the call's own timeout (a `KafkaCallError` with a TimeoutException after it),
        instead of the client's."""
        try:
            if timeout_s is None:
                answer = str(self._reads.call("describeTopic", topic))
            else:
                answer = str(self._reads.call("describeTopic", topic, max(1, round(timeout_s * 1000))))
        except KafkaCallError as exc:
            if exc.has("TopicAuthorizationException"):
                # not "missing": a principal without Describe sees the topic as an error, and
                # waiting for it would never end (`streaming.app.errors` makes this exit 7)
                raise TopicAuthorizationError(
                    f"TOPIC_AUTHORIZATION_FAILED: Not authorized to access topics: [{topic}]"
                ) from exc
            raise
        if not answer:
            return None
        tid, n, leaderless = answer.split(" ")
        return tid, int(n), int(leaderless)

    def topic_partitions(self, topic: str, timeout_s: float | None = None) -> int | None:
        """How many partitions ``topic`` has (None: it does not exist, or has no leaders yet);
        ``timeout_s`` as in `describe_topic`."""
        found = self.describe_topic(topic, timeout_s)
        if found is None or found[1] == 0 or found[2] > 0:
            return None
        return found[1]

    def delete_retention_ms(self, topic: str) -> int | None:
        """The topic's ``delete.retention.ms`` (how long tombstones survive compaction); None when
        unknown (no topic yet, or no DescribeConfigs permission)."""
        try:
            value = self._reads.call("topicConfig", topic, "delete.retention.ms")
        except KafkaCallError:
            return None
        return int(value) if value is not None else None

    def list_offsets(
        self, by_topic: Mapping[str, Sequence[int]], *, stable: bool = True
    ) -> dict[tuple[str, int], PartitionOffsets]:
        """Log start offset, high watermark and (``stable``) last stable offset of each partition,
        three ListOffsets requests per broker in flight together."""
        answer = FrameReader(self._reads.call("listOffsets", frame_partitions(by_topic), stable))
        out: dict[tuple[str, int], PartitionOffsets] = {}
        for topic, partitions in by_topic.items():
            for p in partitions:
                out[(topic, p)] = PartitionOffsets(answer.i64(), answer.i64(), answer.i64(), answer.i16())
        return out

    def _offsets_of(self, topic: str) -> dict[int, PartitionOffsets]:
        n = self.topic_partitions(topic)
        if not n:
            return {}
        found = self.list_offsets({topic: list(range(n))})
        for (t, _p), o in found.items():
            if o.error == TOPIC_AUTHORIZATION_FAILED:
                raise TopicAuthorizationError(
                    f"TOPIC_AUTHORIZATION_FAILED: Not authorized to access topics: [{t}]"
                )
        return {p: o for (_t, p), o in found.items()}

    def log_start_offsets(self, topic: str) -> dict[int, int]:
        """Each partition's log start offset; ``{}`` when the topic or its partitions are not known."""
        return {p: o.earliest for p, o in self._offsets_of(topic).items() if o.earliest >= 0}

    def partition_offsets(self, topic: str) -> tuple[dict[int, int], dict[int, int]]:
        """(log start, last stable offset) per partition of ``topic`` -- the stable offset is where
        Spark's read_committed source stops; raises when any partition has no answer."""
        offsets = self._offsets_of(topic)
        bad = {p: o.error for p, o in offsets.items() if o.error or o.stable < 0}
        if bad or not offsets:
            why = f"{topic}: no offsets for partitions {bad}"
            raise KafkaCallError([("org.apache.kafka.common.errors.LeaderNotAvailableException", why)])
        return {p: o.earliest for p, o in offsets.items()}, {p: o.stable for p, o in offsets.items()}

    def topic_names(self) -> set[str]:
        """Every topic of the cluster the principal may describe (internal ones included)."""
        return {t for t in FrameReader(self._reads.call("topicNames")).strings() if t is not None}

    def topic_ids(self, names: Sequence[str]) -> dict[str, tuple[str | None, int]]:
        """name -> (topic id in Kafka's text form or None, Kafka's error code or 0): a topic the
        principal may not Describe answers TOPIC_AUTHORIZATION_FAILED, a deleted one
        UNKNOWN_TOPIC_OR_PARTITION (Metadata's topic list leaves both out alike)."""
        answer = FrameReader(self._reads.call("topicIds", frame_strings(list(names))))
        out: dict[str, tuple[str | None, int]] = {}
        for _ in range(answer.i32()):
            name, tid, error = answer.text(), answer.text(), answer.i16()
            if name is not None:
                out[name] = (tid, error)
        return out

    def may_list_every_group(self) -> bool:
        """Whether ListGroups answers every group: the broker lists only the groups the principal
        may Describe, silently, unless it may Describe the cluster (or no authorizer runs)."""
        ops = self._reads.call("clusterOperations")
        return ops is None or bool({"DESCRIBE", "ALTER", "ALL"} & set(str(ops).split(",")))

    def list_groups(self) -> GroupListing:
        """The coordinators' groups (Admin ListGroups, Kafka 4.x: every group type)."""
        return self.list_groups_from(self._reads.call("listGroups"))

    @staticmethod
    def list_groups_from(raw: str) -> GroupListing:
        """`list_groups`'s answer from the bridge's JSON."""
        answer = json.loads(raw)
        groups = {str(gid): (str(kind), str(state)) for gid, kind, state in answer["groups"]}
        return GroupListing(groups, tuple(str(e) for e in answer["errors"]))

    def ensure_topic(self, name: str, *, compacted: bool, partitions: int = 3) -> bool:
        """Create ``name`` unless it exists (True: created); replication is the broker's default.
        Existence is asked first: a principal with Write but no Create on an existing topic is fine."""
        if self.describe_topic(name) is not None:
            return False
        return bool(self._reads.call("createTopic", name, partitions, compacted))

    def close(self) -> None:
        self._reads.close()


def log_start_drift(
    committed: Mapping[int, int], log_starts: Mapping[int, int]
) -> dict[int, tuple[int, int]]:
    """Partitions whose log start offset is past the checkpoint's committed position (partition ->
    (committed, log start)): records between the two -- possibly tombstones -- were removed while
    the mirror was not reading, and the query will skip them.  Partitions the checkpoint does not
    know (added since) are not drift: the query reads them from their start."""
    return {
        p: (committed[p], start)
        for p, start in sorted(log_starts.items())
        if p in committed and start > committed[p]
    }
