"""Fidelity on real bytes: the session broker's ``__consumer_offsets``, folded, equals what Kafka's
AdminClient reported for every scenario group (tests/conftest.py ``scenarios`` + ``capture_file``).

What the log cannot show, and how each comparison handles it:

* KIP-848/share topic **ids** are translated with the map the log itself taught the mirror (offset
  commit v4 topicIds, share K=15 TopicName); every scenario topic's name was learned that way -- the
  test asserts no id is left untranslated instead of borrowing the cluster's topic ids.
* A KIP-848 group's assignor: the log carries each member's ServerAssignor (null here); the broker
  then reports its default, the first of ``group.consumer.assignors`` (``uniform``).
* ``txn_abort``: the aborted TxnOffsetCommit created an in-memory simple group in the coordinator
  that no record ever describes (the transaction's records are invisible under read_committed and
  no K=2 is written for simple groups) -- the mirror has nothing for it, as a coordinator reloading
  the partition would.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from decoders import decode_arrow
from state import events as ev
from state.expiry import expires_at_ms
from state.fold import fold_columns
from state.replay import FoldResult, fold
from streaming.pipeline.capture_format import read_capture
from tests.support.fidelity import (
    _compare,
    _records_by_group,
)

pytestmark = pytest.mark.broker

IN_MEMORY_ONLY = {"txn_abort"}


@pytest.fixture(scope="module")
def folded(capture_file: Path) -> dict[str, FoldResult]:
    return {gid: fold(None, recs) for gid, recs in _records_by_group(capture_file).items()}


def test_every_scenario_group_matches_the_admin_client(
    scenarios: dict[str, Any], folded: dict[str, FoldResult]
) -> None:
    compared = 0
    for name, result in scenarios.items():
        for gid, view in result.groups.items():
            if name in IN_MEMORY_ONLY:
                assert view.exists and view.simple and not view.offsets, (name, view)
                assert gid not in folded or folded[gid].group is None, name
                continue
            _compare(name, view, folded.get(gid, FoldResult(None, [], [])))
            compared += 1
    total = sum(len(r.groups) for n, r in scenarios.items() if n not in IN_MEMORY_ONLY)
    assert compared == total >= 15  # every default scenario's groups were compared


def test_scenario_events(scenarios: dict[str, Any], folded: dict[str, FoldResult]) -> None:
    def events(name: str) -> list[ev.Event]:
        return folded[scenarios[name].group.group_id].events

    facts = scenarios["static_restart"].facts
    replaced = [e for e in events("static_restart") if isinstance(e, ev.MemberReplaced)]
    assert [(e.instance_id, e.before, e.after) for e in replaced] == [
        ("static-a", facts["old_member_id"], facts["new_member_id"])
    ]
    left = [e for e in events("member_leave") if isinstance(e, ev.MemberLeft)]
    assert [e.client_id for e in left] == [scenarios["member_leave"].facts["left_client_id"]]
    crash = [e for e in events("member_crash") if isinstance(e, ev.MemberLeft)]
    assert [e.member_id for e in crash] == [scenarios["member_crash"].facts["crashed_member_id"]]
    sizes = [
        len(g.members)
        for g in [folded[scenarios["cooperative_grow_shrink"].group.group_id].group]
        if g is not None
    ]
    assert sizes == [2]
    coop = folded[scenarios["cooperative_grow_shrink"].group.group_id].group
    assert coop is not None and coop.counters["rebalances"] >= 3 and coop.counters["member_joins"] == 3
    deleted = [e for e in events("delete_offsets") if isinstance(e, ev.OffsetsDeleted)]
    dropped = {f"{t}:{p}" for t, p in scenarios["delete_offsets"].facts["deleted"]}
    assert deleted and set(deleted[-1].partitions) == dropped
    gone = [e for e in events("delete_group") if isinstance(e, ev.GroupDeleted)]
    assert [e.reason for e in gone] == ["tombstone"]
    kip = folded[scenarios["kip848_leave"].group.group_id].group
    assert kip is not None and kip.counters["member_leaves"] == 2


def test_explicit_retention_is_the_offsets_deadline(
    scenarios: dict[str, Any], folded: dict[str, FoldResult]
) -> None:
    sc = scenarios["explicit_retention"]
    g = folded[sc.group.group_id].group
    assert g is not None
    for (t, p), e in g.offsets.items():
        assert e[4] is not None and e[4] - e[3] == sc.facts["retention_ms"]  # value v1 expireTimestamp
        assert expires_at_ms(g, t, p) == e[4]


def test_batch_path_equals_per_record_path_on_real_bytes(
    capture_file: Path, folded: dict[str, FoldResult]
) -> None:
    caps = list(read_capture(capture_file))
    raw = pa.RecordBatch.from_pydict(
        {
            "key": pa.array([c.key for c in caps], pa.binary()),
            "value": pa.array([c.value for c in caps], pa.binary()),
            "partition": pa.array([c.partition for c in caps], pa.int32()),
            "offset": pa.array([c.offset for c in caps], pa.int64()),
            "timestamp": pa.array([c.timestamp_ms for c in caps], pa.int64()),
        }
    )
    decoded = decode_arrow(raw).to_pydict()
    assert set(decoded["status"]) == {"ok"}
    by_group: dict[str, list[int]] = {}
    for i, gid in enumerate(decoded["group_id"]):
        by_group.setdefault(gid, []).append(i)
    seen = set()
    for gid, rows in by_group.items():
        rows.sort(key=lambda i: (decoded["source_partition"][i], decoded["source_offset"][i]))
        got = fold_columns(None, {name: [values[i] for i in rows] for name, values in decoded.items()})
        want = folded[str(gid)]
        assert got.group == want.group, gid
        assert got.events == want.events, gid
        seen.add(gid)
    assert seen == set(folded)
