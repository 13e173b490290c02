"""The coordinators' own list of groups (Admin ListGroups) and a liveness check, through confluent-kafka.

Cheap on purpose: ListGroups is one request per broker and answers names, types and states only.
What Kafka 4.3.1 lists (checked on the lab broker): classic groups (also the "simple" groups that
only have offsets, as type CLASSIC, state EMPTY), KIP-848 consumer groups (type CONSUMER), share and
streams groups -- every group the coordinator keeps in memory, which is every group the log
describes.  A broker still loading a coordinator partition answers COORDINATOR_LOAD_IN_PROGRESS for
it: such a round is partial and must not count (`GroupListing.complete`).

(Not ``list_consumer_group_offsets``: librdkafka 2.16 crashes the process on it against 4.3.)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from streaming.cluster.client_config import ClientLog, driver_config


class TopicAuthorizationError(PermissionError):
    """The principal may not see the topic (a missing ACL)."""


class BrokerUnreachableError(ConnectionError):
    """No broker of the cluster answered in time (`streaming.app.errors` makes it exit code 3)."""


@dataclass(frozen=True)
class GroupListing:
    #: group id -> (type, state) as the coordinators report them ("classic", "Empty" ...)
    groups: dict[str, tuple[str, str]]
    #: per-broker errors (e.g. COORDINATOR_LOAD_IN_PROGRESS); a round with errors is partial
    errors: tuple[str, ...]

    @property
    def complete(self) -> bool:
        return not self.errors


class ClusterClient:
    """A confluent-kafka AdminClient for the driver's periodic reads."""

    def __init__(self, bootstrap: str, options: Mapping[str, str], timeout_s: float = 10.0) -> None:
        from confluent_kafka.admin import AdminClient

        self.timeout_s = timeout_s
        self.log = ClientLog("cluster")
        self._admin = AdminClient(driver_config(bootstrap, options, timeout_s, self.log))

    def cluster_id(self) -> str:
        """The cluster id (DescribeCluster); `BrokerUnreachableError` when no broker answers in time."""
        answer = self._admin.describe_cluster(request_timeout=self.timeout_s)
        try:
            return str(answer.result(self.timeout_s + 1).cluster_id)
        except Exception as exc:  # a timeout: not one broker answered -- librdkafka's lines say why
            self._admin.poll(0.5)  # serves the log and error callbacks queued so far
            why = self.log.last()
            raise BrokerUnreachableError(
                f"no broker answered DescribeCluster within {self.timeout_s:.0f}s ({exc})"
                + (f"; the client reported: {why}" if why else "")
            ) from exc

    def topic_partitions(self, topic: str) -> int | None:
        """How many partitions ``topic`` has (None: it does not exist, or has no leaders yet)."""
        md = self._admin.list_topics(topic=topic, timeout=self.timeout_s)
        t = md.topics.get(topic)
        if t is not None and t.error is not None and t.error.name() == "TOPIC_AUTHORIZATION_FAILED":
            # not "missing": a principal without Read/Describe on the topic sees it as an error,
            # and waiting for it would never end (`streaming.app.errors` makes this exit 7)
            raise TopicAuthorizationError(
                f"TOPIC_AUTHORIZATION_FAILED: Not authorized to access topics: [{topic}]"
            )
        if t is None or t.error is not None or not t.partitions:
            return None
        if any(p.leader < 0 for p in t.partitions.values()):
            return None
        return len(t.partitions)

    def delete_retention_ms(self, topic: str) -> int | None:
        """The topic's ``delete.retention.ms`` (how long tombstones survive compaction)."""
        from confluent_kafka.admin import ConfigResource

        res = ConfigResource(ConfigResource.Type.TOPIC, topic)
        try:
            configs = self._admin.describe_configs([res], request_timeout=self.timeout_s)[res].result(
                self.timeout_s
            )
        except Exception:  # no topic yet, or no DescribeConfigs permission: unknown
            return None
        entry = configs.get("delete.retention.ms")
        return int(entry.value) if entry is not None and entry.value is not None else None

    def log_start_offsets(self, topic: str) -> dict[int, int]:
        """Each partition's log start offset (ListOffsets EARLIEST); ``{}`` when the topic or its
        partitions are not known."""
        from confluent_kafka import TopicPartition
        from confluent_kafka.admin import OffsetSpec

        n = self.topic_partitions(topic)
        if not n:
            return {}
        request = {TopicPartition(topic, p): OffsetSpec.earliest() for p in range(n)}
        answers = self._admin.list_offsets(request, request_timeout=self.timeout_s)
        return {tp.partition: int(f.result(self.timeout_s).offset) for tp, f in answers.items()}

    def list_groups(self) -> GroupListing:
        result = self._admin.list_consumer_groups(request_timeout=self.timeout_s).result(self.timeout_s)
        groups = {g.group_id: (_name(getattr(g, "type", None)), _name(g.state)) for g in result.valid}
        return GroupListing(groups, tuple(str(e) for e in result.errors))


def _name(enum_value: Any) -> str:
    """``ConsumerGroupType.CLASSIC`` -> "classic"; None -> "unknown"."""
    if enum_value is None:
        return "unknown"
    return str(getattr(enum_value, "name", enum_value)).lower()


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
