"""Protocol votes and preferred assignors (`state.votes`), computed exactly as the coordinator does:
Java's ``String.hashCode`` and HashMap iteration order for ties."""

from __future__ import annotations

import pytest

from state.model import Member
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
