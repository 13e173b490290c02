"""Scenarios: real consumer groups that leave known coordinator state behind.

Each scenario drives real clients (confluent-kafka, kafka-python, a Kafka Streams app, a
transactional producer) against a real broker and returns a :class:`ScenarioResult`: for every
group it touched, what the group coordinator holds afterwards -- read back through Kafka's own
AdminClient (:class:`~lab.probe.GroupView`) -- plus the facts the scenario itself knows
(what it committed, which member it restarted, what it aborted).  Tests, the demo and the
benchmarks all use these functions; each name is unique per :class:`~lab.lab.Lab` run,
so scenarios can be run again and again against one broker.

Members that must stay alive for the state to hold (a Stable group needs heartbeating members) keep
running until ``lab.close()``.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from lab.lab import GroupView, Lab, TopicPartitionKey, quiet_logger


@dataclass
class ScenarioResult:
    name: str
    #: group id -> the coordinator's view after the scenario (``exists=False`` for deleted groups)
    groups: dict[str, GroupView]
    #: what the scenario did, for assertions (committed offsets, replaced member ids, ...)
    facts: dict[str, Any] = field(default_factory=dict)
    topics: list[str] = field(default_factory=list)
    finished_at_ms: int = 0

    @property
    def group(self) -> GroupView:
        """The scenario's main group (the first one)."""
        return next(iter(self.groups.values()))


ScenarioFn = Callable[[Lab], ScenarioResult]


@dataclass(frozen=True)
class Scenario:
    name: str
    fn: ScenarioFn
    #: the oldest broker major version that supports it
    min_kafka: int = 3
    #: part of the default set that tests and captures run; expiry/churn scenarios are opt-in
    default: bool = True
    doc: str = ""


SCENARIOS: dict[str, Scenario] = {}


def scenario(name: str, *, min_kafka: int = 3, default: bool = True) -> Callable[[ScenarioFn], ScenarioFn]:
    def register(fn: ScenarioFn) -> ScenarioFn:
        SCENARIOS[name] = Scenario(name, fn, min_kafka, default, (fn.__doc__ or "").strip().split("\n")[0])
        return fn

    return register


def _now_ms() -> int:
    return int(time.time() * 1000)


def _result(lab: Lab, name: str, groups: Iterable[str], topics: list[str], **facts: Any) -> ScenarioResult:
    """The scenario's facts and the coordinator's read-back of its groups; a one-group scenario's
    read-back waits (bounded) until it shows the offsets the scenario recorded as committed."""
    ids = list(groups)
    committed = facts.get("committed")
    views = (
        {ids[0]: lab.wait_committed(ids[0], committed)} if committed and len(ids) == 1 else lab.describe(*ids)
    )
    return ScenarioResult(
        name=name,
        groups=views,
        facts=facts,
        topics=topics,
        finished_at_ms=_now_ms(),
    )


def _commit_all(
    members: Iterable[Any],
    ends: dict[TopicPartitionKey, int],
    committed: dict[TopicPartitionKey, int] | None = None,
) -> dict[TopicPartitionKey, int]:
    """Let each member consume to the end of what it owns and commit; returns all committed."""
    committed = dict(committed or {})
    for m in members:
        m.wait_consumed(ends, committed)
        committed.update(m.commit())
    return committed


# ------------------------------------------------------------------------------------ classic groups
@scenario("classic_range")
def classic_range(lab: Lab) -> ScenarioResult:
    """Classic eager group, `range` assignor, two confluent-kafka members, Stable and committed."""
    topic = lab.topic("cr-t", partitions=4)
    group = lab.name("classic-range")
    members = [lab.member(group, [topic], assignor="range", name=f"cr{i}") for i in range(2)]
    lab.wait_stable(group, 2)
    committed = _commit_all(members, lab.ends(topic))
    return _result(lab, "classic_range", [group], [topic], committed=committed)


@scenario("cooperative_grow_shrink")
def cooperative_grow_shrink(lab: Lab) -> ScenarioResult:
    """Cooperative-sticky group growing 1 -> 3 members and shrinking to 2, committing at each step."""
    topic = lab.topic("coop-t", partitions=6)
    group = lab.name("coop")
    ends = lab.ends(topic)
    first = lab.member(group, [topic], assignor="cooperative-sticky", name="coop0")
    lab.wait_stable(group, 1)
    committed = _commit_all([first], ends)
    more = [lab.member(group, [topic], assignor="cooperative-sticky", name=f"coop{i}") for i in (1, 2)]
    lab.wait_stable(group, 3)
    committed = _commit_all([first, *more], ends, committed)
    more[1].close()
    view = lab.wait_stable(group, 2)
    assert sorted(view.assigned) == sorted(ends), "all partitions reassigned after shrink"
    committed = _commit_all([first, more[0]], ends, committed)
    return _result(lab, "cooperative_grow_shrink", [group], [topic], committed=committed, sizes=[1, 3, 2])


@scenario("static_restart")
def static_restart(lab: Lab) -> ScenarioResult:
    """Static members (group.instance.id): one restarts with a new member id and no rebalance."""
    topic = lab.topic("static-t", partitions=4)
    group = lab.name("static")
    a = lab.member(group, [topic], instance_id="static-a", session_timeout_ms=30000, name="sa")
    b = lab.member(group, [topic], instance_id="static-b", session_timeout_ms=30000, name="sb")
    before = lab.wait_stable(group, 2)
    committed = _commit_all([a, b], lab.ends(topic))
    old = before.member(instance_id="static-a")
    a.close()  # a static member does not send LeaveGroup (KIP-345): the coordinator keeps its slot
    a2 = lab.member(group, [topic], instance_id="static-a", session_timeout_ms=30000, name="sa2")

    def replaced(v: GroupView) -> bool:
        try:
            new = v.member(instance_id="static-a")
        except KeyError:
            return False
        return (
            v.state == "Stable"
            and len(v.members) == 2
            and new.member_id != old.member_id
            and bool(new.assignment)
        )

    after = lab.wait_group(group, replaced, what="Stable with static-a replaced")
    a2.wait_consumed(lab.ends(topic), committed)
    return _result(
        lab,
        "static_restart",
        [group],
        [topic],
        committed=committed,
        old_member_id=old.member_id,
        new_member_id=after.member(instance_id="static-a").member_id,
        assignment_kept=old.assignment == after.member(instance_id="static-a").assignment,
    )


@scenario("member_leave")
def member_leave(lab: Lab) -> ScenarioResult:
    """kafka-python group (roundrobin): three members, one leaves cleanly (LeaveGroup), two remain."""
    topic = lab.topic("leave-t", partitions=6)
    group = lab.name("leave")
    members = [
        lab.member(group, [topic], client="kafka-python", assignor="roundrobin", name=f"kp{i}")
        for i in range(3)
    ]
    lab.wait_stable(group, 3)
    committed = _commit_all(members, lab.ends(topic))
    leaver = members.pop()
    left_id = leaver.client_id
    leaver.close()
    lab.wait_stable(group, 2)
    committed = _commit_all(members, lab.ends(topic), committed)
    return _result(lab, "member_leave", [group], [topic], committed=committed, left_client_id=left_id)


@scenario("member_crash")
def member_crash(lab: Lab) -> ScenarioResult:
    """A member process is SIGKILLed; its session times out and the survivor takes its partitions."""
    topic = lab.topic("crash-t", partitions=4)
    group = lab.name("crash")
    # the crash is detected through the *child's* 3 s session; the survivor's own session is
    # longer so that a loaded machine cannot make it miss heartbeats and drop out too
    survivor = lab.member(group, [topic], session_timeout_ms=15000, name="survivor")
    lab.wait_stable(group, 1)
    child = lab.child_member(group, topic, session_timeout_ms=3000)
    lab.wait_stable(group, 2)
    child.wait_committed()
    committed = _commit_all([survivor], lab.ends(topic))
    before = lab.describe(group)[group]
    crashed = [m.member_id for m in before.members if m.client_id.startswith("cm-child-")]
    child.crash()
    after = lab.wait_stable(group, 1, timeout_s=60)
    survivor.wait_consumed(lab.ends(topic), committed)
    committed.update(survivor.commit())
    return _result(
        lab,
        "member_crash",
        [group],
        [topic],
        committed=committed,
        crashed_member_id=crashed[0] if crashed else None,
        survivor_member_id=after.members[0].member_id,
    )


@scenario("kafka_python_empty")
def kafka_python_empty(lab: Lab) -> ScenarioResult:
    """kafka-python group (range) that commits and leaves: an Empty classic group with offsets."""
    topic = lab.topic("kpe-t", partitions=3)
    group = lab.name("kp-empty")
    for attempt in range(2):
        m = lab.member(
            group,
            [topic],
            client="kafka-python",
            assignor="range",
            name="kpe" if not attempt else "kpe-again",
        )
        lab.wait_stable(group, 1)
        try:
            committed = _commit_all([m], lab.ends(topic))
            break
        except RuntimeError as exc:
            # kafka-python 3.0's IO loop, on a loaded machine, was seen to leave its member in a
            # rebalance it never finished (every commit RebalanceInProgress for 90 s, the host
            # spinning a core): restarted once, as an operator would restart the consumer
            if attempt or "RebalanceInProgress" not in str(exc):
                raise
            m.close()
            lab.wait_group(group, lambda v: v.state == "Empty", what="Empty before the restart")
    m.close()
    lab.wait_group(group, lambda v: v.state == "Empty", what="Empty")
    return _result(lab, "kafka_python_empty", [group], [topic], committed=committed)


@scenario("assign_only")
def assign_only(lab: Lab) -> ScenarioResult:
    """A consumer that assign()s partitions and commits: an offsets-only ("simple") group."""
    from kafka import KafkaConsumer
    from kafka.structs import OffsetAndMetadata, TopicPartition

    topic = lab.topic("assign-t", partitions=3)
    group = lab.name("assign-only")
    consumer = KafkaConsumer(bootstrap_servers=lab.bootstrap, group_id=group, enable_auto_commit=False)
    try:
        tps = [TopicPartition(topic, p) for p in range(3)]
        consumer.assign(tps)
        offsets = {tp: OffsetAndMetadata(2 + tp.partition, f"meta-{tp.partition}", -1) for tp in tps}
        consumer.commit(offsets)
    finally:
        consumer.close()
    committed = {(tp.topic, tp.partition): o.offset for tp, o in offsets.items()}
    return _result(lab, "assign_only", [group], [topic], committed=committed)


# ------------------------------------------------------------------------------------ KIP-848 groups
@scenario("kip848_consumer", min_kafka=4)
def kip848_consumer(lab: Lab) -> ScenarioResult:
    """A KIP-848 consumer group (group.protocol=consumer): two members reconcile to Stable."""
    topic = lab.topic("k848-t", partitions=4)
    group = lab.name("kip848")
    members = [lab.member(group, [topic], protocol="consumer", name=f"k848-{i}") for i in range(2)]
    lab.wait_stable(group, 2)
    committed = _commit_all(members, lab.ends(topic))
    return _result(lab, "kip848_consumer", [group], [topic], committed=committed)


@scenario("kip848_leave", min_kafka=4)
def kip848_leave(lab: Lab) -> ScenarioResult:
    """A KIP-848 group that shrinks from three members to one (epochs bump, tombstones for leavers)."""
    topic = lab.topic("k848l-t", partitions=3)
    group = lab.name("kip848-leave")
    members = [lab.member(group, [topic], protocol="consumer", name=f"k848l-{i}") for i in range(3)]
    lab.wait_stable(group, 3)
    committed = _commit_all(members, lab.ends(topic))
    for m in members[1:]:
        m.close()
    lab.wait_stable(group, 1)
    committed = _commit_all(members[:1], lab.ends(topic), committed)
    return _result(lab, "kip848_leave", [group], [topic], committed=committed)


# ------------------------------------------------------------------------------------- transactions
def _txn_commit(lab: Lab, base: str, *, commit: bool) -> ScenarioResult:
    from confluent_kafka import Consumer, Producer, TopicPartition

    topic = lab.topic(f"{base}-t", partitions=2)
    out = lab.topic(f"{base}-out", partitions=1, messages_per_partition=0)
    group = lab.name(base)
    producer = Producer(
        {
            "bootstrap.servers": lab.bootstrap,
            "transactional.id": f"{group}-txn",
            "log_level": 0,
            "logger": quiet_logger(),
        }
    )
    producer.init_transactions(30)
    consumer = Consumer(
        {"bootstrap.servers": lab.bootstrap, "group.id": group, "log_level": 0, "logger": quiet_logger()}
    )
    try:
        producer.begin_transaction()
        producer.produce(out, value=b"derived")
        offsets = [TopicPartition(topic, p, 3 + p) for p in range(2)]
        producer.send_offsets_to_transaction(offsets, consumer.consumer_group_metadata(), 30)
        if commit:
            producer.commit_transaction(30)
        else:
            producer.abort_transaction(30)
    finally:
        consumer.close()
    txn_offsets = {(tp.topic, tp.partition): tp.offset for tp in offsets}
    return _result(
        lab,
        f"txn_{'commit' if commit else 'abort'}",
        [group],
        [topic, out],
        committed=txn_offsets if commit else {},
        transactional_offsets=txn_offsets,
        outcome="commit" if commit else "abort",
    )


@scenario("txn_commit")
def txn_commit(lab: Lab) -> ScenarioResult:
    """A transactional producer commits offsets with send_offsets_to_transaction, then commits."""
    return _txn_commit(lab, "txn-ok", commit=True)


@scenario("txn_abort")
def txn_abort(lab: Lab) -> ScenarioResult:
    """The same, but the transaction aborts: the coordinator never materialises those offsets."""
    return _txn_commit(lab, "txn-abort", commit=False)


# ------------------------------------------------------------------------------------ admin deletes
@scenario("delete_group")
def delete_group(lab: Lab) -> ScenarioResult:
    """A group commits, empties, and is deleted with delete_consumer_groups (offset + group tombstones)."""
    topic = lab.topic("del-t", partitions=2)
    group = lab.name("deleted")
    m = lab.member(group, [topic], name="del")
    lab.wait_stable(group, 1)
    committed = _commit_all([m], lab.ends(topic))
    m.close()
    lab.wait_group(group, lambda v: v.state == "Empty", what="Empty")
    for fut in lab.admin.delete_consumer_groups([group], request_timeout=30).values():
        fut.result(timeout=30)
    view = lab.wait_group(group, lambda v: not v.exists and not v.offsets, what="deleted")
    return ScenarioResult(
        "delete_group", {group: view}, {"committed_before_delete": committed}, [topic], _now_ms()
    )


@scenario("delete_offsets")
def delete_offsets(lab: Lab) -> ScenarioResult:
    """An Empty group loses one topic's offsets to delete_consumer_group_offsets (OffsetDelete)."""
    from kafka.structs import TopicPartition

    keep = lab.topic("delo-keep", partitions=2)
    drop = lab.topic("delo-drop", partitions=2)
    group = lab.name("del-offsets")
    m = lab.member(group, [keep, drop], name="delo")
    lab.wait_stable(group, 1)
    committed = _commit_all([m], lab.ends(keep, drop))
    m.close()
    lab.wait_group(group, lambda v: v.state == "Empty", what="Empty")
    result = lab.kadmin.delete_group_offsets(group, [TopicPartition(drop, p) for p in range(2)])
    errors = {str(tp): err.__name__ for tp, err in result.items() if err.__name__ != "NoError"}
    if errors:
        raise RuntimeError(f"delete_group_offsets failed: {errors}")
    kept = {tp: o for tp, o in committed.items() if tp[0] == keep}
    deleted = {tp: o for tp, o in committed.items() if tp[0] == drop}
    return _result(lab, "delete_offsets", [group], [keep, drop], committed=kept, deleted=deleted)


# ------------------------------------------------------------------------------ explicit retention
def commit_with_retention(
    lab: Lab, group: str, offsets: dict[TopicPartitionKey, int], retention_ms: int
) -> None:
    """OffsetCommit v2-v4 carries a per-request retention time; the broker then writes an
    OffsetCommitValue **v1** with an explicit expireTimestamp (spec §2.3 -- even 4.x does).  Modern
    clients never send it, so build the request with kafka-python's protocol classes."""
    from kafka.protocol.consumer import OffsetCommitRequest
    from kafka.protocol.consumer.group import DEFAULT_GENERATION_ID, UNKNOWN_MEMBER_ID

    admin = lab.kadmin
    topic_cls = OffsetCommitRequest.OffsetCommitRequestTopic
    part_cls = topic_cls.OffsetCommitRequestPartition
    by_topic: dict[str, list[Any]] = {}
    for (t, p), o in offsets.items():
        by_topic.setdefault(t, []).append(
            part_cls(partition_index=p, committed_offset=o, committed_leader_epoch=-1, committed_metadata="")
        )
    request = OffsetCommitRequest(
        group_id=group,
        generation_id_or_member_epoch=DEFAULT_GENERATION_ID,
        member_id=UNKNOWN_MEMBER_ID,
        group_instance_id=None,
        retention_time_ms=retention_ms,
        topics=[topic_cls(name=t, partitions=ps) for t, ps in by_topic.items()],
        min_version=2,
        max_version=4,
    )

    async def send() -> Any:
        node = await admin._find_coordinator_id(group)
        return await admin._manager.send(request, node_id=node)

    response = admin._manager.run(send)
    for topic in response.topics:
        for part in topic.partitions:
            if part.error_code != 0:
                raise RuntimeError(f"OffsetCommit v{request.API_VERSION} failed: {topic.name} {part}")


@scenario("explicit_retention")
def explicit_retention(lab: Lab) -> ScenarioResult:
    """Offsets committed with an explicit retention time (OffsetCommit v2): value v1 + expireTimestamp."""
    topic = lab.topic("ret-t", partitions=2)
    group = lab.name("explicit-retention")
    offsets = {(topic, 0): 4, (topic, 1): 5}
    retention_ms = 2 * 24 * 3600 * 1000
    before = _now_ms()
    commit_with_retention(lab, group, offsets, retention_ms)
    return _result(
        lab,
        "explicit_retention",
        [group],
        [topic],
        committed=offsets,
        retention_ms=retention_ms,
        committed_after_ms=before,
    )


# -------------------------------------------------------------------------------- share and streams
@scenario("share_group", min_kafka=4)
def share_group(lab: Lab) -> ScenarioResult:
    """A KIP-932 share group: one confluent-kafka ShareConsumer consumes and acknowledges."""
    from confluent_kafka import ShareConsumer

    topic = lab.topic("share-t", partitions=2)
    group = lab.name("share")
    consumer = ShareConsumer(
        {
            "bootstrap.servers": lab.bootstrap,
            "group.id": group,
            "client.id": f"cm-share-{lab.run_id}",
            "log_level": 0,
            "logger": quiet_logger(),
        }
    )
    lab.adopt(consumer)
    consumer.subscribe([topic])
    deadline = time.monotonic() + 60
    seen = 0
    while time.monotonic() < deadline and seen < 1:
        # A share group starts at the latest offset (share.auto.offset.reset=latest), so keep
        # producing until the member, once assigned, receives something.
        lab.produce(topic, 2, 1)
        batch = consumer.poll(0.5)
        for msg in batch or []:
            if msg.error() is None:
                seen += 1

    def stable(v: GroupView) -> bool:
        return v.state == "Stable" and len(v.members) == 1 and bool(v.members[0].assignment)

    lab.wait_group(group, stable, what="Stable share group")
    return _result(lab, "share_group", [group], [topic], records_seen=seen)


class _StreamsApp:
    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.proc = proc

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                assert self.proc.stdin is not None
                self.proc.stdin.write("q")
                self.proc.stdin.flush()
                self.proc.wait(40)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait(10)


@scenario("streams_group", min_kafka=4)
def streams_group(lab: Lab) -> ScenarioResult:
    """A KIP-1071 streams group: a Kafka Streams app with group.protocol=streams (Java, GroupProbe)."""
    topic = lab.topic("streams-in", partitions=2)
    out = lab.topic("streams-out", partitions=2, messages_per_partition=0)
    # the app id is the group id
    group = lab.name("streams-app")
    proc = subprocess.Popen(
        [
            "java",
            "-Xmx256m",
            "-cp",
            lab.probe.classpath,
            "GroupProbe",
            "streams",
            lab.bootstrap,
            group,
            topic,
            out,
            "3600",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    lab.adopt(_StreamsApp(proc))

    def ready(v: GroupView) -> bool:
        return v.exists and v.state == "Stable" and len(v.members) == 1 and bool(v.offsets)

    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        lab.produce(topic, 2, 1)  # Streams commits only after it processed something
        view = lab.describe(group)[group]
        if ready(view):
            break
        time.sleep(1)
    else:
        raise TimeoutError(f"streams group {group} never Stable with committed offsets: {view}")
    return _result(lab, "streams_group", [group], [topic])


# --------------------------------------------------------------------------- expiry and churn (opt-in)
@scenario("expiring", default=False)
def expiring(lab: Lab) -> ScenarioResult:
    """Groups whose offsets the broker will expire under a short offsets.retention.minutes:
    an offsets-only group (expires from each commit time) and an Empty classic group (expires from
    the time it became Empty)."""
    from kafka import KafkaConsumer
    from kafka.structs import OffsetAndMetadata, TopicPartition

    topic = lab.topic("exp-t", partitions=2)
    simple = lab.name("exp-simple")
    consumer = KafkaConsumer(bootstrap_servers=lab.bootstrap, group_id=simple, enable_auto_commit=False)
    try:
        consumer.assign([TopicPartition(topic, 0), TopicPartition(topic, 1)])
        consumer.commit({TopicPartition(topic, p): OffsetAndMetadata(1 + p, "", -1) for p in range(2)})
    finally:
        consumer.close()
    classic = lab.name("exp-empty")
    m = lab.member(classic, [topic], name="exp")
    lab.wait_stable(classic, 1)
    committed = _commit_all([m], lab.ends(topic))
    m.close()
    lab.wait_group(classic, lambda v: v.state == "Empty", what="Empty")
    return _result(lab, "expiring", [simple, classic], [topic], committed=committed)


class Churn:
    """A rebalance storm: members of one group keep joining and leaving until closed."""

    def __init__(
        self, lab: Lab, group: str, topic: str, period_s: float = 2.0, protocol: str = "classic"
    ) -> None:
        import threading

        self.lab = lab
        self.group = group
        self.topic = topic
        self.period_s = period_s
        self.protocol = protocol
        self.cycles = 0
        self._stop = threading.Event()
        self._anchor = lab.member(group, [topic], protocol=protocol, name="churn-anchor")
        self._thread = threading.Thread(target=self._run, name=f"churn-{group}", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            m = self.lab.member(self.group, [self.topic], protocol=self.protocol, name="churn")
            self._stop.wait(self.period_s)
            m.close()
            self.cycles += 1
            self._stop.wait(self.period_s)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(60)
        self._anchor.close()


@scenario("churn", default=False)
def churn(lab: Lab) -> ScenarioResult:
    """A group that rebalances every few seconds (a second member joins and leaves) until lab.close()."""
    topic = lab.topic("churn-t", partitions=4)
    group = lab.name("churn")
    lab.adopt(Churn(lab, group, topic))
    lab.wait_group(group, lambda v: v.exists and v.state is not None, what="created")
    return _result(lab, "churn", [group], [topic])


# ----------------------------------------------------------------------------------------- running
def default_scenarios(kafka_version: str) -> list[str]:
    major = int(kafka_version.split(".", 1)[0])
    return [s.name for s in SCENARIOS.values() if s.default and major >= s.min_kafka]


def run_scenarios(lab: Lab, names: Iterable[str] | None = None) -> dict[str, ScenarioResult]:
    """Run scenarios in order (default: every default one the broker supports)."""
    results: dict[str, ScenarioResult] = {}
    for name in names if names is not None else default_scenarios(lab.kafka_version):
        sc = SCENARIOS[name]
        if lab.major < sc.min_kafka:
            raise ValueError(f"scenario {name} needs Kafka {sc.min_kafka}+, broker is {lab.kafka_version}")
        mark = lab.mark()
        try:
            results[name] = sc.fn(lab)
        except BaseException:
            lab.close_since(mark)  # its members stop now, not when the lab closes
            raise
    return results
