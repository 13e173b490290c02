"""A mirror on a broker of its own (the fresh-cluster and outage suites): committing, creating the topic,
reading /metrics and the mirrored groups, and one uninterrupted reference run."""

from __future__ import annotations

import re
import time
import urllib.parse
import urllib.request
from typing import Any

from tests.support.http import get
from tests.support.waiting import wait_for

TOPIC = "fresh-t"


def _metrics(base: str) -> str:
    with urllib.request.urlopen(f"{base}/metrics", timeout=30) as resp:
        return str(resp.read().decode())


def metric(text: str, name: str, **labels: str) -> float:
    """The sum of ``name``'s samples whose labels include ``labels`` (0 if none)."""
    total = 0.0
    for line in text.splitlines():
        m = re.match(rf"^{name}(\{{[^}}]*\}})? (\S+)$", line)
        if m and all(f'{k}="{v}"' in (m.group(1) or "") for k, v in labels.items()):
            total += float(m.group(2))
    return total


_wait = wait_for


def _group(base: str, gid: str) -> tuple[int, Any]:
    return get(f"{base}/groups/{urllib.parse.quote(gid, safe='')}")


def mirrored(base: str) -> dict[str, Any]:
    """Every group's ``GET /groups/{id}`` body, by group id."""
    return {g["group_id"]: _group(base, g["group_id"])[1] for g in get(f"{base}/groups")[1]["groups"]}


def uninterrupted_run(settings: Any, spark: Any) -> dict[str, Any]:
    """A fresh mirror over the same log until ready and one more batch: what a run without the
    fault ends with (`mirrored`)."""
    from tests.support.live_mirror import RunningMirrors

    with RunningMirrors(spark) as running:
        reference = running.start(settings)
        assert reference.wait_ready(900)
        reference.wait_batches(1, 300)
        return mirrored(reference.http.url)


def _commit(bootstrap: str, group: str, offsets: dict[int, int]) -> None:
    """Commit through the Admin API, retried until every partition is accepted: right after the
    coordinator created `__consumer_offsets` (a new cluster) a partition may still be loading, and
    librdkafka reports that per partition, not as a failed future."""
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    deadline = time.monotonic() + 180
    while True:
        req = ConsumerGroupTopicPartitions(group, [TopicPartition(TOPIC, p, o) for p, o in offsets.items()])
        errors: list[Any] = []
        try:
            # generous timeouts: the test machine may be loaded far beyond its cores
            for fut in admin.alter_consumer_group_offsets([req], request_timeout=120).values():
                errors = [tp.error for tp in fut.result(150).topic_partitions if tp.error is not None]
        except Exception as exc:  # e.g. COORDINATOR_LOAD_IN_PROGRESS for the whole request
            errors = [exc]
        if not errors:
            return
        assert time.monotonic() < deadline, f"commit of {group} not accepted: {errors}"
        time.sleep(1.0)


def _create_topic(bootstrap: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    for fut in admin.create_topics([NewTopic(TOPIC, 2, 1)], request_timeout=120).values():
        fut.result(150)
