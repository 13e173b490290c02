"""The coordinators' group list (Admin ListGroups) is asked in a child process: the same answer as
librdkafka in this process, and a child that crashes is a failed call, never a crashed mirror."""

from __future__ import annotations

import sys
import uuid
from typing import Any

import pytest

from streaming.cluster.groups import ClusterClient, ListGroupsCrashedError, list_groups_isolated

pytestmark = [pytest.mark.broker]


def test_the_child_lists_what_the_coordinator_keeps(kafka: Any) -> None:
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    group = f"list-groups-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": kafka.bootstrap, "log_level": 0})
    for fut in admin.create_topics([NewTopic(group, 1, 1)]).values():
        fut.result(30)
    req = ConsumerGroupTopicPartitions(group, [TopicPartition(group, 0, 7)])
    for fut in admin.alter_consumer_group_offsets([req]).values():
        fut.result(30)

    direct = admin.list_consumer_groups(request_timeout=10).result(10)
    listing = ClusterClient(kafka.bootstrap, {}).list_groups()
    assert listing.complete
    assert group in {g.group_id for g in direct.valid}
    assert listing.groups[group] == ("classic", "empty")  # a group with offsets only
    assert set(listing.groups) == {g.group_id for g in direct.valid}


def test_a_crashing_child_is_a_failed_call(kafka: Any) -> None:
    segfault = [sys.executable, "-c", "import ctypes; ctypes.string_at(0)"]
    with pytest.raises(ListGroupsCrashedError, match="died of SIGSEGV"):
        list_groups_isolated(kafka.bootstrap, {}, 5.0, child=segfault)
    garbage = [sys.executable, "-c", "import sys; print('not json'); sys.exit(3)"]
    with pytest.raises(ListGroupsCrashedError, match="exited 3"):
        list_groups_isolated(kafka.bootstrap, {}, 5.0, child=garbage)


def test_an_unreachable_cluster_is_a_partial_answer_not_an_empty_cluster() -> None:
    """No broker answered: an incomplete listing (the reconciliation skips the round), never an
    empty list that would make every mirrored group look deleted."""
    listing = list_groups_isolated("127.0.0.1:1", {}, 2.0)
    assert not listing.complete and listing.groups == {}
    assert "Timed out" in listing.errors[0]
