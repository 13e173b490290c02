"""A broker's ``__consumer_offsets`` filled with real commits, and the floor of reading it back.

`preload` sends real OffsetCommit requests (AdminClient ``alter_consumer_group_offsets``: one
request per group and round, ``partitions`` partitions each, pipelined), so the coordinator writes
the records exactly as it does for a consumer: round ``r`` commits offset ``1 + r * 10 + p`` for
partition ``p`` of topic ``bench-t{g % topics}`` of group ``bench-g{g}``.  `expected_offset` is
that formula.

`floor_read` is the physical floor of reading the topic on a machine: a plain librdkafka consumer
(confluent-kafka) reading every partition from earliest to its end and doing nothing else.

Both are used by the benchmarks (bench/pipeline.py, bench/readiness.py); run them in a process of
their own when the caller also runs a JVM bridge (librdkafka#4605: a heap it corrupts brings down
whichever client runs next in the same process).
"""

from __future__ import annotations

import time
from typing import Any


def group_name(g: int) -> str:
    return f"bench-g{g}"


def topic_name(g: int, topics: int) -> str:
    return f"bench-t{g % topics}"


def expected_offset(round_: int, partition: int) -> int:
    """The offset `preload`'s round ``round_`` (0-based) commits for ``partition``."""
    return 1 + round_ * 10 + partition


def rounds_for(records: int, groups: int, partitions: int) -> int:
    return max(1, -(-records // (groups * partitions)))


def preload(
    bootstrap: str,
    records: int,
    groups: int,
    partitions: int,
    topics: int,
    *,
    log: Any = None,
) -> int:
    """Real OffsetCommit requests, ``partitions`` partitions each, pipelined; returns the records
    written (``rounds_for(...) * groups * partitions``)."""
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    names = [f"bench-t{i}" for i in range(topics)]
    for fut in admin.create_topics([NewTopic(t, partitions, 1) for t in names]).values():
        fut.result(60)
    time.sleep(2)
    rounds = rounds_for(records, groups, partitions)
    written = 0
    inflight: list[Any] = []
    started = time.monotonic()
    for r in range(rounds):
        for g in range(groups):
            req = ConsumerGroupTopicPartitions(
                group_name(g),
                [TopicPartition(topic_name(g, topics), p, expected_offset(r, p)) for p in range(partitions)],
            )
            inflight.extend(admin.alter_consumer_group_offsets([req], request_timeout=60).values())
            written += partitions
            if len(inflight) >= 2000:
                for fut in inflight:
                    fut.result(120)
                inflight.clear()
        if log is not None:
            rate = written / (time.monotonic() - started)
            log(f"preload round {r + 1}/{rounds}: {written:,} records, {rate:,.0f}/s")
    for fut in inflight:
        fut.result(120)
    return written


def floor_read(bootstrap: str, partitions: list[int], topic: str = "__consumer_offsets") -> tuple[int, float]:
    """A plain librdkafka consumer, earliest -> end of every partition, nothing else: (records,
    seconds)."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "bench-floor",  # never used for commits: assign(), no subscribe()
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "isolation.level": "read_committed",
            "log_level": 0,
        }
    )
    started = time.monotonic()
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
    pending = set(partitions)
    rows = 0
    while pending:
        for msg in consumer.consume(num_messages=100_000, timeout=1.0):
            err = msg.error()
            if err is None:
                rows += 1
            elif err.code() == KafkaError._PARTITION_EOF:
                pending.discard(msg.partition())
    elapsed = time.monotonic() - started
    consumer.close()
    return rows, elapsed


def last_group_per_partition(bootstrap: str, topic: str = "__consumer_offsets") -> dict[int, str]:
    """The group of the last offset-commit record of every partition of ``topic`` (key versions
    0 and 1: int16 version, then the group id as an int16-length string)."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "bench-last",
            "enable.auto.commit": False,
            "log_level": 0,
        }
    )
    try:
        meta = consumer.list_topics(topic, timeout=30)
        out: dict[int, str] = {}
        for p in meta.topics[topic].partitions:
            lo, hi = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)
            if hi <= lo:
                continue
            consumer.assign([TopicPartition(topic, p, max(lo, hi - 200))])
            last = None
            deadline = time.monotonic() + 30
            done = False
            while not done and time.monotonic() < deadline:
                for msg in consumer.consume(500, timeout=1):
                    if msg.error() is not None:
                        continue
                    key = msg.key() or b""
                    if len(key) >= 4 and int.from_bytes(key[:2], "big") in (0, 1):
                        n = int.from_bytes(key[2:4], "big")
                        last = key[4 : 4 + n].decode()
                    done = done or msg.offset() >= hi - 1
            if last is not None:
                out[p] = last
        return out
    finally:
        consumer.close()
