"""Why a KIP-848 / share / streams group's target assignment epoch moved: a rebalance, or a bump the
coordinator makes without one -- counted apart so that a rebalance storm is a storm of rebalances.

What Kafka writes (checked on real 4.4.0 and 4.3.1 brokers, the records in
tests/test_state/data/epoch_bumps-4.4.0.jsonl; docs/insights.md "What is and is not a rebalance"):

* **a static member rejoining** with its ``group.instance.id``: the old member's records are
  tombstoned and the new member id takes over its target assignment in one write.  A KIP-848
  consumer member bumps no epoch; a streams member (4.4) whose process id changed bumps the group
  epoch (same metadata hash) and the target assignment epoch, with no task moving -- **static
  rejoin**;
* **a share group's partitions initialised** (K=15: a topic moves into ``initializedTopics``) with
  no member joining or leaving: the coordinator bumps the group epoch (same metadata hash) and the
  target assignment epoch so that the members get the new share-partitions -- **share
  initialisation** (after a member's first join, and after ``kafka-share-groups.sh
  --delete-offsets`` at the next join).  An offset reset of an (Empty) share group rewrites K=15 and
  bumps nothing;
* every other bump -- members joined or left, subscriptions or topic metadata changed (the group's
  metadata hash), a topology or regex changed, or nothing the log says -- is a **rebalance**.

The fold notes, after every group record, what happened since the last bump (`Group.bump_flags`:
bits, and from `STATIC_LEAVE` up the static members that left and were not replaced; `note`), and
classifies the next bump by it (`cause`).  Classic generations are always
rebalances: a classic static member's rejoin rewrites the group with the same generation.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from state import events as ev
from state.model import CONSUMER, SHARE, STREAMS, Group

JOINED: Final = 1
LEFT: Final = 2
REPLACED: Final = 4  # a static member came back with a new member id
METADATA: Final = 8  # the group's metadata hash, topology or regexes changed
SHARE_INIT: Final = 16  # share-partitions were initialised
#: static members that left and were not replaced (yet): counted from this bit up
STATIC_LEAVE: Final = 256

REBALANCE: Final = "rebalance"
STATIC_REJOIN: Final = "static_rejoin"
SHARE_INITIALIZATION: Final = "share_initialization"
CAUSES: Final = (REBALANCE, STATIC_REJOIN, SHARE_INITIALIZATION)
#: the group counter each non-rebalance cause is counted in (`state.model.COUNTERS`)
COUNTER: Final = {STATIC_REJOIN: "static_rejoins", SHARE_INITIALIZATION: "share_initializations"}
#: the records whose value changes the group's subscription-level metadata (K=4 partition
#: metadata, K=16 regex, K=23 topology); group metadata (K=3/11/17) is compared by its hash
_METADATA_TYPES: Final = frozenset({4, 16, 23})
_GROUP_METADATA: Final = frozenset({3, 11, 17})
_SHARE_TOPICS: Final = 15
_MODERN: Final = frozenset({CONSUMER, SHARE, STREAMS})

Prior = tuple[Any, frozenset[str]]


def before(g: Group) -> Prior:
    """What `note` compares a record's effect with."""
    initialized = frozenset((g.share_topics or {}).get("initialized") or ())
    return g.metadata_hash, initialized


def note(g: Group | None, prior: Prior, record_type: int, events: Sequence[ev.Event]) -> None:
    """After one group record: what it changed, added to ``g.bump_flags``."""
    if g is None or g.kind not in _MODERN:
        return
    flags = g.bump_flags
    for e in events:
        if isinstance(e, ev.MemberJoined):
            flags |= JOINED
        elif isinstance(e, ev.MemberLeft):
            # a static member's leave may be the first half of its replacement (the coordinator
            # removes the old member id and adds the new one in one write): counted until then
            flags = flags + STATIC_LEAVE if e.instance_id else flags | LEFT
        elif isinstance(e, ev.MemberReplaced):
            flags |= REPLACED
            if flags >= STATIC_LEAVE:
                flags -= STATIC_LEAVE
    hash_moved = record_type in _GROUP_METADATA and prior[0] is not None and g.metadata_hash != prior[0]
    if record_type in _METADATA_TYPES or hash_moved:
        flags |= METADATA
    elif record_type == _SHARE_TOPICS:
        now = frozenset((g.share_topics or {}).get("initialized") or ())
        if now - prior[1]:
            flags |= SHARE_INIT
    g.bump_flags = flags


def cause(flags: int) -> str:
    """The cause of a target assignment epoch bump, from what happened since the previous one."""
    if flags & (JOINED | LEFT | METADATA) or flags >= STATIC_LEAVE:
        return REBALANCE
    if flags & REPLACED:
        return STATIC_REJOIN
    if flags & SHARE_INIT:
        return SHARE_INITIALIZATION
    return REBALANCE
