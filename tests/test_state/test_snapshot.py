"""The JSON views of a group (`state.snapshot`): the summary of ``GET /groups`` and the full snapshot
of ``GET /groups/{id}``."""

from __future__ import annotations

import json

import pytest

from lab.records import Log, cm
from state.expiry import all_deadlines
from state.model import CLASSIC, CONSUMER, SHARE, STREAMS, Group
from state.replay import fold
from state.snapshot import SNAPSHOT_VERSION, epoch_of, snapshot, summary, timing_json


def test_summary_fields() -> None:
    log = Log()
    log.classic("g", 3, [cm("a")])
    log.commit("g", "t", 0, 1)
    g = fold(None, log.records).group
    assert g is not None
    s = summary(g)
    assert s == {
        "group_id": "g",
        "exists": True,
        "kind": CLASSIC,
        "type": "Classic",
        "state": "Stable",
        "epoch": 3,
        "members": 1,
        "offsets": 1,
        "last_change_ms": log.now_ms,
        "last_rebalance_ms": g.last_rebalance_ms,
        "next_deadline_ms": None,
    }


def test_the_snapshot_of_a_classic_group_with_offsets_and_a_pending_expiry() -> None:
    log = Log(partition=4, start_offset=100)
    log.classic("g", 3, [cm("b", instance_id="z"), cm("a", instance_id="y")], leader="a")
    log.commit("g", "t", 1, 11, metadata=None, leader_epoch=5)
    log.commit("g", "old", 0, 3)
    g = fold(None, log.records).group
    assert g is not None
    g.pending[("gone", 2)] = 42
    deadlines = all_deadlines(g)
    snap = snapshot(g, deadlines=deadlines)
    assert snap["snapshot_version"] == SNAPSHOT_VERSION
    assert (snap["kind"], snap["type"], snap["protocol_type"], snap["generation"]) == (
        CLASSIC,
        "Classic",
        "consumer",
        3,
    )
    assert [m["member_id"] for m in snap["members"]] == ["a", "b"]  # by instance id, then member id
    t1 = next(o for o in snap["offsets"] if o["topic"] == "t")
    assert (t1["offset"], t1["leader_epoch"], t1["metadata"]) == (11, 5, "")  # null metadata shown as ""
    assert (t1["source_partition"], t1["source_offset"]) == (4, 101)
    assert t1["expires_at_ms"] == deadlines[("t", 1)]
    assert [(o["topic"], o["abandoned"]) for o in snap["offsets"]] == [("old", True), ("t", False)]
    assert snap["abandoned_topics"] == {"old": {"partitions": [0], "expires_at_ms": deadlines[("old", 0)]}}
    assert snap["pending_confirmations"] == [{"topic": "gone", "partition": 2, "deadline_ms": 42}]
    assert snap["last_position"] == [4, 102]
    assert json.loads(json.dumps(snap)) == snap  # JSON-shaped all the way down
    assert summary(g, deadlines=deadlines)["next_deadline_ms"] == snap["next_deadline_ms"]


@pytest.mark.parametrize(
    ("kind", "protocol_type"), [(CONSUMER, "consumer"), (SHARE, "share"), (STREAMS, "streams")]
)
def test_a_modern_groups_protocol_type_and_epoch(kind: str, protocol_type: str) -> None:
    g = Group("m")
    g.kind = kind
    g.group_epoch, g.generation = 7, 99
    snap = snapshot(g)
    assert snap["protocol_type"] == protocol_type
    assert epoch_of(g) == 7 == summary(g)["epoch"]
    assert snap["rebalance_timing"] is None and timing_json(g) is None


def test_a_group_the_coordinator_no_longer_holds() -> None:
    """Offsets the mirror expired and waits on: ``exists`` false, no kind."""
    g = Group("gone")
    snap = snapshot(g)
    assert (snap["exists"], snap["kind"], snap["type"], snap["members"], snap["offsets"]) == (
        False,
        None,
        None,
        [],
        [],
    )
    assert summary(g)["exists"] is False and epoch_of(g) is None
