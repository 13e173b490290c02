"""Log offsets of the partitions the mirrored groups use, and the cluster's topic ids, through
confluent-kafka's AdminClient (no Spark).

A round (`OffsetReader.read`) asks, for a set of topic-partitions:

* ``ListOffsets`` three times -- earliest (log-start offset), latest under read_uncommitted (the
  high watermark) and latest under read_committed (the last stable offset, LSO).  librdkafka
  groups each call's partitions by leader, so a round costs three requests per broker whatever
  the number of partitions;
* ``Metadata`` once (which topics exist) and ``DescribeTopics`` for topics not described yet
  (their topic ids), every topic again every ``describe_every`` rounds (a topic deleted and
  re-created under its name gets a new id).

A partition the cluster does not have (a deleted topic) is reported in ``missing_topics``, never
raised.  Note: librdkafka's ListConsumerGroupOffsets crashes against Kafka 4.3; ListOffsets and
DescribeTopics are fine (tests/test_streaming/test_lag_live.py runs them against the session broker).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping

from confluent_kafka import IsolationLevel, KafkaException, TopicCollection, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

from decoders.uuids import canonical_uuid
from streaming.cluster.client_config import ClientLog, ClientOptionError, driver_config
from streaming.serving.lag import LogOffsets, PartitionEnds

log = logging.getLogger("coordinator_mirror.offsets")

Tp = tuple[str, int]


class OffsetReader:
    def __init__(
        self,
        bootstrap: str,
        options: Mapping[str, str] | None = None,  # the mirror's Java-style kafka_options
        *,
        timeout_s: float = 10.0,
        describe_every: int = 30,
    ) -> None:
        self.log = ClientLog("offsets")
        conf = driver_config(bootstrap, options or {}, timeout_s, self.log)
        try:
            self.admin = AdminClient(conf)
        except KafkaException as exc:  # an option librdkafka rejects (librdkafka.<name> passes any)
            raise ClientOptionError(str(exc.args[0].str() if exc.args else exc)) from None
        self.timeout_s = timeout_s
        self.describe_every = describe_every
        self.names: dict[str, str] = {}  # topic id -> name
        self._described: set[str] = set()
        self._rounds = 0

    # -- topic ids ------------------------------------------------------------------------------
    def _topics(self) -> set[str]:
        md = self.admin.list_topics(timeout=self.timeout_s)
        return {t for t in md.topics if not md.topics[t].error}

    def _describe(self, topics: Iterable[str]) -> int:
        names = sorted(topics)
        if not names:
            return 0
        futures = self.admin.describe_topics(TopicCollection(names), request_timeout=self.timeout_s)
        for name, fut in futures.items():
            try:
                desc = fut.result()
            except KafkaException:
                continue  # deleted in between
            tid = getattr(desc, "topic_id", None)
            if tid is not None:
                self.names[canonical_uuid(tid)] = name  # Kafka's text, not librdkafka's base64
            self._described.add(name)
        return 1

    # -- a round ----------------------------------------------------------------------------------
    def read(self, wanted: Iterable[Tp], subscribed: Iterable[str] = ()) -> LogOffsets:
        """One round over ``wanted`` partitions; ``subscribed`` topics are only checked against
        the cluster's metadata (reported in ``missing_topics`` when it does not have them)."""
        started = time.monotonic()
        at_ms = int(time.time() * 1000)
        requests = 0
        try:
            existing = self._topics()
            requests += 1
            self._rounds += 1
            refresh = self._rounds % self.describe_every == 1
            todo = existing if refresh else existing - self._described
            if refresh:
                live = set(existing)
                self.names = {tid: n for tid, n in self.names.items() if n in live}
            requests += self._describe(todo)
            wanted = list(wanted)
            asked = sorted({(t, p) for t, p in wanted if t in existing})
            missing = frozenset(t for t, _ in wanted if t not in existing) | frozenset(
                t for t in subscribed if t not in existing
            )
            parts: dict[Tp, PartitionEnds] = {}
            if asked:
                earliest = self._list(asked, OffsetSpec.earliest(), IsolationLevel.READ_UNCOMMITTED)
                hwm = self._list(asked, OffsetSpec.latest(), IsolationLevel.READ_UNCOMMITTED)
                lso = self._list(asked, OffsetSpec.latest(), IsolationLevel.READ_COMMITTED)
                requests += 3
                for tp in asked:
                    if tp in hwm:
                        parts[tp] = PartitionEnds(earliest.get(tp), hwm[tp], lso.get(tp, hwm[tp]))
            return LogOffsets(
                at_ms,
                parts,
                dict(self.names),
                missing,
                round_seconds=time.monotonic() - started,
                requests=requests,
            )
        except KafkaException as exc:
            log.warning("log offsets round failed: %s", exc)
            return LogOffsets(
                at_ms, {}, dict(self.names), frozenset(), time.monotonic() - started, requests, str(exc)
            )

    def _list(self, tps: list[Tp], spec: OffsetSpec, isolation: IsolationLevel) -> dict[Tp, int]:
        request = {TopicPartition(t, p): spec for t, p in tps}
        futures = self.admin.list_offsets(request, isolation_level=isolation, request_timeout=self.timeout_s)
        out: dict[Tp, int] = {}
        for tp, fut in futures.items():
            try:
                out[(tp.topic, tp.partition)] = int(fut.result().offset)
            except KafkaException:
                continue  # this partition only (deleted topic, leader moving): next round
        return out
