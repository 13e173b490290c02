"""Opt-in scenarios that make brokers write record types the default library does not.

Registered with the same :func:`~lab.scenarios.scenario` decorator (so they run through
``run_scenarios(lab, names)``), all with ``default=False``: importing this module never changes the
default set that tests and the demo run.  Used by ``tests/vectors/make_vectors.py`` to collect
golden vectors from real brokers.

* ``kip848_regex`` -- a KIP-848 member subscribing by regular expression.  With
  ``group.protocol=consumer`` the regex is evaluated by the broker (KIP-848), which persists it as a
  ``ConsumerGroupRegularExpression`` record (K=16) -- the only way a broker writes K=16.
* ``kip848_java_console`` -- two KIP-848 members that are Kafka's own console consumers (the Java
  client of the broker's version) instead of librdkafka.  librdkafka needs ConsumerGroupHeartbeat
  v1 (Kafka 4.0+); 3.9's preview of KIP-848 only has v0, which the 3.9 Java client speaks.  Run
  against a 3.9 broker started with ``group.coordinator.rebalance.protocols=classic,consumer``, it
  makes 3.9's new group coordinator write its K=3..8 records (the 3.8+ layouts, as 3.9 writes them).
* ``modern_groups_deleted`` -- a KIP-848 consumer group, a share group and a streams group that
  empty and are deleted with DeleteGroups: the coordinator writes tombstones for their group-level
  records (K=3/4/6, K=11/12/15, K=17/20/23), which no default scenario does.
"""

from __future__ import annotations

import contextlib
import signal
import subprocess
import time

from lab.lab import GroupView, Lab, quiet_logger
from lab.scenarios import ScenarioResult, _commit_all, _result, _StreamsApp, scenario
from streaming.jars import kafka_classpath

#: broker settings (``BrokerSettings.extra``) under which a 3.9 broker runs ``kip848_java_console``
KIP848_PREVIEW_3_9 = {
    "group.coordinator.rebalance.protocols": "classic,consumer",
    "group.consumer.min.session.timeout.ms": "1000",
    "group.consumer.session.timeout.ms": "6000",
    "group.consumer.min.heartbeat.interval.ms": "500",
    "group.consumer.heartbeat.interval.ms": "500",
}


@scenario("kip848_regex", min_kafka=4, default=False)
def kip848_regex(lab: Lab) -> ScenarioResult:
    """A KIP-848 member subscribed to a regex (broker-side evaluation): writes K=16 records."""
    a = lab.topic("k848re-a", partitions=2)
    b = lab.topic("k848re-b", partitions=1)
    group = lab.name("kip848-regex")
    pattern = f"^k848re-.*-{lab.run_id}$"
    member = lab.member(group, [pattern], protocol="consumer", name="k848re")
    ends = lab.ends(a, b)

    def settled(v: GroupView) -> bool:
        owned = {tp for m in v.members for tp in m.assignment}
        return v.state == "Stable" and len(v.members) == 1 and owned == set(ends)

    lab.wait_group(group, settled, what="Stable with both regex-matched topics assigned")
    committed = _commit_all([member], ends)
    return _result(lab, "kip848_regex", [group], [a, b], committed=committed, pattern=pattern)


class _ConsoleConsumer:
    """``kafka-console-consumer`` (Java) in its own process; close() stops it like Ctrl-C does."""

    def __init__(self, lab: Lab, group: str, topic: str, client_id: str) -> None:
        self.proc = subprocess.Popen(
            [
                "java",
                "-Xmx192m",
                "-XX:TieredStopAtLevel=1",
                "-cp",
                kafka_classpath(lab.kafka_version),
                "org.apache.kafka.tools.consumer.ConsoleConsumer",
                "--bootstrap-server",
                lab.bootstrap,
                "--topic",
                topic,
                "--group",
                group,
                "--from-beginning",
                "--consumer-property",
                "group.protocol=consumer",
                "--consumer-property",
                f"client.id={client_id}",
                "--consumer-property",
                "auto.commit.interval.ms=1000",
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)  # shutdown hook: commit, leave the group
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


@scenario("kip848_java_console", min_kafka=3, default=False)
def kip848_java_console(lab: Lab) -> ScenarioResult:
    """Two Java console consumers in a KIP-848 group; one leaves, the other commits and stays."""
    topic = lab.topic("k848j-t", partitions=3)
    group = lab.name("kip848-java")
    first = _ConsoleConsumer(lab, group, topic, f"cm-k848j-0-{lab.run_id}")
    lab.adopt(first)
    second = _ConsoleConsumer(lab, group, topic, f"cm-k848j-1-{lab.run_id}")
    lab.adopt(second)
    lab.wait_stable(group, 2, timeout_s=90)
    ends = lab.ends(topic)

    def committed_all(v: GroupView) -> bool:
        return all((o := v.offsets.get(tp)) is not None and o.offset == end for tp, end in ends.items())

    lab.wait_group(group, committed_all, timeout_s=60, what="all partitions committed to their end")
    second.close()
    lab.wait_stable(group, 1, timeout_s=60)
    with contextlib.suppress(TimeoutError):  # auto-commit after the reassignment, if it comes
        lab.wait_group(group, committed_all, timeout_s=5)
    time.sleep(1.5)
    return _result(lab, "kip848_java_console", [group], [topic])


def _delete_groups(lab: Lab, *groups: str) -> None:
    for fut in lab.admin.delete_consumer_groups(list(groups), request_timeout=30).values():
        fut.result(timeout=30)


@scenario("modern_groups_deleted", min_kafka=4, default=False)
def modern_groups_deleted(lab: Lab) -> ScenarioResult:
    """A KIP-848, a share and a streams group each become empty and are deleted (DeleteGroups)."""
    from confluent_kafka import ShareConsumer

    topic = lab.topic("mdel-t", partitions=2)
    out = lab.topic("mdel-out", partitions=1, messages_per_partition=0)
    consumer_group = lab.name("kip848-deleted")
    share_group = lab.name("share-deleted")
    streams_group = lab.name("streams-deleted")

    member = lab.member(consumer_group, [topic], protocol="consumer", name="k848del")
    lab.wait_stable(consumer_group, 1)
    committed = _commit_all([member], lab.ends(topic))
    member.close()
    lab.wait_group(consumer_group, lambda v: v.state == "Empty", what="Empty")

    share = ShareConsumer(
        {
            "bootstrap.servers": lab.bootstrap,
            "group.id": share_group,
            "client.id": f"cm-share-del-{lab.run_id}",
            "log_level": 3,
            "logger": quiet_logger(),
        }
    )
    try:
        share.subscribe([topic])
        lab.wait_group(
            share_group,
            lambda v: v.state == "Stable" and len(v.members) == 1 and bool(v.members[0].assignment),
            what="Stable share group",
        )
    finally:
        share.close()
    lab.wait_group(share_group, lambda v: v.state == "Empty", what="Empty share group")

    proc = subprocess.Popen(
        ["java", "-Xmx256m", "-cp", lab.probe.classpath, "GroupProbe", "streams", lab.bootstrap,
         streams_group, topic, out, "600"],
        stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, text=True,
    )  # fmt: skip
    app = _StreamsApp(proc)
    try:
        lab.wait_group(
            streams_group,
            lambda v: v.state == "Stable" and len(v.members) == 1,
            timeout_s=120,
            what="Stable streams group",
        )
    finally:
        app.close()
    lab.wait_group(streams_group, lambda v: v.state == "Empty", timeout_s=60, what="Empty streams group")

    _delete_groups(lab, consumer_group, share_group, streams_group)
    groups = [consumer_group, share_group, streams_group]
    for g in groups:
        lab.wait_group(g, lambda v: not v.exists, what="deleted")
    return _result(lab, "modern_groups_deleted", groups, [topic, out], committed_before_delete=committed)
