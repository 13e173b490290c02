"""Protocol votes (Java's HashMap tie order) and the events' flat JSON shape."""

from __future__ import annotations

import json

import pytest

from lab.records import Log, cm
from state import events as ev
from state.model import Member
from state.replay import fold
from state.votes import java_hashmap_order, java_max_by_count, java_string_hash, protocol_votes


@pytest.mark.parametrize(
    ("s", "h"),
    [
        ("g", 103),
        ("my-group", -1906497762),
        ("console-consumer-12345", 158455506),
        ("polygenelubricants", -2147483648),
        ("", 0),
        ("range", 108280125),
        ("🙂", 31 * 0xD83D + 0xDE42),  # a surrogate pair: two UTF-16 code units
    ],
)
def test_java_string_hash(s: str, h: int) -> None:
    assert java_string_hash(s) == h


def test_hashmap_order_is_bucket_order_and_ties_keep_the_first() -> None:
    # bucket = (h ^ h>>>16) & 15: "range" -> 3 ... whatever the buckets, order follows them
    names = ["roundrobin", "range", "cooperative-sticky", "sticky"]
    order = java_hashmap_order(names)
    assert sorted(order) == sorted(names)
    buckets = []
    for n in order:
        h = java_string_hash(n) & 0xFFFFFFFF
        buckets.append((h ^ (h >> 16)) & 15)
    assert buckets == sorted(buckets)
    # a tie goes to the first in that order, whatever the insertion order
    assert java_max_by_count([(n, 1) for n in names]) == order[0]
    assert java_max_by_count([(n, 1) for n in reversed(names)]) == order[0]
    assert java_max_by_count([("range", 1), ("sticky", 2)]) == "sticky"
    assert java_max_by_count([]) is None


def _member(mid: str, protocols: list[str] | None) -> Member:
    m = Member(mid)
    m.protocols = None if protocols is None else tuple(protocols)
    return m


def test_votes_each_member_votes_for_its_first_candidate() -> None:
    members = [
        _member("a", ["cooperative-sticky", "range"]),
        _member("b", ["cooperative-sticky", "range"]),
        _member("c", ["range", "cooperative-sticky"]),
        _member("d", None),  # not a classic-protocol member
    ]
    assert protocol_votes(members) == {
        "supported": {"cooperative-sticky": 3, "range": 3},
        "candidates": ["cooperative-sticky", "range"],
        "votes": {"cooperative-sticky": 2, "range": 1},
        "selected": "cooperative-sticky",
    }
    assert protocol_votes([_member("x", None)]) is None
    tie = protocol_votes([_member("a", ["range", "roundrobin"]), _member("b", ["roundrobin", "range"])])
    assert tie is not None and tie["selected"] == java_hashmap_order(["range", "roundrobin"])[0]


def test_events_are_flat_json_and_round_trip() -> None:
    log = Log()
    log.classic("g", 1, [cm("a", assigned={"t": [0]})])
    log.commit("g", "t", 0, 1)
    log.classic("g", 3, [cm("b", assigned={"t": [0]}, instance_id="i")])
    log.classic("g", 4, [])
    log.offset_tombstone("g", "t", 0)  # an admin delete of an Empty group's offset
    log.classic_tombstone("g")
    events = fold(None, log.records).events
    assert {e.TYPE for e in events} >= {
        "group_created",
        "member_joined",
        "member_left",
        "rebalance_completed",
        "state_changed",
        "leader_changed",
        "assignment_changed",
        "offsets_committed",
        "offsets_deleted",
        "group_deleted",
    }
    for e in events:
        obj = e.to_json()
        assert obj["type"] == e.TYPE and obj["group_id"] == "g"
        assert {"source_partition", "source_offset", "source_timestamp_ms"} <= set(obj)
        for k, v in obj.items():
            assert not isinstance(v, dict), (e.TYPE, k)
            if isinstance(v, list):
                assert all(isinstance(x, str | int) for x in v), (e.TYPE, k)
        assert ev.event_from_json(json.loads(json.dumps(obj))) == e
    rebal = next(e for e in events if isinstance(e, ev.RebalanceCompleted) and e.after == 3)
    assert rebal.to_json() == {
        "type": "rebalance_completed",
        "group_id": "g",
        "source_partition": 0,
        "source_offset": 2,
        "source_timestamp_ms": log.now_ms,
        "before": 1,
        "after": 3,
        "skipped": 1,
        "cause": "rebalance",
    }
