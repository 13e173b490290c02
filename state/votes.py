"""Protocol votes and preferred assignors computed exactly as the coordinator does, incl. Java's tie order.

Only where the log carries each member's supported protocols -- KIP-848 members using the classic
protocol inside a consumer group (K=5 tag 0 ``ClassicMemberMetadata.SupportedProtocols``).  A
classic group's K=2 record carries only the selected protocol; there are no votes to compute and
none are fabricated.

The coordinator (``ClassicGroup.selectProtocol``; the same vote runs when 4.x converts a consumer
group back to a classic one, ``ClassicGroup.fromConsumerGroup``):

1. candidates = protocols every member supports (``supportedProtocols`` count == member count);
2. each member votes for the first protocol of *its own* list that is a candidate
   (``ClassicGroupMember.vote``);
3. the protocol with most votes wins -- ``votes.entrySet().stream().max(comparingInt(getValue))``
   over a ``java.util.HashMap``: on a tie the *first* entry in HashMap iteration order wins
   (``BinaryOperator.maxBy`` keeps the left operand on equality).

HashMap iteration order for String keys is reproducible: bucket ``(h ^ (h >>> 16)) & (cap - 1)``
with ``h = String.hashCode()``, buckets ascending, insertion order inside a bucket (buckets with 8+
colliding keys become trees -- not modelled; it takes 8 protocol names in one bucket).  The
insertion order of the vote map is the members' iteration order, which *is not* reproducible (a
TimelineHashMap keyed by member id): that only matters when two tied protocols share a bucket,
and we then use our member order (documented approximation).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from state.model import Member


def java_string_hash(s: str) -> int:
    """Java ``String.hashCode``: over UTF-16 code units, 32-bit wrap-around, signed."""
    h = 0
    for unit in _utf16_units(s):
        h = (31 * h + unit) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def _utf16_units(s: str) -> Iterable[int]:
    for ch in s:
        cp = ord(ch)
        if cp >= 0x10000:
            cp -= 0x10000
            yield 0xD800 + (cp >> 10)
            yield 0xDC00 + (cp & 0x3FF)
        else:
            yield cp


def _table_size(n: int) -> int:
    """Capacity of a default ``new HashMap<>()`` after ``n`` insertions (load factor 0.75)."""
    cap = 16
    while n > cap * 3 // 4:
        cap *= 2
    return cap


def java_hashmap_order(keys_in_insertion_order: Sequence[str]) -> list[str]:
    """Iteration order of a ``java.util.HashMap<String, ?>`` filled in the given order."""
    cap = _table_size(len(keys_in_insertion_order))
    seen: dict[str, int] = {}
    for k in keys_in_insertion_order:
        if k not in seen:
            h = java_string_hash(k) & 0xFFFFFFFF
            seen[k] = (h ^ (h >> 16)) & (cap - 1)
    # sorted() is stable: inside one bucket, insertion order is kept.
    return sorted(seen, key=seen.__getitem__)


def java_max_by_count(counts_in_insertion_order: Sequence[tuple[str, int]]) -> str | None:
    """``map.entrySet().stream().max(comparingByValue())`` for a HashMap built in this order."""
    counts = dict(counts_in_insertion_order)
    best: str | None = None
    for k in java_hashmap_order([k for k, _ in counts_in_insertion_order]):
        if best is None or counts[k] > counts[best]:
            best = k
    return best


def protocol_votes(members: Iterable[Member]) -> dict[str, Any] | None:
    """Supported-protocol counts, candidates, votes and the winner among classic-protocol members,
    or ``None`` when no member carries its supported protocols."""
    voters = [m for m in members if m.protocols is not None]
    if not voters:
        return None
    supported: dict[str, int] = {}
    for m in voters:
        for name in dict.fromkeys(m.protocols or ()):
            supported[name] = supported.get(name, 0) + 1
    candidates = {name for name, n in supported.items() if n == len(voters)}
    votes: dict[str, int] = {}
    for m in voters:
        choice = next((p for p in m.protocols or () if p in candidates), None)
        if choice is not None:
            votes[choice] = votes.get(choice, 0) + 1
    return {
        "supported": dict(sorted(supported.items())),
        "candidates": sorted(candidates),
        "votes": dict(sorted(votes.items())),
        "selected": java_max_by_count(list(votes.items())),
    }


def preferred_server_assignor(members: Iterable[Member]) -> str | None:
    """KIP-848 ``ConsumerGroup.preferredServerAssignor``: the most common ServerAssignor among members
    (ties in HashMap order); ``None`` when no member names one -- the broker then uses the first
    of ``group.consumer.assignors`` (``uniform`` by default), which the log does not show."""
    counts: dict[str, int] = {}
    for m in members:
        if m.server_assignor:
            counts[m.server_assignor] = counts.get(m.server_assignor, 0) + 1
    return java_max_by_count(list(counts.items()))
