"""Workloads for issue 38's live checks: topics with a retention of seconds, producers at a steady
rate, groups that commit where a test says and stop.

* `short_retention_topic` -- a topic whose broker rolls a segment every ``segment_ms`` and deletes
  segments older than ``retention_ms`` (the lab's brokers check every second,
  `lab.broker.BrokerSettings.log_retention_check_interval_ms`): its log start offset moves while
  records are produced;
* `SteadyProducer` -- records at a fixed rate to every partition of a topic, in a thread, until
  closed (``rate`` changeable while it runs);
* `commit_and_stop` -- a real consumer of the group reads up to the given offsets, commits them and
  leaves: a stopped group whose committed offsets the test knows;
* `PacedConsumer` -- a real consumer that polls at a given rate and commits what it read every
  ``commit_s``, until closed (``rate`` changeable: a consumer that speeds up; ``drained_ms``: when
  it found nothing left to read).
"""

from __future__ import annotations

import contextlib
import threading
import time
from typing import Any

from lab.lab import Lab, quiet_logger


def short_retention_topic(lab: Lab, base: str, partitions: int, *, segment_ms: int, retention_ms: int) -> str:
    """A topic ``base-<run>`` with ``segment.ms`` and ``retention.ms`` of the given values."""
    from confluent_kafka.admin import NewTopic

    name = lab.name(base)
    config = {"segment.ms": str(segment_ms), "retention.ms": str(retention_ms), "cleanup.policy": "delete"}
    for fut in lab.admin.create_topics(
        [NewTopic(name, partitions, 1, config=config)], operation_timeout=30
    ).values():
        fut.result(timeout=30)
    deadline = time.monotonic() + 30
    while True:
        md = lab.admin.list_topics(name, timeout=10).topics.get(name)
        if (
            md is not None
            and md.error is None
            and len(md.partitions) == partitions
            and all(p.leader >= 0 for p in md.partitions.values())
        ):
            return name
        if time.monotonic() > deadline:
            raise TimeoutError(f"topic {name} has no leaders after 30s")
        time.sleep(0.1)


def log_offsets(lab: Lab, topic: str, partitions: int) -> dict[int, tuple[int, int]]:
    """Kafka's own view: partition -> (log start offset, high watermark)."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": lab.bootstrap, "group.id": "cm-lab-offsets", "log_level": 0})
    try:
        return {
            p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=30, cached=False)
            for p in range(partitions)
        }
    finally:
        c.close()


class SteadyProducer:
    """``rate`` records per second to each partition of ``topic`` until `close`."""

    def __init__(self, lab: Lab, topic: str, partitions: int, rate: float) -> None:
        from confluent_kafka import Producer

        self.topic, self.partitions, self.rate = topic, partitions, rate
        self.sent = 0
        self._producer = Producer({"bootstrap.servers": lab.bootstrap, "linger.ms": 5, "log_level": 0})
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"produce-{topic}", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        tick = 0.1
        owed = 0.0
        last = time.monotonic()
        while not self._stop.wait(tick):
            now = time.monotonic()  # the time that passed, not the tick: a loaded machine wakes late
            owed += self.rate * (now - last)
            last = now
            n, owed = int(owed), owed - int(owed)
            for _ in range(n):
                for p in range(self.partitions):
                    self._producer.produce(self.topic, value=b"x" * 20, partition=p)
            self.sent += n
            self._producer.poll(0)
        self._producer.flush(30)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(60)


def commit_and_stop(
    lab: Lab, group: str, topic: str, offsets: dict[int, int], *, protocol: str = "classic"
) -> None:
    """A consumer of ``group`` subscribes to ``topic``, commits ``offsets`` (partition -> offset)
    once it is assigned, and leaves the group."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer(
        {
            "bootstrap.servers": lab.bootstrap,
            "group.id": group,
            "group.protocol": protocol,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "log_level": 0,
            "logger": quiet_logger(),
        }
    )
    try:
        c.subscribe([topic])
        deadline = time.monotonic() + 60
        while not c.assignment() and time.monotonic() < deadline:
            c.poll(0.2)
        c.commit(offsets=[TopicPartition(topic, p, o) for p, o in offsets.items()], asynchronous=False)
    finally:
        c.close()


class PacedConsumer:
    """A member of ``group`` reading ``topic`` at ``rate`` records/s in all (``rate`` changeable),
    committing what it read every ``commit_s``, until `close`."""

    def __init__(self, lab: Lab, group: str, topic: str, rate: float, *, commit_s: float = 1.0) -> None:
        from confluent_kafka import Consumer

        self.rate, self.commit_s = rate, commit_s
        self.read = 0
        #: wall-clock ms of the first poll that wanted records and found none (read up to the log
        #: end) since the owner last set it to None -- the consumer's own "caught up"
        self.drained_ms: int | None = None
        self._c: Any = Consumer(
            {
                "bootstrap.servers": lab.bootstrap,
                "group.id": group,
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
                "max.poll.interval.ms": 300000,
                "log_level": 0,
                "logger": quiet_logger(),
            }
        )
        self._c.subscribe([topic])
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"paced-{group}", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        tick = 0.1
        credit = 0.0
        last_commit = last = time.monotonic()
        while not self._stop.wait(tick):
            now = time.monotonic()  # the time that passed, not the tick: a loaded machine wakes late
            credit = min(credit + self.rate * (now - last), max(1.0, self.rate))  # a second's worth at most
            last = now
            while credit >= 1:
                msgs = self._c.consume(num_messages=min(int(credit), 500), timeout=0.05)
                got = sum(1 for m in msgs if m.error() is None)
                if not got:
                    if self.drained_ms is None:
                        self.drained_ms = int(time.time() * 1000)
                    break
                credit -= got
                self.read += got
            if time.monotonic() - last_commit >= self.commit_s:
                with contextlib.suppress(Exception):  # nothing read yet: nothing to commit
                    self._c.commit(asynchronous=False)
                last_commit = time.monotonic()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(60)
        with contextlib.suppress(Exception):
            self._c.commit(asynchronous=False)
        self._c.close()
