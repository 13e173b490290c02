"""The coordinator's read-back for scenarios: :class:`Probe` and the views it returns.

:class:`Probe` runs our ``GroupProbe`` Java helper on Kafka's own AdminClient: it is the only
client that reports KIP-848 / share / streams epochs (confluent-kafka's describe does not), and it
lists committed offsets without librdkafka 2.16's crash on ``list_consumer_group_offsets`` for a
whole group.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from streaming.jars import kafka_version as default_kafka_version
from streaming.jars import probe_classpath

TopicPartitionKey = tuple[str, int]


# --------------------------------------------------------------------------------------------- views
@dataclass(frozen=True)
class OffsetView:
    offset: int
    leader_epoch: int | None
    metadata: str


@dataclass(frozen=True)
class MemberView:
    member_id: str
    group_instance_id: str | None
    client_id: str
    host: str
    #: sorted (topic, partition) pairs; streams members list (subtopology, partition) of active tasks
    assignment: tuple[TopicPartitionKey, ...]
    member_epoch: int | None = None
    target_assignment: tuple[TopicPartitionKey, ...] | None = None
    rack_id: str | None = None


@dataclass(frozen=True)
class GroupView:
    """What the group coordinator holds for one group, as Kafka's AdminClient reports it."""

    group_id: str
    exists: bool
    #: Kafka's GroupType: Classic, Consumer, Share, Streams (None when the group does not exist)
    type: str | None = None
    #: Kafka's GroupState name: Stable, Empty, Dead, PreparingRebalance, Assigning, ...
    state: str | None = None
    #: the listing's protocol type ("consumer" for classic consumer groups, "" for simple ones)
    protocol_type: str | None = None
    #: classic: the selected protocol (assignor); KIP-848: the server assignor
    assignor: str | None = None
    simple: bool = False
    group_epoch: int | None = None
    target_assignment_epoch: int | None = None
    members: tuple[MemberView, ...] = ()
    offsets: Mapping[TopicPartitionKey, OffsetView] = field(default_factory=dict)
    raw: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)

    def member(self, *, instance_id: str | None = None, member_id: str | None = None) -> MemberView:
        for m in self.members:
            if (instance_id is not None and m.group_instance_id == instance_id) or (
                member_id is not None and m.member_id == member_id
            ):
                return m
        raise KeyError(instance_id or member_id)

    @property
    def assigned(self) -> frozenset[TopicPartitionKey]:
        return frozenset(tp for m in self.members for tp in m.assignment)

    @classmethod
    def from_probe(cls, obj: Mapping[str, Any]) -> GroupView:
        offsets = {
            (o["topic"], int(o["partition"])): OffsetView(
                offset=int(o["offset"]), leader_epoch=o.get("leader_epoch"), metadata=o.get("metadata") or ""
            )
            for o in obj.get("offsets", [])
        }
        members = []
        for m in obj.get("members", []):
            if "active_tasks" in m:
                assignment = tuple(
                    sorted((t["subtopology"], int(p)) for t in m["active_tasks"] for p in t["partitions"])
                )
            else:
                assignment = tuple(sorted((t, int(p)) for t, p in m.get("assignment", [])))
            target = m.get("target_assignment")
            members.append(
                MemberView(
                    member_id=m["member_id"],
                    group_instance_id=m.get("group_instance_id"),
                    client_id=m.get("client_id", ""),
                    host=m.get("host", ""),
                    assignment=assignment,
                    member_epoch=m.get("member_epoch"),
                    target_assignment=None
                    if target is None
                    else tuple(sorted((t, int(p)) for t, p in target)),
                    rack_id=m.get("rack_id"),
                )
            )
        return cls(
            group_id=obj["group_id"],
            exists=bool(obj.get("exists")),
            type=obj.get("type"),
            state=obj.get("state"),
            protocol_type=obj.get("protocol"),
            assignor=obj.get("assignor") or None,
            simple=bool(obj.get("simple", False)),
            group_epoch=obj.get("group_epoch"),
            target_assignment_epoch=obj.get("target_assignment_epoch"),
            members=tuple(sorted(members, key=lambda m: (m.group_instance_id or "", m.member_id))),
            offsets=offsets,
            raw=dict(obj),
        )


class ProbeError(RuntimeError):
    pass


class Probe:
    """Runs ``GroupProbe`` (Java, Kafka's AdminClient) and parses its JSON lines."""

    def __init__(self, bootstrap: str, kafka_version: str | None = None) -> None:
        self.bootstrap = bootstrap
        # The probe always runs on the newest client jars: they talk to 3.x brokers too.
        self.classpath = probe_classpath(kafka_version or default_kafka_version())

    def describe(self, group_ids: Iterable[str]) -> dict[str, GroupView]:
        ids = list(dict.fromkeys(group_ids))
        if not ids:
            return {}
        cmd = ["java", "-Xmx256m", "-XX:TieredStopAtLevel=1", "-cp", self.classpath, "GroupProbe"]
        out = subprocess.run(
            [*cmd, "describe", self.bootstrap, *ids], capture_output=True, text=True, timeout=120, check=False
        )
        if out.returncode != 0:
            raise ProbeError(f"GroupProbe failed ({out.returncode}): {out.stderr[-2000:]}")
        views: dict[str, GroupView] = {}
        for raw in out.stdout.splitlines():
            line = raw.strip()
            if line.startswith("{"):
                view = GroupView.from_probe(json.loads(line))
                views[view.group_id] = view
        missing = set(ids) - set(views)
        if missing:
            raise ProbeError(f"GroupProbe printed nothing for {sorted(missing)}: {out.stderr[-2000:]}")
        return views
