"""Kafka admin calls from the driver, through the Java client already on Spark's classpath.

Using Spark's own kafka-clients (via py4j) instead of a Python client means the driver talks to
Kafka with exactly the options the Kafka source uses -- the same ``kafka.*`` pass-through, SASL
JAAS configs and truststores included -- so a cluster the query can read is a cluster these calls
can reach.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

TIMEOUT_S = 60


def _admin(spark: SparkSession, bootstrap: str, options: Mapping[str, str]) -> Any:
    jvm = spark._jvm
    props = jvm.java.util.Properties()
    props.setProperty("bootstrap.servers", bootstrap)
    props.setProperty("client.id", "coordinator-mirror-driver")
    props.setProperty("request.timeout.ms", "30000")
    props.setProperty("default.api.timeout.ms", str(TIMEOUT_S * 1000))
    for key, value in options.items():
        props.setProperty(key, value)
    return jvm.org.apache.kafka.clients.admin.Admin.create(props)


def partition_offsets(
    spark: SparkSession, bootstrap: str, options: Mapping[str, str], topic: str
) -> tuple[dict[int, int], dict[int, int]]:
    """(earliest, end) offset per partition of ``topic``; the end is the last stable offset
    (read_committed), which is also where Spark's read_committed Kafka source stops."""
    jvm = spark._jvm
    admin = _admin(spark, bootstrap, options)
    try:
        topics = jvm.java.util.Collections.singletonList(topic)
        desc = admin.describeTopics(topics).allTopicNames().get().get(topic)
        parts = [p.partition() for p in desc.partitions()]
        ks = jvm.org.apache.kafka.clients.admin
        isolation = jvm.org.apache.kafka.common.IsolationLevel.READ_COMMITTED
        result: list[dict[int, int]] = []
        for spec in (ks.OffsetSpec.earliest(), ks.OffsetSpec.latest()):
            request = jvm.java.util.HashMap()
            for p in parts:
                request.put(jvm.org.apache.kafka.common.TopicPartition(topic, p), spec)
            answer = admin.listOffsets(request, ks.ListOffsetsOptions(isolation)).all().get()
            result.append({int(tp.partition()): int(info.offset()) for tp, info in answer.items()})
        return result[0], result[1]
    finally:
        admin.close()


def ensure_topic(
    spark: SparkSession,
    bootstrap: str,
    options: Mapping[str, str],
    name: str,
    *,
    compacted: bool,
    partitions: int = 3,
) -> bool:
    """Create ``name`` if it does not exist (returns True if created).  Replication factor is the
    broker default; a compacted topic gets ``cleanup.policy=compact``."""
    jvm = spark._jvm
    admin = _admin(spark, bootstrap, options)
    try:
        existing = set(admin.listTopics().names().get())
        if name in existing:
            return False
        optional_int = jvm.java.util.Optional.of(jvm.java.lang.Integer.valueOf(partitions))
        new_topic = jvm.org.apache.kafka.clients.admin.NewTopic(
            name, optional_int, jvm.java.util.Optional.empty()
        )
        if compacted:
            configs = jvm.java.util.HashMap()
            configs.put("cleanup.policy", "compact")
            new_topic = new_topic.configs(configs)
        try:
            admin.createTopics(jvm.java.util.Collections.singletonList(new_topic)).all().get()
        except Exception as exc:  # a concurrent creator won the race: fine
            if "TopicExistsException" not in str(exc):
                raise
            return False
        return True
    finally:
        admin.close()
