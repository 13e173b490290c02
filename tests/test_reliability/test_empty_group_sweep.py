"""A group that goes Empty without committed offsets lives until the coordinator's next cleanup sweep.

``GroupCoordinatorShard.cleanupGroupMetadata`` runs every ``offsets.retention.check.interval.ms``
and is the only thing that deletes such a group (writing its tombstones); until then ListGroups
lists it, Empty.  The mirror must agree: keep the group (Empty) until the tombstone arrives, then
drop it (``group_deleted`` reason "expired", no disagreement).

A dedicated broker sweeps every ``SWEEP_MS`` -- long enough to look at both sides in between,
short enough to wait for.  The sweep's phase is the broker's (its timer starts when the
coordinator loads), so a sweep can fall inside the few seconds a check takes: then the check is
inconclusive and runs again with a new group (bounded).

* the pure fold over the real bytes (a KIP-848 and a classic group whose members leave without
  committing), captured before and after the sweep;
* the running mirror, against the AdminClient, for a KIP-848 group.
"""

from __future__ import annotations

import collections
import json
import time
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from decoders import Record, Source, decode_record
from state import events as ev
from state.config import OffsetConfig
from state.expiry import GROUP_TOMBSTONE, expire
from state.replay import fold
from streaming.app.capture_cmd import capture
from streaming.pipeline.capture_format import read_capture
from tests.support.brokers import start_broker
from tests.support.http import get

pytestmark = [pytest.mark.broker, pytest.mark.slow]

SWEEP_MS = 30_000
CONFIG = OffsetConfig(confirm_grace_ms=SWEEP_MS + 30_000)
ATTEMPTS = 5


@pytest.fixture(scope="module")
def sweeping_kafka(tmp_path_factory: pytest.TempPathFactory, kafka_version: str) -> Iterator[Any]:
    broker = start_broker(
        tmp_path_factory,
        "kafka-sweep",
        kafka_version=kafka_version,
        offsets_topic_num_partitions=3,
        offsets_retention_check_interval_ms=SWEEP_MS,
    )
    yield broker
    broker.stop()


def _records(bootstrap: str, out: Path) -> dict[str, list[Record[Any, Any]]]:
    capture(bootstrap, str(out))
    by: dict[str, list[Record[Any, Any]]] = collections.defaultdict(list)
    for c in read_capture(out):
        r = decode_record(c.key, c.value, Source(c.partition, c.offset, c.timestamp_ms))
        assert isinstance(r, Record), r
        by[r.key.group_id].append(r)
    return by


def _leave_without_commit(lab: Any, base: str, protocol: str) -> str:
    topic = lab.topic(f"{base}-t", partitions=2)
    group = lab.name(base)
    member = lab.member(group, [topic], protocol=protocol, name=base)
    lab.wait_stable(group, 1)
    member.wait_consumed(lab.ends(topic))
    member.close()  # leaves, nothing committed
    return group


def _group_tombstone_types(protocol: str) -> int:
    return 3 if protocol == "consumer" else 2


@pytest.mark.parametrize("protocol", ["consumer", "classic"])
def test_fold_keeps_an_emptied_group_until_the_sweep_tombstone(
    sweeping_kafka: Any, tmp_path: Path, protocol: str
) -> None:
    from lab.lab import Lab, ProbeError

    lab = Lab(sweeping_kafka.bootstrap, sweeping_kafka.settings.kafka_version, run_id=f"sw{protocol[:3]}")
    try:
        for attempt in range(ATTEMPTS):
            group = _leave_without_commit(lab, f"sweep-{attempt}", protocol)
            view = lab.wait_group(group, lambda v: v.state == "Empty", 60, what="Empty")
            by = _records(sweeping_kafka.bootstrap, tmp_path / f"before-{attempt}.jsonl")
            try:
                still = lab.describe(group)[group]
            except ProbeError as exc:
                if "GroupIdNotFound" not in str(exc):
                    raise
                continue  # swept between the capture and the describe: inconclusive, again

            records = by[group]
            tomb = _group_tombstone_types(protocol)
            if not still.exists or any(r.record_type == tomb and r.value is None for r in records):
                continue  # the sweep came while we looked: inconclusive, again with a new group
            assert view.exists and not view.offsets and still.state == "Empty"
            res = fold(None, records, config=CONFIG)
            g = res.group
            assert g is not None and g.exists and g.state == "Empty" and not g.offsets, g
            # the expiry step at "now" (as the adapter runs it) keeps it and waits for the sweep
            g, events = expire(g, int(time.time() * 1000), CONFIG)
            assert g is not None and g.exists and g.state == "Empty", g
            assert GROUP_TOMBSTONE in g.pending and events == []
            break
        else:
            pytest.fail(f"the broker's sweep fell inside every one of {ATTEMPTS} checks")

        lab.wait_group(group, lambda v: not v.exists, (SWEEP_MS + 30_000) / 1000, what="deleted")
        after = _records(sweeping_kafka.bootstrap, tmp_path / "after.jsonl")[group]
        assert after[: len(records)] == records
        rest = after[len(records) :]
        assert any(r.record_type == tomb and r.value is None for r in rest), rest
        res = fold(g, rest, config=CONFIG)
        assert res.group is None
        deleted = [e for e in res.events if isinstance(e, ev.GroupDeleted)]
        assert [(e.reason, e.source_partition is not None) for e in deleted] == [("expired", True)]
        assert not [e for e in res.events if isinstance(e, ev.ExpiryDisagreement)]
    finally:
        lab.close()


@pytest.mark.spark
def test_mirror_lists_an_emptied_group_as_long_as_the_coordinator(
    mirrors: Any, sweeping_kafka: Any, tmp_path: Path
) -> None:
    from lab.lab import Lab
    from streaming.settings import load_settings

    lab = Lab(sweeping_kafka.bootstrap, sweeping_kafka.settings.kafka_version, run_id="swm")
    try:
        _leave_without_commit(lab, "warm", "consumer")  # __consumer_offsets exists before the mirror
        settings = load_settings(
            bootstrap_servers=sweeping_kafka.bootstrap,
            checkpoint_location=str(tmp_path / "ckpt"),
            trigger_interval_s=1.0,
            shuffle_partitions=2,
            http_port=0,
            offsets_retention_check_interval_ms=SWEEP_MS,
            events_path=tmp_path / "events",
        )
        mirror = mirrors.start(settings)
        assert mirror.wait_ready(180)
        url = mirror.http.url
        agreed = None
        for attempt in range(ATTEMPTS):
            group = _leave_without_commit(lab, f"msweep-{attempt}", "consumer")
            lab.wait_group(group, lambda v: v.state == "Empty", 60, what="Empty")
            mirror.wait_batches(2, 120)  # every record written so far is folded
            status, snap = get(f"{url}/groups/{urllib.parse.quote(group)}")
            still = lab.describe(group)[group]
            if not still.exists:
                continue  # the sweep came while we looked: inconclusive, again with a new group
            assert status == 200, snap
            assert (snap["exists"], snap["state"], snap["type"], snap["offsets"]) == (
                True,
                "Empty",
                "Consumer",
                [],
            )
            assert {"topic": "", "partition": -1} in [
                {k: p[k] for k in ("topic", "partition")} for p in snap["pending_confirmations"]
            ]
            agreed = group
            break
        assert agreed is not None, f"the broker's sweep fell inside every one of {ATTEMPTS} checks"

        lab.wait_group(agreed, lambda v: not v.exists, (SWEEP_MS + 30_000) / 1000, what="deleted")
        mirror.wait_batches(2, 120)
        status, snap = get(f"{url}/groups/{urllib.parse.quote(agreed)}")
        assert status == 404 or not snap.get("exists"), snap
        events = [
            json.loads(line)
            for f in sorted((tmp_path / "events").glob("*.jsonl"))
            for line in f.read_text().splitlines()
        ]
        mine = [e for e in events if e["group_id"] == agreed]
        deleted = [e for e in mine if e["type"] == "group_deleted"]
        # one deletion, from the broker's tombstone record (it has a log position)
        assert [(e["reason"], e["source_offset"] is not None) for e in deleted] == [("expired", True)], mine
        assert not [e for e in mine if e["type"] == "expiry_disagreement"], mine
    finally:
        lab.close()
