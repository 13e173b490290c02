"""Drift at start: a log start offset past the checkpoint's position means records -- possibly
tombstones -- were removed while the mirror was down.  The mirror logs it, counts it
(``coordinator_mirror_drift_suspected_total``), writes a ``drift_suspected`` event and reconciles
with the coordinators once caught up.

Kafka refuses DeleteRecords on internal topics ("Cannot delete records of internal topic", as
``ReplicaManager.deleteRecordsOnLocalLog`` reads), so the live test points the mirror at an ordinary
topic (``topic`` setting) whose log start it can move; the pure parts are tested on their own.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from streaming.cluster.groups import log_start_drift


def test_log_start_drift_names_partitions_past_the_checkpoint() -> None:
    committed = {0: 10, 1: 5, 2: 7}
    starts = {0: 10, 1: 6, 2: 0, 3: 4}  # 3: a partition added since the checkpoint
    assert log_start_drift(committed, starts) == {1: (5, 6)}
    assert log_start_drift(committed, {}) == {} and log_start_drift({}, starts) == {}


@pytest.mark.broker
@pytest.mark.spark
@pytest.mark.slow
def test_log_start_past_the_checkpoint_is_reported_at_start(
    kafka: Any, spark: Any, mirrors: Any, tmp_path: Path
) -> None:
    from confluent_kafka import Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    from streaming.pipeline.recovery import read_committed_offsets
    from streaming.settings import load_settings

    topic = f"drift-src-{int(time.time() * 1000)}"
    admin = AdminClient({"bootstrap.servers": kafka.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(60)
    producer = Producer({"bootstrap.servers": kafka.bootstrap})

    def produce(n: int) -> None:
        for i in range(n):
            producer.produce(topic, key=b"\x00\x63not-a-key", value=f"v{i}".encode())
        assert producer.flush(30) == 0

    produce(5)
    settings = load_settings(
        bootstrap_servers=kafka.bootstrap,
        topic=topic,
        checkpoint_location=str(tmp_path / "ckpt"),
        trigger_interval_s=1.0,
        shuffle_partitions=2,
        http_port=0,
        reconcile_interval_s=3600.0,
        events_path=tmp_path / "events",
    )
    mirror = mirrors.start(settings)
    assert mirror.wait_ready(180)
    mirror.wait_batches(1, 120)
    mirror.stop()
    committed = read_committed_offsets(spark, str(tmp_path / "ckpt"), topic)
    assert committed == {0: 5}, committed  # the real checkpoint files, read back
    assert mirror.status.view().drift_suspected == {}

    produce(5)  # 10 records; then remove the first 8 while the mirror is down
    admin.delete_records([TopicPartition(topic, 0, 8)])[TopicPartition(topic, 0, 8)].result(60)

    mirror = mirrors.start(settings)
    assert mirror.wait_ready(180)
    mirror.wait_batches(1, 120)
    status = mirror.status.view()
    assert status.drift_suspected == {"log_start": 1}
    body, _ = mirror.metrics_exposition()
    assert b"coordinator_mirror_drift_suspected_total{" in body
    line = next(
        x
        for x in body.decode().splitlines()
        if x.startswith("coordinator_mirror_drift_suspected_total{") and 'reason="log_start"' in x
    )
    assert line.rsplit(" ", 1)[1] in ("1", "1.0"), line
    events = [
        json.loads(x)
        for f in sorted((tmp_path / "events").glob("*.jsonl"))
        for x in f.read_text().splitlines()
    ]
    drift = [e for e in events if e["type"] == "drift_suspected"]
    assert [(e["reason"], e["partitions"]) for e in drift] == [("log_start", ["0:5->8"])], drift
    # a reconciliation round runs once caught up, not after the hour-long interval
    deadline = time.monotonic() + 60
    while not mirror.status.reconcile_rounds("ok") and time.monotonic() < deadline:
        time.sleep(0.5)
    assert mirror.status.reconcile_rounds("ok") >= 1, mirror.status.view().reconcile_rounds
    assert not mirror.status.missed_tombstones
