"""Records lost to retention, end to end (issue 38): a topic whose broker rolls a segment every second
and deletes segments older than four, a producer writing to it, a group that committed and
stopped.  The broker deletes what the group never read; the mirror counts exactly the records
between the committed offset and the new log start -- compared with the log start offsets Kafka
reports -- in ``GET /groups/{id}/lag``, ``/metrics`` and its ``records_lost`` change events, warns
with the retention margin before, and counts nothing twice after a restart.  The alert's promtool
tests: dashboards/prometheus/tests/retention_test.yaml; on a live Prometheus:
tests/test_live/test_metrics_live.py."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from lab.retention import SteadyProducer, commit_and_stop, log_offsets, short_retention_topic
from tests.support.live_mirror import get, lag_of, live_settings
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.broker, pytest.mark.spark]

GROUP_IDS = ["ret/stopped ✓", "ret-stopped-2"]


def test_the_mirror_counts_exactly_what_retention_deleted(
    mirrors: Any, kafka: Any, lab: Any, tmp_path: Path
) -> None:
    events = tmp_path / "events"
    settings = live_settings(kafka.bootstrap, tmp_path, cluster_name="retention", events_path=str(events))
    mirror = mirrors.start(settings, ready_s=300)
    topic = short_retention_topic(lab, "lost-to-retention", 2, segment_ms=1000, retention_ms=4000)
    producer = SteadyProducer(lab, topic, 2, rate=20)
    try:
        wait_for("records produced", lambda: producer.sent >= 40, 60)
        ends = log_offsets(lab, topic, 2)
        committed = {p: hw for p, (_, hw) in ends.items()}  # the group read everything so far, then stopped
        group = GROUP_IDS[0]
        commit_and_stop(lab, group, topic, committed)

        # before the loss: the margin -- records to the log start, and seconds at today's rates
        def margin_seen() -> Any:
            parts = lag_of(mirror, group).get("partitions") or []
            seen = [x["retention_margin"] for x in parts if x["retention_margin"] and x["records_lost"] == 0]
            return [m for m in seen if m["records"] > 0 and m["seconds"] is not None]

        margins = wait_for("a closing retention margin before the loss", margin_seen, 120)
        assert all(0 < m["seconds"] < 60 for m in margins), margins

        # the broker deletes past the committed offsets
        wait_for(
            "Kafka's log start past the committed offsets",
            lambda: all(s > committed[p] for p, (s, _) in log_offsets(lab, topic, 2).items()),
            120,
        )
    finally:
        producer.close()
    # once the producer stopped, the active segment stays: the log start settles
    settled = wait_for("Kafka's log start settled", lambda: _settled(lab, topic), 60)
    starts = {p: s for p, (s, _) in settled.items()}
    want = {p: starts[p] - committed[p] for p in starts}
    assert all(n > 0 for n in want.values()), (starts, committed)

    def counted() -> Any:
        body = lag_of(mirror, group)
        got = {x["partition"]: (x["records_lost"], x["log_start_offset"]) for x in body["partitions"]}
        return body if got == {p: (want[p], starts[p]) for p in starts} else None

    body = wait_for(f"records_lost == Kafka's log start - committed ({want})", counted, 120)
    assert body["records_lost"] == sum(want.values())
    assert all(x["committed_offset"] == committed[x["partition"]] for x in body["partitions"])
    assert body["retention_margin"]["records"] == 0

    # the same in /metrics, and as change events (each deleted position once)
    text = get(f"{mirror.http.url}/metrics").decode()
    for p, n in want.items():
        labels = f'cluster_name="retention",group="{group}",topic="{topic}",partition="{p}"'
        line = f"coordinator_mirror_partition_records_lost_total{{{labels}}} {n}"
        assert line in text, [x for x in text.splitlines() if "records_lost" in x]
    assert (
        'coordinator_mirror_group_records_lost_total{cluster_name="retention",'
        f'group="{group}"}} {sum(want.values())}' in text
    )
    lost_events = [
        e
        for f in sorted(events.glob("health-*.jsonl"))
        for e in map(json.loads, f.read_text().splitlines())
        if e["type"] == "records_lost" and e["group_id"] == group
    ]
    per_partition: dict[int, int] = {}
    for e in lost_events:
        assert e["topic"] == topic and e["committed_offset"] == committed[e["partition"]]
        per_partition[e["partition"]] = per_partition.get(e["partition"], 0) + e["records"]
    assert per_partition == want, lost_events
    assert max(e["records_total"] for e in lost_events if e["partition"] == 0) == want[0]

    # a restart on the same checkpoint counts nothing twice (the counts persist with the history)
    mirror.stop()
    again = mirrors.start(settings, ready_s=300)
    time.sleep(4)  # a few offsets rounds
    wait_for("the group's lag after the restart", lambda: lag_of(again, group).get("partitions"), 60)
    body = lag_of(again, group)
    assert {x["partition"]: x["records_lost"] for x in body["partitions"]} == want
    assert body["records_lost"] == sum(want.values())


def _settled(lab: Any, topic: str) -> Any:
    first = log_offsets(lab, topic, 2)
    time.sleep(6)  # longer than retention.ms plus the broker's check interval
    second = log_offsets(lab, topic, 2)
    return second if first == second else None
