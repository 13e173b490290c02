"""`streaming.health.lag`: who owns each partition of a group -- per kind, and for a streams group by
its tasks, read through the topology (found with three real clusters: a streams group's task
``(subtopology "0", p)`` was taken for a topic named "0", reported deleted, and the input topic's
partitions had no owner)."""

from __future__ import annotations

from lab.records import Log
from state.model import Group
from state.replay import fold
from streaming.health.lag import group_owners


def _streams_group(topology: bool = True) -> Group:
    log = Log()
    if topology:
        log.streams_topology("app", 1, ["orders", "payments"])
    log.streams_member("app", "m1")
    log.streams_epoch("app", 1, 1)
    log.streams_current("app", "m1", 2, [0, 1])
    g = fold(None, log.records).group
    assert g is not None
    return g


def test_a_streams_task_owns_its_partition_of_each_source_topic() -> None:
    owners = group_owners(_streams_group())
    assert set(owners) == {("orders", 0), ("orders", 1), ("payments", 0), ("payments", 1)}
    assert {o.consumer_id for o in owners.values()} == {"m1"}
    assert {o.client_id for o in owners.values()} == {"client-m1"}


def test_without_its_topology_a_streams_group_owns_no_partition_rather_than_a_topic_0() -> None:
    assert group_owners(_streams_group(topology=False)) == {}
