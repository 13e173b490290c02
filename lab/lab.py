"""The lab: clients, topics, running group members and the coordinator's read-back for scenarios.

A scenario (see :mod:`lab.scenarios`) drives real consumer groups with confluent-kafka
and kafka-python against a real broker (members: :mod:`lab.members`), then asks the broker what
its group coordinator now holds (:mod:`lab.probe`).
"""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from lab.members import ChildMember, Closable, Member, RemoteMember, quiet_logger
from lab.probe import GroupView, MemberView, OffsetView, Probe, ProbeError, TopicPartitionKey
from streaming.jars import kafka_version as default_kafka_version

__all__ = [
    "ChildMember",
    "GroupView",
    "Lab",
    "Member",
    "MemberView",
    "OffsetView",
    "ProbeError",
    "RemoteMember",
    "TopicPartitionKey",
    "quiet_logger",
]


# ---------------------------------------------------------------------------------------------- lab
class Lab:
    """Everything a scenario needs: unique names, topics with data, members, and the read-back."""

    def __init__(self, bootstrap: str, kafka_version: str | None = None, run_id: str | None = None) -> None:
        from confluent_kafka.admin import AdminClient

        self.bootstrap = bootstrap
        self.kafka_version = kafka_version or default_kafka_version()
        self.run_id = run_id or uuid.uuid4().hex[:6]
        self.admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
        self.probe = Probe(bootstrap)
        self._closables: list[Closable] = []
        self._kadmin: Any = None
        self.topic_ends: dict[TopicPartitionKey, int] = {}

    @property
    def major(self) -> int:
        return int(self.kafka_version.split(".", 1)[0])

    def name(self, base: str) -> str:
        return f"{base}-{self.run_id}"

    @property
    def kadmin(self) -> Any:
        if self._kadmin is None:
            from kafka import KafkaAdminClient

            self._kadmin = KafkaAdminClient(
                bootstrap_servers=self.bootstrap, client_id=f"cm-lab-{self.run_id}"
            )
        return self._kadmin

    # -- topics --------------------------------------------------------------------------------
    def topic(self, base: str, partitions: int = 4, messages_per_partition: int = 5) -> str:
        """Create topic ``base-<run>`` (idempotent) and append messages to each partition."""
        from confluent_kafka import KafkaException
        from confluent_kafka.admin import NewTopic

        name = self.name(base)
        futures = self.admin.create_topics([NewTopic(name, partitions, 1)], operation_timeout=30)
        for fut in futures.values():
            try:
                fut.result(timeout=30)
            except KafkaException as exc:
                if exc.args[0].name() != "TOPIC_ALREADY_EXISTS":
                    raise
        deadline = time.monotonic() + 30
        while True:  # wait until every partition has a leader, so clients see the whole topic
            md = self.admin.list_topics(name, timeout=10).topics.get(name)
            if (
                md is not None
                and md.error is None
                and len(md.partitions) == partitions
                and all(p.leader >= 0 for p in md.partitions.values())
            ):
                break
            if time.monotonic() > deadline:
                raise TimeoutError(f"topic {name} has no leaders after 30s")
            time.sleep(0.1)
        self.produce(name, partitions, messages_per_partition)
        return name

    def produce(self, topic: str, partitions: int, per_partition: int) -> None:
        from confluent_kafka import Producer

        producer = Producer({"bootstrap.servers": self.bootstrap, "log_level": 0})
        for p in range(partitions):
            for i in range(per_partition):
                producer.produce(topic, value=f"m{i}".encode(), partition=p)
        if producer.flush(30) != 0:
            raise TimeoutError(f"could not produce to {topic}")
        for p in range(partitions):
            self.topic_ends[(topic, p)] = self.topic_ends.get((topic, p), 0) + per_partition

    def ends(self, *topics: str) -> dict[TopicPartitionKey, int]:
        return {tp: end for tp, end in self.topic_ends.items() if tp[0] in topics}

    # -- members -------------------------------------------------------------------------------
    def member(self, group: str, topics: list[str], **kwargs: Any) -> Member | RemoteMember:
        """A member polling in a thread of this process (confluent-kafka: librdkafka has its own
        threads) or, for kafka-python, in a process of its own (see :class:`RemoteMember`)."""
        if kwargs.get("client") == "kafka-python":
            m: Member | RemoteMember = RemoteMember(self.bootstrap, group, topics, **kwargs)
        else:
            m = Member(self.bootstrap, group, topics, **kwargs)
        self._closables.append(m)
        return m

    def child_member(self, group: str, topic: str, **kwargs: Any) -> ChildMember:
        m = ChildMember(self.bootstrap, group, topic, **kwargs)
        self._closables.append(m)
        return m

    def adopt(self, closable: Closable) -> None:
        self._closables.append(closable)

    # -- read-back -----------------------------------------------------------------------------
    def describe(self, *group_ids: str) -> dict[str, GroupView]:
        return self.probe.describe(group_ids)

    def wait_group(
        self, group_id: str, until: Callable[[GroupView], bool], timeout_s: float = 60.0, what: str = ""
    ) -> GroupView:
        deadline = time.monotonic() + timeout_s
        while True:
            view = self.describe(group_id)[group_id]
            if until(view):
                return view
            if time.monotonic() > deadline:
                raise TimeoutError(f"group {group_id} never became {what or 'as expected'}; last seen {view}")
            time.sleep(0.3)

    def wait_committed(
        self, group_id: str, committed: Mapping[TopicPartitionKey, int], timeout_s: float = 60.0
    ) -> GroupView:
        """The group's view once the coordinator reports every offset in ``committed`` (what a
        scenario's members committed and it records as a fact).  A member's commit returns when the
        coordinator acknowledged it, yet a read-back right after it once saw an older offset (1
        instead of 5): facts and view must agree before a test compares them."""
        deadline = time.monotonic() + timeout_s
        while True:
            view = self.describe(group_id)[group_id]
            got = {tp: o.offset for tp, o in view.offsets.items() if tp in committed}
            if got == dict(committed):
                return view
            if time.monotonic() > deadline:
                wrong = {tp: (want, got.get(tp)) for tp, want in committed.items() if got.get(tp) != want}
                raise TimeoutError(
                    f"group {group_id}: the coordinator still reports other offsets than the scenario "
                    f"committed after {timeout_s:.0f}s ((topic, partition): (committed, reported)): {wrong}"
                )
            time.sleep(0.3)

    def wait_stable(self, group_id: str, members: int, timeout_s: float = 60.0) -> GroupView:
        """Stable, with ``members`` members that all own partitions and (KIP-848) have converged."""

        def ok(v: GroupView) -> bool:
            if v.state != "Stable" or len(v.members) != members:
                return False
            if not all(m.assignment for m in v.members):
                return False
            if v.type == "Consumer":
                return all(
                    m.member_epoch == v.group_epoch and m.target_assignment in (None, m.assignment)
                    for m in v.members
                )
            return True

        return self.wait_group(group_id, ok, timeout_s, what=f"Stable with {members} members")

    def close(self) -> None:
        self.close_since(0)
        if self._kadmin is not None:
            self._kadmin.close()
            self._kadmin = None

    def mark(self) -> int:
        """A point to `close_since`: what is open now stays open."""
        return len(self._closables)

    def close_since(self, mark: int) -> None:
        """Close what was opened after ``mark`` (newest first): a failed scenario's members, which
        would otherwise poll -- a kafka-python member host at most of a core -- until the lab ends."""
        while len(self._closables) > mark:
            closable = self._closables.pop()
            with contextlib.suppress(Exception):  # teardown: close everything we can
                closable.close()
