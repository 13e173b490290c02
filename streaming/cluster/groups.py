"""The coordinators' own list of groups (Admin ListGroups) and a liveness check, through confluent-kafka.

Cheap on purpose: ListGroups is one request per broker and answers names, types and states only.
What Kafka 4.3.1 lists (checked on the lab broker): classic groups (also the "simple" groups that
only have offsets, as type CLASSIC, state EMPTY), KIP-848 consumer groups (type CONSUMER), share and
streams groups -- every group the coordinator keeps in memory, which is every group the log
describes.  A broker still loading a coordinator partition answers COORDINATOR_LOAD_IN_PROGRESS for
it: such a round is partial and must not count (`GroupListing.complete`).

(Not ``list_consumer_group_offsets``: librdkafka 2.16 crashes the process on it against 4.3.)

ListGroups runs in a child process (`list_groups_isolated`): librdkafka 2.16's parse of its answer
crashed the mirror's process -- SIGSEGV in ``rd_list_add`` under
``rd_kafka_ListConsumerGroupsResponse_parse`` on the librdkafka main thread (core dumps of two
100k-group bench runs, one of them with the bench's own clients in another process), 1-2 minutes
into the reconciliation rounds.  Not reproduced outside the mirror's process (list_groups alone,
100k groups, under CPU and commit load: 0 crashes in 25 calls), so the trigger is not known; in a
child, a crash costs one reconciliation round (counted as an error, retried at the next), never the
mirror.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from collections.abc import Mapping, Sequence
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


class ListGroupsCrashedError(RuntimeError):
    """The child process that asked ListGroups died (a signal) or answered nothing readable."""


#: the child that asks ListGroups (`list_groups_isolated`): this interpreter, this module
LIST_GROUPS_CHILD: Sequence[str] = (sys.executable, "-m", "streaming.cluster.groups")


def list_groups_isolated(
    bootstrap: str,
    options: Mapping[str, str],
    timeout_s: float,
    child: Sequence[str] = LIST_GROUPS_CHILD,
) -> GroupListing:
    """Admin ListGroups through librdkafka in a child process (see the module docstring).  The
    settings reach it on stdin (the options may hold credentials: never on a command line)."""
    request = json.dumps({"bootstrap": bootstrap, "options": dict(options), "timeout_s": timeout_s})
    try:
        done = subprocess.run(
            list(child),
            input=request,
            capture_output=True,
            text=True,
            timeout=3 * timeout_s + 30,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raise ListGroupsCrashedError(f"the ListGroups child did not answer in {exc.timeout:.0f}s") from None
    if done.returncode < 0:
        name = signal.Signals(-done.returncode).name
        raise ListGroupsCrashedError(f"the ListGroups child (librdkafka) died of {name}")
    try:
        answer = json.loads(done.stdout)
    except ValueError:
        why = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise ListGroupsCrashedError(f"the ListGroups child exited {done.returncode}: {why}") from None
    if "error" in answer:
        raise ListGroupsCrashedError(str(answer["error"]))
    return GroupListing({g: (t, st) for g, (t, st) in answer["groups"].items()}, tuple(answer["errors"]))


def _list_groups_child() -> int:
    """The child's side: settings on stdin, the listing as JSON on stdout."""
    from confluent_kafka.admin import AdminClient

    request = json.loads(sys.stdin.read())
    timeout_s = float(request["timeout_s"])
    client_log = ClientLog("groups")
    admin = None
    try:
        admin = AdminClient(driver_config(request["bootstrap"], request["options"], timeout_s, client_log))
        result = admin.list_consumer_groups(request_timeout=timeout_s).result(timeout_s + 1)
    except Exception as exc:  # the parent reports it (a failed round), with what the client said
        if admin is not None:
            admin.poll(0.5)  # serves the log and error callbacks queued so far
        why = client_log.last()
        error = f"{type(exc).__name__}: {exc}".rstrip(": ") + (f"; the client reported: {why}" if why else "")
        print(json.dumps({"error": error}))
        return 1
    groups = {g.group_id: (_name(getattr(g, "type", None)), _name(g.state)) for g in result.valid}
    print(json.dumps({"groups": groups, "errors": [str(e) for e in result.errors]}))
    return 0


class ClusterClient:
    """A confluent-kafka AdminClient for the driver's periodic reads."""

    def __init__(self, bootstrap: str, options: Mapping[str, str], timeout_s: float = 10.0) -> None:
        from confluent_kafka.admin import AdminClient

        self.bootstrap = bootstrap
        self.options = dict(options)
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
        """The coordinators' groups (in a child process: `list_groups_isolated`)."""
        return list_groups_isolated(self.bootstrap, self.options, self.timeout_s)


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


if __name__ == "__main__":
    sys.exit(_list_groups_child())
