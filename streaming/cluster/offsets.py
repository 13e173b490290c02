"""Log offsets of the partitions the mirrored groups use, and the cluster's topic ids, through the
driver's Admin client (`streaming.cluster.groups.ClusterClient`; no Spark).

A round (`OffsetReader.read`) asks, for a set of topic-partitions:

* ``ListOffsets`` three times -- earliest (log-start offset), latest under read_uncommitted (the
  high watermark) and latest under read_committed (the last stable offset, LSO), in flight
  together; the client groups each by leader, so a round costs three requests per broker whatever
  the number of partitions;
* ``Metadata`` once (which topics exist) and ``DescribeTopics`` for topics not described yet
  (their topic ids, in Kafka's own text form: the form the coordinator's records carry), every
  topic again every ``describe_every`` rounds (a topic deleted and re-created under its name gets
  a new id).

A partition the cluster does not have (a deleted topic) is reported in ``missing_topics``; one the
principal may not Describe in ``denied_topics`` (a missing ACL: logged once per topic, counted,
shown by the lag API) -- never raised.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable

from decoders.uuids import canonical_uuid
from streaming.cluster.groups import TOPIC_AUTHORIZATION_FAILED, ClusterClient
from streaming.cluster.jvm import KafkaCallError
from streaming.health.lag import LogOffsets, PartitionEnds

log = logging.getLogger("coordinator_mirror.offsets")

Tp = tuple[str, int]


class OffsetReader:
    def __init__(self, client: ClusterClient, *, describe_every: int = 30) -> None:
        self.client = client
        self.describe_every = describe_every
        self.names: dict[str, str] = {}  # topic id -> name
        self._described: set[str] = set()
        self._denied_logged: set[str] = set()
        self._rounds = 0

    def _describe(self, topics: Iterable[str]) -> int:
        names = sorted(topics)
        if not names:
            return 0
        for name, (tid, _error) in self.client.topic_ids(names).items():
            if tid is not None:
                # Kafka's text already (Uuid.toString()); canonical_uuid is the one place any
                # client's other form would be converted
                self.names[canonical_uuid(tid)] = name
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
            existing = self.client.topic_names()
            requests += 1
            self._rounds += 1
            refresh = self._rounds % self.describe_every == 1
            todo = existing if refresh else existing - self._described
            if refresh:
                self.names = {tid: n for tid, n in self.names.items() if n in existing}
            requests += self._describe(todo)
            wanted = list(wanted)
            subscribed = list(subscribed)
            # Metadata lists neither a deleted topic nor one the principal may not Describe: ask
            # for the unseen ones by name, which tells the two apart (never "deleted" for an ACL)
            unseen = sorted(
                {t for t, _ in wanted if t not in existing} | {t for t in subscribed if t not in existing}
            )
            states = self.client.topic_ids(unseen) if unseen else {}
            requests += 1 if unseen else 0
            denied = {t for t, (_tid, error) in states.items() if error == TOPIC_AUTHORIZATION_FAILED}
            missing = frozenset(t for t in unseen if t not in denied)
            by_topic: dict[str, list[int]] = {}
            for t, p in sorted({(t, p) for t, p in wanted if t in existing}):
                by_topic.setdefault(t, []).append(p)
            parts: dict[Tp, PartitionEnds] = {}
            if by_topic:
                requests += 3
                for tp, o in self.client.list_offsets(by_topic).items():
                    if o.error == TOPIC_AUTHORIZATION_FAILED:
                        denied.add(tp[0])
                    elif not o.error and o.high_watermark >= 0:
                        stable = o.stable if o.stable >= 0 else o.high_watermark
                        earliest = o.earliest if o.earliest >= 0 else None
                        parts[tp] = PartitionEnds(earliest, o.high_watermark, stable)
            self._log_denied(denied)
            return LogOffsets(
                at_ms,
                parts,
                dict(self.names),
                missing,
                round_seconds=time.monotonic() - started,
                requests=requests,
                denied_topics=frozenset(denied),
            )
        except KafkaCallError as exc:
            log.warning("log offsets round failed: %s", exc.innermost)
            return LogOffsets(
                at_ms, {}, dict(self.names), frozenset(), time.monotonic() - started, requests, exc.innermost
            )

    def _log_denied(self, denied: set[str]) -> None:
        """One warning per topic the principal may not Describe (a missing ACL), not one per round."""
        new = sorted(denied - self._denied_logged)
        if new:
            self._denied_logged |= set(new)
            log.warning(
                "lag: not authorized to describe %d topic(s) (%s%s): their log offsets, and so the "
                "lag of the groups that commit to them, are unknown -- grant the mirror's principal "
                "Describe on them (docs: Security, ACLs)",
                len(new),
                ", ".join(new[:5]),
                ", ..." if len(new) > 5 else "",
            )
