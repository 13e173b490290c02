"""Log offsets of the partitions the mirrored groups use (`streaming.cluster.offsets.OffsetReader`)
through the driver's Admin client, on the session broker: a lag round's earliest, high-watermark
and stable offsets, topics gone, topic names."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from streaming.cluster.groups import ClusterClient
from streaming.cluster.offsets import OffsetReader

pytestmark = [pytest.mark.broker]


@pytest.fixture(scope="module")
def client(driver_jvm: Any, kafka: Any) -> Iterator[ClusterClient]:
    c = ClusterClient(driver_jvm, kafka.bootstrap, {})
    yield c
    c.close()


def test_partition_offsets_and_a_lag_round(client: Any, lab: Any) -> None:
    topic = lab.topic("offsets", partitions=3, messages_per_partition=4)
    starts, ends = client.partition_offsets(topic)
    assert starts == {0: 0, 1: 0, 2: 0} and ends == {0: 4, 1: 4, 2: 4}
    reader = OffsetReader(client)
    r = reader.read([(topic, 0), (topic, 2), ("gone-topic", 0)], subscribed=["gone-too"])
    assert r.error is None and not r.denied_topics
    assert {tp: (e.earliest, e.high_watermark, e.stable) for tp, e in r.partitions.items()} == {
        (topic, 0): (0, 4, 4),
        (topic, 2): (0, 4, 4),
    }
    assert r.missing_topics == {"gone-topic", "gone-too"}
    assert topic in r.topic_names.values()
