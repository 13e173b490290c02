"""Opt-in scenarios for what only the log tells (issue 26): share-group delivery state, rebalance
timings seen from the clients, commit rhythm.

Registered with :func:`~lab.scenarios.scenario` and ``default=False`` (importing this module does
not change the default set).  Each returns, beside the coordinator's read-back, what its clients
did and observed -- the facts the mirror's figures are checked against:

* ``share_acks`` -- a share consumer in explicit acknowledgement mode that accepts, releases
  (once, then accepts the redelivery) and rejects records by a fixed rule, then stops with records
  left unconsumed: the share coordinator writes ShareSnapshot/ShareUpdate records with every
  persisted delivery state (Available after a release, Acknowledged, Archived) and delivery counts
  above 1.  Facts: per (partition, offset) the last acknowledgement and how often it was delivered.
* ``share_deleted`` -- a share group that consumed, emptied and was deleted (DeleteShareGroups):
  the share coordinator's tombstones.
"""

from __future__ import annotations

import time
from collections import Counter
from typing import Any

from lab.lab import GroupView, Lab, quiet_logger
from lab.scenarios import ScenarioResult, _result, scenario

#: runs of each scenario per lab (`_again`)
_RUNS: Counter[tuple[str, str]] = Counter()


def _again(lab: Lab, scenario: str) -> str:
    """A suffix for the names of a scenario's groups and topics: "" the first time it runs on a
    lab, then "-r2", "-r3", ...: run again on the same lab (one broker per test session, several
    modules), it gets groups of its own instead of joining the first run's, whose members live on."""
    _RUNS[(lab.run_id, scenario)] += 1
    n = _RUNS[(lab.run_id, scenario)]
    return "" if n == 1 else f"-r{n}"


#: what `share_acks` does with the record at an offset (the first time it sees it)
ACCEPT, RELEASE, REJECT = "accept", "release", "reject"


def share_action(offset: int) -> str:
    """The fixed rule of `share_acks`: every 5th offset rejected, the next one released once (and
    accepted when it comes back), the rest accepted."""
    if offset % 5 == 0:
        return REJECT
    if offset % 5 == 1:
        return RELEASE
    return ACCEPT


def _share_consumer(lab: Lab, group: str, name: str, **extra: Any) -> Any:
    from confluent_kafka import ShareConsumer

    consumer = ShareConsumer(
        {
            "bootstrap.servers": lab.bootstrap,
            "group.id": group,
            "client.id": f"cm-{name}-{lab.run_id}",
            "log_level": 0,
            "logger": quiet_logger(),
            **extra,
        }
    )
    lab.adopt(consumer)
    return consumer


@scenario("share_acks", min_kafka=4, default=False)
def share_acks(lab: Lab, records_per_partition: int = 12, left_over: int = 3) -> ScenarioResult:
    """A share consumer that accepts, releases and rejects records, then leaves some unconsumed."""
    from confluent_kafka import AcknowledgeType

    kinds = {ACCEPT: AcknowledgeType.ACCEPT, RELEASE: AcknowledgeType.RELEASE, REJECT: AcknowledgeType.REJECT}
    run = _again(lab, "share_acks")
    topic = lab.topic("share-acks" + run, partitions=2, messages_per_partition=0)
    group = lab.name("share-acks" + run)
    consumer = _share_consumer(lab, group, "share-acks", **{"share.acknowledgement.mode": "explicit"})
    consumer.subscribe([topic])
    # A share group starts at the latest offset: wait until the member holds both partitions
    # before producing, so that every record is delivered to it.
    lab.wait_group(
        group,
        lambda v: v.state == "Stable" and len(v.assigned) == 2,
        what="a share member holding both partitions",
        timeout_s=60,
    )
    # The share-partitions start at the log end when they are initialised (the member's first
    # fetch, share.auto.offset.reset=latest): produce one record per partition until each
    # partition delivered one, then the scenario's records.  Every record follows the same rule.
    deliveries: dict[tuple[int, int], int] = {}
    last: dict[tuple[int, int], str] = {}
    done: set[tuple[int, int]] = set()

    def poll_once() -> None:
        batch = consumer.poll(0.5) or []
        for msg in batch:
            if msg.error() is not None:
                continue
            key = (msg.partition(), msg.offset())
            deliveries[key] = deliveries.get(key, 0) + 1
            action = share_action(msg.offset())
            if action == RELEASE and deliveries[key] > 1:
                action = ACCEPT  # the redelivery of a released record is accepted
            consumer.acknowledge(msg, kinds[action])
            last[key] = action
            if action != RELEASE:
                done.add(key)
        if batch:
            consumer.commit_sync(30)

    deadline = time.monotonic() + 90
    while {p for p, _ in deliveries} != {0, 1}:
        if time.monotonic() > deadline:
            raise TimeoutError(f"share_acks: partitions {sorted({p for p, _ in deliveries})} delivered")
        lab.produce(topic, 2, 1)
        poll_once()
    lab.produce(topic, 2, records_per_partition)
    ends = {p: e for (t, p), e in lab.ends(topic).items()}
    first = {p: min(o for q, o in deliveries if q == p) for p in ends}  # the probe before was skipped

    def pending() -> list[tuple[int, int]]:
        return [(p, o) for p, end in ends.items() for o in range(first[p], end) if (p, o) not in done]

    while time.monotonic() < deadline and pending():
        poll_once()
    if pending():
        raise TimeoutError(f"share_acks: records never settled: {pending()[:10]}")
    # records nobody consumes: lag in Kafka's view (end - start offset - delivery complete count)
    lab.produce(topic, 2, left_over)
    return _result(
        lab,
        "share_acks",
        [group],
        [topic],
        deliveries={f"{p}:{o}": n for (p, o), n in sorted(deliveries.items())},
        acknowledged={f"{p}:{o}": a for (p, o), a in sorted(last.items())},
        records_per_partition=records_per_partition,
        left_over=left_over,
    )


@scenario("share_deleted", min_kafka=4, default=False)
def share_deleted(lab: Lab) -> ScenarioResult:
    """A share group that consumed, emptied and was deleted: the share coordinator's tombstones."""
    run = _again(lab, "share_deleted")
    topic = lab.topic("share-del" + run, partitions=1, messages_per_partition=0)
    group = lab.name("share-del" + run)
    consumer = _share_consumer(lab, group, "share-del")
    consumer.subscribe([topic])
    lab.wait_group(group, lambda v: v.state == "Stable" and bool(v.assigned), what="Stable share group")
    seen = 0
    deadline = time.monotonic() + 60
    while seen < 3:  # the share-partition starts at the log end when first fetched: keep producing
        if time.monotonic() > deadline:
            raise TimeoutError(f"share_deleted: {seen} records delivered in 60s")
        lab.produce(topic, 1, 1)
        seen += sum(1 for m in consumer.poll(0.5) or [] if m.error() is None)
    consumer.commit_sync(30)
    consumer.close()

    def empty(v: GroupView) -> bool:
        return v.state == "Empty"

    lab.wait_group(group, empty, what="Empty share group")
    _delete_share_group(lab, group)  # confluent-kafka 2.16's AdminClient has no DeleteShareGroups
    lab.wait_group(group, lambda v: not v.exists, what="deleted")
    return _result(lab, "share_deleted", [group], [topic], records_seen=seen)


def _delete_share_group(lab: Lab, group: str) -> None:
    """``kafka-share-groups.sh --delete`` (Kafka's own tool, from the broker's jars)."""
    import subprocess

    from streaming.jars import kafka_classpath

    out = subprocess.run(
        ["java", "-Xmx256m", "-cp", kafka_classpath(lab.kafka_version),
         "org.apache.kafka.tools.consumer.group.ShareGroupCommand",
         "--bootstrap-server", lab.bootstrap, "--delete", "--group", group],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    if out.returncode != 0:
        raise RuntimeError(f"ShareGroupCommand --delete failed: {out.stdout[-1000:]}{out.stderr[-2000:]}")


@scenario("rebalance_timing", min_kafka=4, default=False)
def rebalance_timing(lab: Lab) -> ScenarioResult:
    """A classic and a KIP-848 group, each created by two members, then joined by a third: what
    the clients observed of each rebalance (member creation, on_assign times) as facts."""
    run = _again(lab, "rebalance_timing")
    topic = lab.topic("rt-t" + run, partitions=6)
    facts: dict[str, Any] = {}
    groups = []
    for protocol in ("classic", "consumer"):
        group = lab.name(f"rt-{protocol}{run}")
        groups.append(group)
        first: list[Any] = [
            lab.member(group, [topic], protocol=protocol, name=f"rt-{protocol}{i}") for i in range(2)
        ]
        lab.wait_stable(group, 2)
        time.sleep(1.5)  # settled: the next rebalance starts from a Stable group
        joined_at = int(time.time() * 1000)
        third = lab.member(group, [topic], protocol=protocol, name=f"rt-{protocol}2")
        lab.wait_stable(group, 3)
        members: list[Any] = [*first, third]
        _wait_called_back(members, joined_at)
        time.sleep(1.0)  # callbacks of a second round, if the broker needed one
        facts[group] = {
            "protocol": protocol,
            "created_ms": [m.created_ms for m in first],
            "first_assigned_ms": [m.assigned_at_ms[0] for m in first],
            "joined_ms": joined_at,
            # the last rebalance callback (on_assign or on_revoke: KIP-848 members that only lose
            # partitions get on_revoke alone) of each member after the third joined
            "last_callback_ms": [max(_callbacks(m, joined_at)) for m in members],
        }
    return _result(lab, "rebalance_timing", groups, [topic], timings=facts)


def _callbacks(member: Any, since_ms: int) -> list[int]:
    return [t for t in (*member.assigned_at_ms, *member.revoked_at_ms) if t >= since_ms]


def _wait_called_back(members: list[Any], since_ms: int, timeout_s: float = 30.0) -> None:
    """Until every member's rebalance callback ran after ``since_ms`` (on its poll loop)."""
    deadline = time.monotonic() + timeout_s
    while not all(_callbacks(m, since_ms) for m in members):
        if time.monotonic() > deadline:
            raise TimeoutError(f"no rebalance callback after {since_ms} for every member")
        time.sleep(0.05)


class Abandoner:
    """A classic group whose first member consumed and committed two topics and left; the member
    that replaced it subscribes to one of them only (the other topic's offsets are abandoned), and
    keeps consuming and committing about once a second (a commit rhythm) until closed."""

    def __init__(self, lab: Lab, period_s: float = 1.0) -> None:
        import threading

        from lab.scenarios import _commit_all

        self.lab = lab
        run = _again(lab, "abandoner")
        self.kept = lab.topic("ab-kept" + run, partitions=2)
        self.left = lab.topic("ab-left" + run, partitions=1)
        self.group = lab.name("abandon" + run)
        first = lab.member(self.group, [self.kept, self.left], name="ab-first")
        lab.wait_stable(self.group, 1)
        _commit_all([first], lab.ends(self.kept, self.left))
        first.close()
        self.member = lab.member(self.group, [self.kept], name="ab-second")
        lab.wait_stable(self.group, 1)
        self.period_s = period_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"abandon-{self.group}", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.period_s):
            try:
                self.lab.produce(self.kept, 2, 1)
                self.member.commit()
            except Exception:  # a rebalance or a closing lab: the next round tries again
                continue

    def close(self) -> None:
        self._stop.set()
        self._thread.join(30)
        self.member.close()
