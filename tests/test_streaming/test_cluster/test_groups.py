"""The driver's reads of the session broker through Kafka's Admin client
(`streaming.cluster.groups.ClusterClient`): what the coordinators list, topic ids in Kafka's own
text form, output topics.  The lag round's log offsets: test_offsets.py."""

from __future__ import annotations

import re
import subprocess
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from streaming.cluster.groups import ClusterClient

pytestmark = [pytest.mark.broker]


@pytest.fixture(scope="module")
def client(driver_jvm: Any, kafka: Any) -> Iterator[ClusterClient]:
    c = ClusterClient(driver_jvm, kafka.bootstrap, {"max.poll.records": "7"})  # a consumer option: ignored
    yield c
    c.close()


def kafka_groups_list(bootstrap: str) -> dict[str, str]:
    """Kafka's own listing (``kafka-groups.sh --list`` of the broker's version): group -> type."""
    from streaming.jars import kafka_classpath

    out = subprocess.run(
        ["java", "-cp", kafka_classpath(), "org.apache.kafka.tools.GroupsCommand",
         "--bootstrap-server", bootstrap, "--list"],
        capture_output=True, text=True, timeout=120, check=True,
    ).stdout  # fmt: skip
    # GROUP TYPE PROTOCOL, padded with spaces (to the id's length in UTF-16 units); an id may hold
    # spaces (the UI's test group does), the protocol may be empty: the type is found from the right
    rows = [_LISTED.match(line) for line in out.splitlines()[1:] if line.strip()]
    assert all(rows), out
    return {m.group(1): m.group(2).lower() for m in rows if m is not None}


_LISTED = re.compile(r"^(.*?)\s+(Classic|Consumer|Share|Streams)(?:\s+\S+)?\s*$", re.IGNORECASE)


def test_list_groups_is_what_the_coordinators_keep_every_type(client: Any, lab: Any, scenarios: Any) -> None:
    """Every group type the 4.x coordinator keeps -- classic, consumer (KIP-848), share, streams --
    exactly as Kafka's own tool lists them; a group with offsets only is a classic group in state
    empty.  (librdkafka 2.16's ListGroups, which the mirror used before, leaves share and streams
    groups out.)"""
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
    from confluent_kafka.admin import NewTopic

    group = f"offsets-only-{uuid.uuid4().hex[:8]}"
    for fut in lab.admin.create_topics([NewTopic(group, 1, 1)]).values():
        fut.result(30)
    # group ids may hold any character: the answer crosses from the JVM as JSON
    odd = [f'{group}-"quoted"\\back\x01ctl\x7f-ünï-\U0001f600', f"{group}-" + "x" * 2000]
    for gid in [group, *odd]:
        req = ConsumerGroupTopicPartitions(gid, [TopicPartition(group, 0, 7)])
        for fut in lab.admin.alter_consumer_group_offsets([req]).values():
            fut.result(30)

    listing = client.list_groups()
    assert all(listing.groups.get(gid) == ("classic", "empty") for gid in odd), odd
    assert listing.complete
    assert {g: kind for g, (kind, _state) in listing.groups.items()} == kafka_groups_list(lab.bootstrap)
    assert listing.groups[group] == ("classic", "empty")
    kinds = {listing.groups[g][0] for r in scenarios.values() for g in r.groups if g in listing.groups}
    assert {"classic", "consumer", "share", "streams"} <= kinds


def test_topic_ids_are_kafkas_text_form(client: Any, lab: Any) -> None:
    """Uuid.toString(): URL-safe base64 without padding, the form the coordinator's records carry
    (the decoders write KIP-848 assignments' ids the same way)."""
    topic = lab.topic("ids", partitions=2, messages_per_partition=1)
    described = client.describe_topic(topic)
    assert described is not None and described[1:] == (2, 0)
    ids = client.topic_ids([topic, "no-such-topic"])
    assert ids == {topic: (described[0], 0), "no-such-topic": (None, 3)}  # UNKNOWN_TOPIC_OR_PARTITION
    assert re.fullmatch(r"[A-Za-z0-9_-]{22}", described[0])


def test_ensure_topic_creates_once_compacted(client: Any, lab: Any) -> None:
    name = f"out-{uuid.uuid4().hex[:8]}"
    assert client.ensure_topic(name, compacted=True) is True
    assert client.ensure_topic(name, compacted=True) is False
    from confluent_kafka.admin import ConfigResource

    res = ConfigResource(ConfigResource.Type.TOPIC, name)
    config = lab.admin.describe_configs([res])[res].result(30)
    assert config["cleanup.policy"].value == "compact"
    assert client.delete_retention_ms(name) == int(config["delete.retention.ms"].value)


def test_a_call_with_a_timeout_of_its_own(driver_jvm: Any, client: Any, lab: Any) -> None:
    """`describe_topic(..., timeout_s)` (the source check's request): answered as without it from a
    broker that answers; from a cluster that does not (nothing listens at the address) it fails
    after its own timeout -- not after the client's 30 s (``default.api.timeout.ms``)."""
    import time

    from lab.proc import free_port
    from streaming.cluster.jvm import KafkaCallError

    topic = lab.topic("timeout", partitions=2, messages_per_partition=1)
    assert client.describe_topic(topic, timeout_s=5) == client.describe_topic(topic)
    assert client.topic_partitions(topic, timeout_s=5) == 2
    nobody = ClusterClient(driver_jvm, f"127.0.0.1:{free_port()}", {}, timeout_s=30)
    try:
        began = time.monotonic()
        with pytest.raises(KafkaCallError) as caught:
            nobody.topic_partitions(topic, timeout_s=1.5)
        took = time.monotonic() - began
    finally:
        nobody.close()
    assert caught.value.has("TimeoutException"), caught.value
    assert 1.0 <= took < 10, took
