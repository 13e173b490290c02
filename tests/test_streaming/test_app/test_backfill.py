"""``backfill: driver`` (`streaming.app.backfill`): which checkpoints are new; and on the session
broker after every scenario ran: the driver's fold of a new checkpoint's backfill, handed to the
query as a seed, against the query folding it itself (``backfill: query``) -- the same groups,
snapshots, errors, counts and change events; a restart from the seeded checkpoint; the remains of a
start stopped before its query ran; and the fallback when the driver's read fails."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from streaming.app.backfill import local_checkpoint_is_new
from tests.support.http import get
from tests.support.live_mirror import group_url, live_settings


def _groups(mirror: Any) -> dict[str, Any]:
    return {
        g["group_id"]: get(group_url(mirror, g["group_id"]))[1]
        for g in get(f"{mirror.http.url}/groups")[1]["groups"]
    }


def _events(folder: Path) -> list[str]:
    return sorted(
        json.dumps({k: v for k, v in json.loads(line).items()}, sort_keys=True)
        for f in folder.glob("events-*.jsonl")
        for line in f.read_text().splitlines()
    )


def _converged(a: Any, b: Any, timeout_s: float = 120.0) -> tuple[dict[str, Any], dict[str, Any]]:
    """Both mirrors' groups once they agree (live groups may still move: both follow them)."""
    deadline = time.monotonic() + timeout_s
    while True:
        a.wait_batches(1, 120)
        b.wait_batches(1, 120)
        ga, gb = _groups(a), _groups(b)
        if ga == gb or time.monotonic() > deadline:
            return ga, gb


@pytest.fixture(scope="module")
def pair(
    *,
    module_mirrors: Any,
    spark: Any,
    kafka: Any,
    lab: Any,
    scenarios: dict[str, Any],
    tmp_path_factory: pytest.TempPathFactory,
) -> Any:
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition

    work = tmp_path_factory.mktemp("backfill")
    # a group of this module's own in the backfill (the scenarios' groups are the session's)
    group, topic = lab.name("seeded"), lab.topic("seeded", partitions=2)
    req = ConsumerGroupTopicPartitions(group, [TopicPartition(topic, 0, 3), TopicPartition(topic, 1, 4)])
    for fut in lab.admin.alter_consumer_group_offsets([req]).values():  # the lab's client outlives the call
        fut.result(30)
    driver = module_mirrors.start(
        live_settings(
            kafka.bootstrap, work / "driver", backfill="driver", events_path=work / "driver" / "events"
        ),
        ready_s=300,
    )
    query = module_mirrors.start(
        live_settings(
            kafka.bootstrap, work / "query", backfill="query", events_path=work / "query" / "events"
        ),
        ready_s=300,
        spark=spark.newSession(),  # one query of a name per session
    )
    return driver, query, work, group


@pytest.mark.broker
@pytest.mark.spark
def test_the_driver_fold_and_the_query_fold_agree(pair: Any, scenarios: dict[str, Any]) -> None:
    driver, query, work, _group = pair
    # the driver's mirror was seeded: its checkpoint holds the seed, its first batch stored it
    assert (work / "driver" / "checkpoint" / "seed" / "seed.parquet").is_file()
    # the side input (for wakes) but no seed in it: the query folded its own backfill
    assert not (work / "query" / "checkpoint" / "seed" / "seed.parquet").exists()
    assert driver.status.last_batch.batch_id >= 0
    mine, theirs = _converged(driver, query)
    assert mine == theirs
    names = {gid for result in scenarios.values() for gid in result.groups}
    assert len(names & mine.keys()) >= len(scenarios) - 3  # every live scenario group
    assert get(f"{driver.http.url}/errors")[1] == get(f"{query.http.url}/errors")[1]
    assert driver.observed == query.observed and driver.observed["records"] > 100
    assert driver.status.tallies() == query.status.tallies()
    assert _events(work / "driver" / "events") == _events(work / "query" / "events")
    assert (work / "driver" / "events" / "events-backfill.jsonl").is_file()


@pytest.mark.broker
@pytest.mark.spark
def test_a_restart_resumes_the_seeded_checkpoint(pair: Any, mirrors: Any, kafka: Any) -> None:
    """The seeded checkpoint resumes like any other: every group recovered from the state store
    before a new batch, nothing read again; a new commit to a group of the backfill folded onto
    the offsets the driver's fold gave it."""
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
    from confluent_kafka.admin import AdminClient

    driver, _query, work, group = pair
    before = _groups(driver)
    offsets = {(o["topic"], o["partition"]): o["offset"] for o in before[group]["offsets"]}
    assert sorted(offsets.values()) == [3, 4]
    positions = driver.status.positions()
    driver.stop()
    again = mirrors.start(live_settings(kafka.bootstrap, work / "driver", backfill="driver"))
    assert again.recovered_groups == len(before)
    assert again.wait_ready(120)
    (topic, partition), offset = next(iter(offsets.items()))
    req = ConsumerGroupTopicPartitions(group, [TopicPartition(topic, partition, offset + 100)])
    admin = AdminClient({"bootstrap.servers": kafka.bootstrap})
    for fut in admin.alter_consumer_group_offsets([req]).values():
        fut.result(30)
    expected = {**offsets, (topic, partition): offset + 100}
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        snap = get(group_url(again, group))[1]
        if {(o["topic"], o["partition"]): o["offset"] for o in snap["offsets"]} == expected:
            break
        time.sleep(0.5)
    else:
        raise AssertionError((snap, expected))
    # The batch's progress event reaches the listener after the batch has published its state.
    while not (read := [p for p in again.progress_history if p["input_rows"]]):
        assert time.monotonic() < deadline + 30, again.progress_history
        time.sleep(0.5)
    first = min(read, key=lambda p: p["batch_id"])
    assert first["input_rows"] < sum(positions.values()), "read the topic again"


@pytest.mark.broker
@pytest.mark.spark
def test_the_remains_of_a_start_stopped_before_its_query_ran_are_replaced(
    mirrors: Any, spark: Any, kafka: Any, scenarios: dict[str, Any], tmp_path: Path
) -> None:
    """A start stopped after the seed was written but before the query's first batch was planned
    leaves a seed and the sources' logs without ``offsets/``: the next start makes them again."""
    checkpoint = tmp_path / "checkpoint"
    (checkpoint / "seed").mkdir(parents=True)
    (checkpoint / "seed" / "seed.parquet").write_bytes(b"not parquet: a start cut short")
    (checkpoint / "sources" / "0").mkdir(parents=True)
    (checkpoint / "sources" / "0" / "0").write_text('v1\n{"__consumer_offsets":{"0":999999}}')
    m = mirrors.start(
        live_settings(kafka.bootstrap, tmp_path, backfill="driver"), ready_s=300, spark=spark.newSession()
    )
    m.wait_batches(1, 120)
    assert m.query is not None and m.query.isActive
    crange = next(iter(scenarios["classic_range"].groups))
    assert get(group_url(m, crange))[0] == 200
    assert (checkpoint / "seed" / "seed.parquet").stat().st_size > 100


@pytest.mark.broker
@pytest.mark.spark
def test_a_failed_driver_read_leaves_the_backfill_to_the_query(
    *,
    mirrors: Any,
    spark: Any,
    kafka: Any,
    scenarios: dict[str, Any],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: Any,
) -> None:
    from streaming.app import backfill

    def broken(*_a: Any, **_k: Any) -> Any:
        raise RuntimeError("the read broke")

    monkeypatch.setattr(backfill, "read_topic", broken)
    m = mirrors.start(
        live_settings(kafka.bootstrap, tmp_path, backfill="driver"), ready_s=300, spark=spark.newSession()
    )
    assert "the driver's backfill failed (the read broke): the query folds the backfill" in caplog.text
    assert not (tmp_path / "checkpoint" / "seed" / "seed.parquet").exists()  # the side input only
    crange = next(iter(scenarios["classic_range"].groups))
    assert get(group_url(m, crange))[0] == 200


@pytest.mark.parametrize(
    ("layout", "new"),
    [
        ([], True),  # no checkpoint folder yet
        (["offsets/"], True),
        (["offsets/.0.crc", "offsets/tmp"], True),  # no micro-batch written
        (["offsets/0"], False),
        (["offsets/12", "commits/11"], False),
    ],
)
@pytest.mark.parametrize("scheme", ["", "file:", "file://"])
def test_a_local_checkpoint_is_new_until_its_first_micro_batch(
    tmp_path: Path, layout: list[str], new: bool, scheme: str
) -> None:
    root = tmp_path / "checkpoint"
    for entry in layout:
        target = root / entry
        if entry.endswith("/"):
            target.mkdir(parents=True, exist_ok=True)
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text("v1")
    assert local_checkpoint_is_new(f"{scheme}{root}") is new


@pytest.mark.parametrize("path", ["hdfs://nn:8020/cm/checkpoint", "s3a://bucket/cm", "gs://b/c"])
def test_a_checkpoint_on_another_file_system_is_known_new_only_once_spark_is_up(path: str) -> None:
    assert local_checkpoint_is_new(path) is None
