"""Offsets as of a moment, end to end (issue 38): real consumers of a classic and a KIP-848 group
commit, then commit again; the mirror's ``GET /groups/{id}/offsets?at=T`` for a moment T between
the two answers the offsets the group had at T, and its reset plan -- the CSV and the command line
-- executed with Kafka's own tool (`ConsumerGroupCommand`, what ``kafka-consumer-groups.sh`` runs,
from the broker's jars) on the real broker, with the group's members stopped, leaves the group's
committed offsets equal to those at T, per partition.  The same after a mirror restart on the same
checkpoint (the history persists); T before the history's horizon is a 4xx naming it; a group
that did not exist at T is a 404 saying so."""

from __future__ import annotations

import json
import shlex
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from lab.retention import commit_and_stop
from streaming.jars import kafka_classpath
from tests.support.live_mirror import group_url, live_settings
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.broker, pytest.mark.spark]

#: (group.protocol, group id): ids with "/", "+", "=", unicode and HTML
GROUPS = [("classic", "tt/classic ✓ <b>"), ("consumer", "tt-k848+/=")]
AT_T = {0: 10, 1: 20, 2: 5}  # committed before T
AFTER = {0: 40, 1: 45, 2: 50}  # committed after T


def _offsets(mirror: Any, group: str, at: int | str) -> tuple[int, dict[str, Any]]:
    url = f"{group_url(mirror, group, '/offsets')}?at={at}"
    try:
        with urllib.request.urlopen(url, timeout=30) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def _mirror_holds(mirror: Any, group: str, want: dict[int, int]) -> Any:
    """Wait until the mirror's newest offsets of ``group`` are ``want``."""

    def now() -> Any:
        status, body = _offsets(mirror, group, int(time.time() * 1000))
        if status != 200:
            return None
        got = {x["partition"]: x["offset_now"] for x in body["partitions"]}
        return body if got == want else None

    return wait_for(f"the mirror holding {want} for {group}", now, 120)


def _kafka_committed(lab: Any, group: str, topic: str) -> dict[int, int]:
    """The group's committed offsets as Kafka reports them (ListConsumerGroupOffsets)."""
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition

    asked = ConsumerGroupTopicPartitions(group, [TopicPartition(topic, p) for p in AT_T])
    result = lab.admin.list_consumer_group_offsets([asked])[group].result(timeout=30)
    return {tp.partition: tp.offset for tp in result.topic_partitions}


def _execute(lab: Any, plan: dict[str, Any], work: Path) -> str:
    """The plan's ``execute`` command, as a person would run it: the CSV in the file the plan
    names, the command line's arguments to Kafka's tool (the class kafka-consumer-groups.sh runs)."""
    assert plan["supported"] and plan["tool"] == "kafka-consumer-groups.sh", plan
    (work / plan["file"]).write_text(plan["csv"])
    argv = shlex.split(plan["commands"]["execute"])
    assert argv == plan["argv"]["execute"] and argv[0] == "kafka-consumer-groups.sh"
    out = subprocess.run(
        ["java", "-Xmx256m", "-cp", kafka_classpath(lab.kafka_version),
         "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand", *argv[1:]],
        cwd=work, capture_output=True, text=True, timeout=180, check=False,
    )  # fmt: skip
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    return out.stdout


def test_a_plan_for_a_past_moment_restores_the_groups_offsets_with_kafkas_tool(
    mirrors: Any, kafka: Any, lab: Any, tmp_path: Path
) -> None:
    settings = live_settings(kafka.bootstrap, tmp_path, cluster_name="time-travel")
    mirror = mirrors.start(settings, ready_s=300)
    topic = lab.topic("tt-t", partitions=3, messages_per_partition=60)
    for protocol, group in GROUPS:
        commit_and_stop(lab, group, topic, AT_T, protocol=protocol)
        _mirror_holds(mirror, group, AT_T)
    time.sleep(1.5)
    t = int(time.time() * 1000)
    time.sleep(1.5)
    for protocol, group in GROUPS:
        commit_and_stop(lab, group, topic, AFTER, protocol=protocol)
        _mirror_holds(mirror, group, AFTER)
    late = "tt-late"
    commit_and_stop(lab, late, topic, AFTER)
    _mirror_holds(mirror, late, AFTER)

    # the answer at T, and the plan executed with Kafka's tool (the members are gone: Empty groups)
    kinds = {}
    for _, group in GROUPS:
        status, body = _offsets(mirror, group, t)
        assert status == 200, body
        kinds[group] = body["kind"]
        assert {x["partition"]: (x["offset"], x["offset_now"]) for x in body["partitions"]} == {
            p: (AT_T[p], AFTER[p]) for p in AT_T
        }
        assert all(x["committed_at_ms"] < t for x in body["partitions"])
        assert body["plan"]["partitions_to_reset"] == 3 and body["plan"]["warnings"] == []
    assert kinds == {GROUPS[0][1]: "classic", GROUPS[1][1]: "consumer"}
    first = GROUPS[0][1]
    _, body = _offsets(mirror, first, t)
    _execute(lab, body["plan"], tmp_path)
    assert _kafka_committed(lab, first, topic) == AT_T
    _mirror_holds(mirror, first, AT_T)  # the reset is a commit the mirror reads back

    # a moment before the history began: 4xx naming the horizon; a group not there at T: 404 why
    status, body = _offsets(mirror, first, "2020-01-01T00:00:00Z")
    assert status == 410 and body["error"] == "before_horizon" and body["horizon"], body
    status, body = _offsets(mirror, late, t)
    assert (status, body["reason"], body["group_id"]) == (404, "not_created_yet", late), body

    # after a restart on the same checkpoint the history still answers for T
    commit_and_stop(lab, first, topic, AFTER, protocol=GROUPS[0][0])
    _mirror_holds(mirror, first, AFTER)
    mirror.stop()
    again = mirrors.start(settings, ready_s=300)
    for _, group in GROUPS:
        _mirror_holds(again, group, AFTER)
        status, body = _offsets(again, group, t)
        assert status == 200, body
        assert {x["partition"]: x["offset"] for x in body["partitions"]} == AT_T
        _execute(lab, body["plan"], tmp_path)
        assert _kafka_committed(lab, group, topic) == AT_T, group
