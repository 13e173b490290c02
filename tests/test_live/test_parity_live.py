"""Parity with the tools users migrate from, on the session broker: Burrow 1.9.5's verdicts for
the consumers of `lab.burrow_scenarios` (every status, and the transitions a Rule-1-first
evaluation got wrong: stopped on a quiet topic, caught up then reset backwards, rewound and
recovered, keeping up against a steady producer), and a KIP-848 group on a topic whose id holds
"-" or "_" (named in the assignment, lag owners known).  One in-process mirror for the module.
(bench/burrow_side_by_side.py runs the same scenarios beside a real Burrow.)"""

from __future__ import annotations

import time
import urllib.parse
import urllib.request
from typing import Any

import pytest

from decoders.uuids import canonical_uuid
from lab.burrow_scenarios import CHECK_TICK, SCENARIOS, ScenarioRun, passes_through
from tests.support.http import get

pytestmark = [pytest.mark.broker, pytest.mark.spark, pytest.mark.slow]

CLUSTER = "default"
TICK_S = 2.0
#: from this tick on, every window holds commits made after the first log end was sampled
STEADY_FROM = 12


@pytest.fixture(scope="module")
def mirror(module_mirrors: Any, kafka: Any, tmp_path_factory: pytest.TempPathFactory) -> Any:
    from streaming.settings import load_settings

    settings = load_settings(
        bootstrap_servers=kafka.bootstrap,
        checkpoint_location=str(tmp_path_factory.mktemp("parity") / "ckpt"),
        trigger_interval_s=1.0,
        shuffle_partitions=2,
        http_port=0,
        lag_interval_s=0.5,
        burrow_intervals=10,
        burrow_min_distance_s=1.0,  # the side-by-side configuration
        cluster_name=CLUSTER,
    )
    m = module_mirrors.start(settings)
    assert m.wait_ready(180)
    return m


def _status(url: str, group: str) -> Any:
    s, body = get(f"{url}/v3/kafka/{CLUSTER}/consumer/{urllib.parse.quote(group, safe='')}/lag")
    return body["status"] if s == 200 else None


def test_burrow_verdicts_on_the_real_broker(mirror: Any, kafka: Any, lab: Any) -> None:
    url = mirror.http.url
    run = ScenarioRun(kafka.bootstrap, SCENARIOS, lab.name("parity"), TICK_S)
    run.setup()
    run.warm_up(mirror)
    seen: dict[tuple[str, int], list[tuple[int, str]]] = {}

    def on_tick(k: int) -> None:
        for s in SCENARIOS:
            st = _status(url, run.group(s))
            for p in st["partitions"] if st else ():
                seen.setdefault((s.name, p["partition"]), []).append((k, p["status"]))

    run.run(on_tick)

    def final() -> dict[str, Any] | None:
        out = {s.name: _status(url, run.group(s)) for s in SCENARIOS}
        done = all(
            st is not None
            and [p["status"] for p in sorted(st["partitions"], key=lambda p: p["partition"])]
            == list(s.expected)
            for s, st in ((s, out[s.name]) for s in SCENARIOS)
        )
        return out if done else None

    # the last commits reach the window within a micro-batch and a round: a few seconds
    deadline = time.monotonic() + 30
    got = final()
    while got is None and time.monotonic() < deadline:
        time.sleep(0.5)
        got = final()
    latest = {s.name: _status(url, run.group(s)) for s in SCENARIOS}
    verdicts = {
        name: [(p["partition"], p["status"], p["current_lag"]) for p in st["partitions"]] if st else None
        for name, st in latest.items()
    }
    assert got is not None, f"Burrow's verdicts after tick {CHECK_TICK}: {verdicts}"
    for s in SCENARIOS:
        st = got[s.name]
        assert st["status"] == s.expected_group, (s.name, st)
        for p in st["partitions"]:
            assert p["end"]["observedAt"] >= p["end"]["timestamp"] > 0
            # Burrow's completeness: the share of the window's 10 slots filled (commits a tick
            # apart that one micro-batch applies reach the window as one, on a loaded machine)
            commits = len(run.committed[(run.group(s), p["partition"])])
            assert 0 < p["complete"] <= min(1.0, commits / 10), (s.name, p)
    # the transitions, in order
    for s in SCENARIOS:
        if s.passes:
            lo, hi = s.passes_between
            through = [v for k, v in seen.get((s.name, 0), []) if lo <= k <= hi]
            assert passes_through(through, s.passes), (s.name, s.passes, through)
    # keeping up against a steady producer (and idle): never anything but OK -- a commit's lag is
    # measured against the end read before it, not after (the false WARN)
    for name in ("keeps-up", "idle"):
        steady = {v for k, v in seen[(name, 0)] if k >= STEADY_FROM}
        assert steady == {"OK"}, (name, seen[(name, 0)])


def _topic_id(admin: Any, topic: str) -> str | None:
    from confluent_kafka import KafkaException, TopicCollection

    try:
        desc = admin.describe_topics(TopicCollection([topic]))[topic].result(30)
    except KafkaException:
        return None
    return canonical_uuid(desc.topic_id)


def _recreate_until_id_has_dash_or_underscore(admin: Any, topic: str, partitions: int) -> tuple[str, int]:
    """Create ``topic``; while Kafka's text of its id has neither "-" nor "_" (about half of all
    ids), delete and create it again.  (id, attempts)."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import NewTopic

    for attempt in range(1, 40):
        deadline = time.monotonic() + 60
        while True:
            try:
                admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)
                break
            except KafkaException as exc:  # the previous one is still being deleted
                if time.monotonic() > deadline:
                    raise
                assert exc.args[0].name() in ("TOPIC_ALREADY_EXISTS", "UNKNOWN_TOPIC_OR_PART"), exc
                time.sleep(0.3)
        # a new topic's metadata reaches the broker's cache a little after CreateTopics answers:
        # until then DescribeTopics says UNKNOWN_TOPIC_OR_PARTITION (seen once in CI)
        found_by = time.monotonic() + 30
        while (tid := _topic_id(admin, topic)) is None and time.monotonic() < found_by:
            time.sleep(0.2)
        assert tid is not None
        if "-" in tid or "_" in tid:
            return tid, attempt
        admin.delete_topics([topic])[topic].result(30)
        while _topic_id(admin, topic) is not None:
            time.sleep(0.2)
    raise AssertionError("40 topic ids without - or _")


def test_kip848_assignment_on_a_topic_id_with_dash_or_underscore(mirror: Any, kafka: Any, lab: Any) -> None:
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient

    bs = kafka.bootstrap
    admin = AdminClient({"bootstrap.servers": bs})
    topic, group = lab.name("parity-848"), lab.name("parity-848-g")
    tid, attempts = _recreate_until_id_has_dash_or_underscore(admin, topic, 2)
    print(f"topic id {tid} after {attempts} creation(s)")
    producer = Producer({"bootstrap.servers": bs})
    for p in (0, 1):
        for i in range(20):
            producer.produce(topic, value=b"v%d" % i, partition=p)
    assert producer.flush(30) == 0
    consumer = Consumer(
        {
            "bootstrap.servers": bs,
            "group.id": group,
            "group.protocol": "consumer",
            "client.id": "parity-848-client",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    url = mirror.http.url
    quoted = urllib.parse.quote(group, safe="")

    def named(committed: bool) -> Any:
        s, snap = get(f"{url}/groups/{quoted}")
        members = snap.get("members", []) if s == 200 else []
        assigned = {a["topic"] for m in members for a in m.get("assignment", [])}
        s, lag = get(f"{url}/groups/{quoted}/lag")
        rows = lag.get("partitions", []) if s == 200 else []
        ready = (
            assigned == {topic}
            and {(r["topic"], r["partition"]) for r in rows} == {(topic, 0), (topic, 1)}
            and all((r["committed_offset"] is not None) is committed for r in rows)
            and all(r["end_offset"] is not None for r in rows)  # a lag round has read the ends
        )
        return (snap, rows) if ready else None

    def wait(committed: bool) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        deadline = time.monotonic() + 120
        got = named(committed)
        while got is None and time.monotonic() < deadline:
            time.sleep(0.5)
            got = named(committed)
        assert got is not None, f"never named {topic} ({tid}): {get(f'{url}/groups/{quoted}')}"
        return got

    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + 60
        while len(consumer.assignment()) < 2 and time.monotonic() < deadline:
            consumer.poll(0.5)
        assert len(consumer.assignment()) == 2
        # the cluster's id -> name map (streaming.cluster.offsets) is keyed by Kafka's text of the id
        deadline = time.monotonic() + 60
        while mirror.offset_reader.names.get(tid) != topic and time.monotonic() < deadline:
            time.sleep(0.5)
        assert mirror.offset_reader.names.get(tid) == topic, (tid, mirror.offset_reader.names)
        # assigned, nothing committed: the assignment (by id in the log) shows the name, and the
        # lag rows of the assigned partitions carry their owner
        snap, rows = wait(committed=False)
        assert snap["kind"] == "consumer"
        for r in rows:
            assert r["client_id"] == "parity-848-client" and r["member_host"] != "unknown"
            assert r["consumer_id"] != "unknown" and not r["topic_deleted"] and r["end_offset"] == 20
        # committed: one row per partition, named, with lag and owner
        consumer.commit(offsets=[TopicPartition(topic, p, 10 + p) for p in (0, 1)], asynchronous=False)
        _, rows = wait(committed=True)
        for r in rows:
            assert r["lag"] == 20 - (10 + r["partition"])
            assert r["client_id"] == "parity-848-client" and r["member_host"] != "unknown"
        st = _status(url, group)
        assert st is not None and {(p["topic"], p["client_id"]) for p in st["partitions"]} == {
            (topic, "parity-848-client")
        }
        with urllib.request.urlopen(f"{url}/metrics", timeout=30) as resp:
            text = resp.read().decode()
        assert 'coordinator_mirror_topic_ids_unresolved{cluster_name="default",reason="malformed"} 0' in text
    finally:
        consumer.close()
