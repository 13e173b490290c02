"""The foundation's real loop: broker launcher, scenario library, GroupProbe read-back."""

from __future__ import annotations

import os
import signal
from typing import Any

import pytest

pytestmark = [pytest.mark.broker]


def test_broker_serves_metadata_and_offsets_topic(kafka: Any) -> None:
    from confluent_kafka.admin import AdminClient

    md = AdminClient({"bootstrap.servers": kafka.bootstrap}).list_topics(timeout=10)
    topic = md.topics["__consumer_offsets"]
    assert len(topic.partitions) == kafka.settings.offsets_topic_num_partitions == 5
    assert all(p.leader == 1 for p in topic.partitions.values())
    props = (kafka.workdir / "server.properties").read_text()
    assert "group.initial.rebalance.delay.ms=0" in props
    assert "offsets.topic.replication.factor=1" in props


def test_second_broker_starts_stops_and_leaves_no_process(tmp_path: Any) -> None:
    """An older (3.x) broker from the same launcher; stop() leaves no java process behind."""
    from lab.broker import BrokerSettings, LocalKafka
    from streaming.jars import kafka_old_version

    broker = LocalKafka(
        BrokerSettings(kafka_version=kafka_old_version(), offsets_topic_num_partitions=3), tmp_path
    )
    broker.start()
    pid = broker.process.pid if broker.process else 0
    assert pid
    os.kill(pid, 0)  # alive
    broker.stop()
    with pytest.raises(ProcessLookupError):
        os.killpg(pid, 0)
    assert "Kafka version: " + kafka_old_version() in (tmp_path / "server.log").read_text()


def test_broker_whose_port_was_taken_starts_on_other_ports(tmp_path: Any, monkeypatch: Any) -> None:
    """A listener's port taken between choosing and binding: the broker's bind error is followed
    by a controlled shutdown of well over 40 log lines, and the start must still see the error
    and try other ports (it gave up once, after a 40-line log tail had lost it: a CI run's session
    broker, every test on it then an error)."""
    import socket

    import lab.broker
    from lab.broker import BrokerSettings, LocalKafka
    from lab.proc import free_port

    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    first = [taken.getsockname()[1]]
    monkeypatch.setattr(lab.broker, "_free_port", lambda: first.pop() if first else free_port())
    broker = LocalKafka(BrokerSettings(offsets_topic_num_partitions=1), tmp_path)
    try:
        broker.start(offsets_topic=False)
        assert broker.port != taken.getsockname()[1]
        log = (tmp_path / "server.log").read_text()
        first_launch = log[: log.index("Address already in use")]
        # the error is further from the end of its launch than a 40-line tail reaches
        assert log.count("\n") - first_launch.count("\n") > 40
    finally:
        broker.stop()
        taken.close()


def test_broker_dies_with_its_parent(tmp_path: Any) -> None:
    """A SIGKILLed parent (e.g. a killed test run) takes its broker with it: no orphan java."""
    import subprocess
    import sys
    import time

    script = (
        "import sys, time\n"
        "from lab.broker import LocalKafka\n"
        f"k = LocalKafka(workdir={str(tmp_path)!r}).start()\n"
        "print(k.process.pid, flush=True)\n"
        "time.sleep(600)\n"
    )
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert parent.stdout is not None
    java_pid = int(parent.stdout.readline())
    os.kill(java_pid, 0)
    parent.send_signal(signal.SIGKILL)
    parent.wait(10)
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        try:
            os.kill(java_pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.2)
    os.kill(java_pid, signal.SIGKILL)
    pytest.fail("broker outlived its parent")


def _offsets(view: Any) -> dict[tuple[str, int], int]:
    return {tp: o.offset for tp, o in view.offsets.items()}


def test_classic_range(scenarios: dict[str, Any]) -> None:
    r = scenarios["classic_range"]
    g = r.group
    assert (g.type, g.state, g.protocol_type, g.assignor) == ("Classic", "Stable", "consumer", "range")
    assert len(g.members) == 2 and all(len(m.assignment) == 2 for m in g.members)
    assert g.assigned == frozenset(r.facts["committed"])
    assert _offsets(g) == r.facts["committed"] == {tp: 5 for tp in r.facts["committed"]}


def test_cooperative_group_grew_and_shrank(scenarios: dict[str, Any]) -> None:
    r = scenarios["cooperative_grow_shrink"]
    g = r.group
    assert (g.state, g.assignor, len(g.members)) == ("Stable", "cooperative-sticky", 2)
    assert len(g.assigned) == 6
    assert _offsets(g) == r.facts["committed"]


def test_static_member_replaced_without_losing_its_partitions(scenarios: dict[str, Any]) -> None:
    r = scenarios["static_restart"]
    g = r.group
    assert r.facts["old_member_id"] != r.facts["new_member_id"]
    assert {m.group_instance_id for m in g.members} == {"static-a", "static-b"}
    assert g.member(instance_id="static-a").member_id == r.facts["new_member_id"]
    # KIP-345: the returning static member gets its old assignment back, no reshuffle
    assert r.facts["assignment_kept"]


def test_member_left_and_member_crashed(scenarios: dict[str, Any]) -> None:
    left = scenarios["member_leave"].group
    assert (left.state, left.assignor, len(left.members), len(left.assigned)) == (
        "Stable",
        "roundrobin",
        2,
        6,
    )
    assert scenarios["member_leave"].facts["left_client_id"] not in {m.client_id for m in left.members}
    crash = scenarios["member_crash"]
    assert len(crash.group.members) == 1 and len(crash.group.assigned) == 4
    assert crash.facts["crashed_member_id"] not in {m.member_id for m in crash.group.members}


def test_offsets_only_and_empty_groups(scenarios: dict[str, Any]) -> None:
    simple = scenarios["assign_only"].group
    assert (simple.state, simple.protocol_type, simple.members) == ("Empty", "", ())
    assert {tp: (o.offset, o.metadata) for tp, o in simple.offsets.items()} == {
        tp: (off, f"meta-{tp[1]}") for tp, off in scenarios["assign_only"].facts["committed"].items()
    }
    empty = scenarios["kafka_python_empty"].group
    assert (empty.state, empty.protocol_type, empty.members) == ("Empty", "consumer", ())
    assert _offsets(empty) == scenarios["kafka_python_empty"].facts["committed"]


def test_kip848_groups_converge_with_epochs(scenarios: dict[str, Any]) -> None:
    for name, members in (("kip848_consumer", 2), ("kip848_leave", 1)):
        g = scenarios[name].group
        assert (g.type, g.state, len(g.members)) == ("Consumer", "Stable", members)
        assert g.group_epoch is not None and g.group_epoch == g.target_assignment_epoch
        assert all(m.member_epoch == g.group_epoch for m in g.members)
        assert _offsets(g) == scenarios[name].facts["committed"]
    # three joins and two leaves bump the epoch past the two-member group's
    assert scenarios["kip848_leave"].group.group_epoch > scenarios["kip848_consumer"].group.group_epoch


def test_transactional_offsets_commit_or_vanish(scenarios: dict[str, Any]) -> None:
    ok, aborted = scenarios["txn_commit"], scenarios["txn_abort"]
    assert _offsets(ok.group) == ok.facts["transactional_offsets"]
    assert aborted.group.offsets == {}
    assert aborted.facts["transactional_offsets"]  # it did try to commit


def test_admin_deletes(scenarios: dict[str, Any]) -> None:
    deleted = scenarios["delete_group"].group
    assert not deleted.exists and deleted.offsets == {}
    r = scenarios["delete_offsets"]
    assert _offsets(r.group) == r.facts["committed"]
    assert not set(r.group.offsets) & set(r.facts["deleted"])


def test_explicit_retention_commit_is_accepted(scenarios: dict[str, Any]) -> None:
    r = scenarios["explicit_retention"]
    assert _offsets(r.group) == r.facts["committed"]


def test_share_and_streams_groups(scenarios: dict[str, Any]) -> None:
    share = scenarios["share_group"].group
    assert (share.type, share.state, len(share.members)) == ("Share", "Stable", 1)
    assert share.group_epoch and share.members[0].member_epoch == share.group_epoch
    streams = scenarios["streams_group"].group
    assert (streams.type, streams.state, len(streams.members)) == ("Streams", "Stable", 1)
    assert streams.offsets, "the streams app committed its input offsets"
