"""Offset expiry end to end: a broker with offsets.retention.minutes=1, the mirror with the same rules.

The mirror must drop each offset no earlier than its predicted deadline and no later than one
trigger after it -- driven by applyInPandasWithState's processing-time timeout, with no record
arriving for the group -- and the broker's own expiry tombstones must come later and agree.
"""

from __future__ import annotations

import json
import time
import urllib.parse
import urllib.request
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.http import get

pytestmark = [pytest.mark.broker, pytest.mark.spark, pytest.mark.slow]

TRIGGER_S = 1.0


@pytest.fixture(scope="module")
def short_retention_kafka(tmp_path_factory: pytest.TempPathFactory, kafka_version: str) -> Iterator[Any]:
    from lab.broker import BrokerSettings, LocalKafka

    broker = LocalKafka(
        BrokerSettings(
            kafka_version=kafka_version,
            offsets_topic_num_partitions=3,
            offsets_retention_minutes=1,
            offsets_retention_check_interval_ms=1000,
        ),
        tmp_path_factory.mktemp("short-retention"),
    ).start()
    yield broker
    broker.stop()


def test_mirror_expires_on_time_and_the_broker_agrees(
    mirrors: Any, short_retention_kafka: Any, tmp_path: Path
) -> None:
    from lab.lab import Lab
    from lab.scenarios import SCENARIOS
    from streaming.settings import load_settings

    lab = Lab(short_retention_kafka.bootstrap, short_retention_kafka.settings.kafka_version, run_id="x")
    try:
        result = SCENARIOS["expiring"].fn(lab)
        groups = list(result.groups)
        settings = load_settings(
            bootstrap_servers=short_retention_kafka.bootstrap,
            checkpoint_location=str(tmp_path / "ckpt"),
            trigger_interval_s=TRIGGER_S,
            shuffle_partitions=2,
            http_port=0,
            offsets_retention_minutes=1,
            offsets_retention_check_interval_ms=1000,
            events_path=tmp_path / "events",
        )
        mirror = mirrors.start(settings)
        assert mirror.wait_ready(180)
        mirror.wait_batches(1, 60)

        deadlines: dict[tuple[str, str, int], int] = {}
        for group_id in groups:
            status, snap = get(f"{mirror.http.url}/groups/{urllib.parse.quote(group_id)}")
            assert status == 200, snap
            for o in snap["offsets"]:
                assert o["expires_at_ms"] is not None, (group_id, o)
                deadlines[(group_id, o["topic"], o["partition"])] = o["expires_at_ms"]
        assert len(deadlines) == 4
        # the two rules: offsets-only group from each commit time, Empty classic group from the
        # time it became Empty (its K=2 currentStateTimestamp)
        _, simple = get(f"{mirror.http.url}/groups/{urllib.parse.quote(groups[0])}")
        assert all(o["expires_at_ms"] == o["commit_timestamp_ms"] + 60_000 for o in simple["offsets"])
        _, empty = get(f"{mirror.http.url}/groups/{urllib.parse.quote(groups[1])}")
        assert empty["state"] == "Empty"
        assert {o["expires_at_ms"] for o in empty["offsets"]} == {empty["state_since_ms"] + 60_000}

        # watch the mirror drop them
        gone_at: dict[tuple[str, str, int], int] = {}
        stop_at = max(deadlines.values()) / 1000 + 30
        while len(gone_at) < len(deadlines) and time.time() < stop_at:
            now = int(time.time() * 1000)
            for group_id in groups:
                status, snap = get(f"{mirror.http.url}/groups/{urllib.parse.quote(group_id)}")
                live = (
                    {(group_id, o["topic"], o["partition"]) for o in snap.get("offsets", [])}
                    if status == 200
                    else set()
                )
                for key in deadlines:
                    if key[0] == group_id and key not in live and key not in gone_at:
                        gone_at[key] = now
            time.sleep(0.2)
        assert gone_at.keys() == deadlines.keys()
        # When: the first micro-batch that starts after a deadline expires the offset -- one
        # trigger later at most, or one batch later when batches run longer than the trigger --
        # and the API shows it once that batch completed.  If the broker's own sweep (every
        # second here) gets there first, that batch applies the broker's tombstones instead: the
        # expiry is then the broker's, and it must not precede the mirror's deadline.
        mirror.wait_batches(1, 60)
        batch_ms = max(p["duration_ms"].get("triggerExecution", 0) for p in mirror.progress_history)
        trigger_ms = int(TRIGGER_S * 1000)
        events = [
            json.loads(line)
            for f in sorted((tmp_path / "events").glob("*.jsonl"))
            for line in f.read_text().splitlines()
        ]
        expired: dict[tuple[str, str, int], tuple[str, int]] = {}
        for e in events:
            if e["type"] == "offsets_expired":
                for tp in e["partitions"]:
                    topic, partition = tp.rsplit(":", 1)
                    key = (e["group_id"], topic, int(partition))
                    assert key not in expired, ("expired twice", key)
                    expired[key] = (e["origin"], e["at_ms"])
        assert expired.keys() == deadlines.keys()
        for key, deadline in deadlines.items():
            origin, at_ms = expired[key]
            assert at_ms >= deadline, (key, origin, at_ms - deadline)
            if origin == "mirror":
                assert at_ms <= deadline + max(trigger_ms, batch_ms) + 250, (key, at_ms - deadline, batch_ms)
            assert deadline <= gone_at[key] <= deadline + max(trigger_ms, batch_ms) + batch_ms + 1500, (
                key,
                gone_at[key] - deadline,
                batch_ms,
            )

        # the broker expires them too (its sweep runs every second) and deletes the groups
        views = lab.wait_group(groups[1], lambda v: not v.exists and not v.offsets, timeout_s=60)
        assert not views.exists
        assert not lab.describe(groups[0])[groups[0]].offsets
        # ... and the mirror, seeing the broker's tombstones, records no disagreement
        mirror.wait_batches(3, 60)
        events = [
            json.loads(line)
            for f in sorted((tmp_path / "events").glob("*.jsonl"))
            for line in f.read_text().splitlines()
        ]
        mine = [e for e in events if e["group_id"] in groups]
        assert {"offsets_expired", "group_deleted"} <= {e["type"] for e in mine}
        assert not [e for e in mine if e["type"] == "expiry_disagreement"], mine

        # the mirror-level counters count the same events, from the tallies the adapter made next
        # to them (the driver never parses event JSON).  A batch adds its tallies before it writes
        # its events file: files before a scrape <= the scrape <= files after the next batch.
        before = _event_counts(tmp_path / "events")
        scraped = _scraped_counts(mirror.http.url)
        mirror.wait_batches(1, 60)
        after = _event_counts(tmp_path / "events")
        assert before["offsets_expired", "mirror"] + before["offsets_expired", "broker"] >= 4
        assert before["group_deleted", "expired"] + before["group_deleted", "tombstone"] >= 1
        for key in before.keys() | after.keys():
            assert before[key] <= scraped[key] <= after[key], (key, before[key], scraped[key], after[key])
    finally:
        lab.close()


def _event_counts(events_dir: Path) -> Counter[tuple[str, str]]:
    """What the events files hold, keyed like the mirror-level counters' samples."""
    out: Counter[tuple[str, str]] = Counter()
    for f in sorted(events_dir.glob("*.jsonl")):
        for line in f.read_text().splitlines():
            e = json.loads(line)
            out["event", e["type"]] += 1
            if e["type"] == "offsets_expired":
                out["offsets_expired", e["origin"]] += e["count"]
            elif e["type"] == "group_deleted":
                out["group_deleted", e["reason"]] += 1
    return out


def _scraped_counts(url: str) -> Counter[tuple[str, str]]:
    from prometheus_client.parser import text_string_to_metric_families

    with urllib.request.urlopen(f"{url}/metrics", timeout=60) as resp:
        text = resp.read().decode()
    names = {
        "coordinator_mirror_events_total": ("event", "type"),
        "coordinator_mirror_offsets_expired_total": ("offsets_expired", "origin"),
        "coordinator_mirror_groups_deleted_total": ("group_deleted", "reason"),
    }
    out: Counter[tuple[str, str]] = Counter()
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name in names:
                kind, label = names[s.name]
                out[kind, s.labels[label]] = int(s.value)
    return out
