"""The mirror's predicted expiry against a real broker's expiry (offsets.retention.minutes=1).

A dedicated broker (tests/test_state/conftest.py) sweeps every second.  The ``expiring`` scenario
leaves an offsets-only group (expires from each commit time) and an Empty classic group (expires
from the time it became Empty); an OffsetCommit v2 with a 20 s retention adds an explicit
``expireTimestamp`` (value v1).  We wait -- bounded -- until the broker has written its tombstones,
capture ``__consumer_offsets``, and check for every offset that the mirror's deadline, computed
from the log *before* the broker's tombstone, precedes or matches that tombstone (and by no more
than the sweep interval plus slack); then that the mirror's own sweep at its deadlines agrees with
the broker record for record: every expiry confirmed, no disagreement, each group kept (Empty) until
the broker's group tombstone, then its state removed.
"""

from __future__ import annotations

import collections
import time
from pathlib import Path
from typing import Any

import pytest

from decoders import Record, Source, decode_record
from state import events as ev
from state.config import OffsetConfig
from state.expiry import GROUP_TOMBSTONE, all_deadlines, expire
from state.model import Group
from state.replay import fold
from streaming.app.capture_cmd import capture
from streaming.pipeline.capture_format import read_capture
from tests.support.brokers import CHECK_INTERVAL_MS, RETENTION_MINUTES

pytestmark = pytest.mark.broker

SETTINGS = OffsetConfig(retention_ms=RETENTION_MINUTES * 60_000, confirm_grace_ms=CHECK_INTERVAL_MS + 10_000)
EXPLICIT_RETENTION_MS = 20_000
SLACK_MS = CHECK_INTERVAL_MS + 5_000  # sweep interval + append/scheduling slack
WAIT_S = 150


def _capture(bootstrap: str, out: Path) -> dict[str, list[Any]]:
    capture(bootstrap, str(out))
    by: dict[str, list[Any]] = collections.defaultdict(list)
    for c in read_capture(out):
        r = decode_record(c.key, c.value, Source(c.partition, c.offset, c.timestamp_ms))
        assert isinstance(r, Record), r
        by[r.key.group_id].append(r)
    return by


def _tombstoned(records: list[Any]) -> bool:
    """Every offset of the group has a tombstone after its last commit, and the group one too."""
    live: set[tuple[str, int]] = set()
    group_tombstone = False
    for r in records:
        if r.record_type in (0, 1):
            tp = (r.key.topic, r.key.partition)
            if r.value is None:
                live.discard(tp)
            else:
                live.add(tp)
        elif r.record_type == 2:
            group_tombstone = r.value is None
    return not live and group_tombstone


def test_mirror_expiry_precedes_or_matches_the_broker(short_retention_kafka: Any, tmp_path: Path) -> None:
    from lab.lab import Lab
    from lab.scenarios import SCENARIOS, commit_with_retention

    kafka = short_retention_kafka
    lab = Lab(kafka.bootstrap, kafka.settings.kafka_version, run_id="exp")
    try:
        result = SCENARIOS["expiring"].fn(lab)
        explicit = lab.name("exp-explicit")
        topic = result.topics[0]
        commit_with_retention(lab, explicit, {(topic, 0): 3, (topic, 1): 4}, EXPLICIT_RETENTION_MS)
    finally:
        lab.close()
    groups = [*result.groups, explicit]

    deadline = time.monotonic() + WAIT_S
    while True:
        by = _capture(kafka.bootstrap, tmp_path / "capture.jsonl")
        if all(_tombstoned(by[g]) for g in groups):
            break
        assert time.monotonic() < deadline, {
            g: [(r.record_type, r.value is None) for r in by[g]] for g in groups
        }
        time.sleep(3)

    checked = 0
    for gid in groups:
        records = by[gid]
        first_tomb = next(i for i, r in enumerate(records) if r.record_type in (0, 1) and r.value is None)
        before = fold(None, records[:first_tomb], config=SETTINGS).group
        assert before is not None
        predicted = all_deadlines(before, SETTINGS)
        tombstone_at = {
            (r.key.topic, r.key.partition): r.source.timestamp_ms
            for r in records[first_tomb:]
            if r.record_type in (0, 1) and r.value is None
        }
        assert set(tombstone_at) == set(predicted), gid
        for tp, at in tombstone_at.items():
            d = predicted[tp]
            assert d is not None, (gid, tp)
            assert d <= at <= d + SLACK_MS, (gid, tp, d, at)  # precedes or matches, never late
            checked += 1

        # The whole log folded in one go: every broker tombstone came at/after the deadline.
        whole = fold(None, records, config=SETTINGS)
        assert whole.group is None, gid  # the broker deleted the group (4.x: a K=2 tombstone)
        assert not [e for e in whole.events if isinstance(e, ev.ExpiryDisagreement)], gid
        expired = sum(e.count for e in whole.events if isinstance(e, ev.OffsetsExpired))
        assert expired == len(predicted) and not [e for e in whole.events if isinstance(e, ev.OffsetsDeleted)]

        # The mirror sweeping on its own at its deadlines, then reading the broker's tombstones.
        g: Group | None = before
        for d in sorted({d for d in predicted.values() if d is not None}):
            assert g is not None
            g, _ = expire(g, d, SETTINGS)
        # Empty with no offsets: the broker deletes it at its next sweep, so it stays until then
        assert g is not None and g.exists and g.state == "Empty" and not g.offsets, gid
        assert GROUP_TOMBSTONE in g.pending, gid
        res = fold(g, records[first_tomb:], config=SETTINGS)
        assert res.group is None, gid  # all confirmed: the adapter removes the state row
        assert not [e for e in res.events if isinstance(e, ev.ExpiryDisagreement)], gid
        deleted = [e for e in res.events if isinstance(e, ev.GroupDeleted)]
        assert [e.reason for e in deleted] == ["expired"], gid
    assert checked == 6  # 2 offsets-only + 2 Empty classic + 2 explicit-retention offsets
