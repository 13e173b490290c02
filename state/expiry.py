"""Kafka's offset-expiry and group-deletion rules (spec §6) as small numbered pure functions of time.

Each rule mirrors a coordinator method; ``now_ms`` is always an argument.

* Rule 1 -- an explicit ``expireTimestamp`` (OffsetCommitValue v1) wins: expired iff
  ``now >= expireTimestamp`` (2.1+ ``OffsetExpirationConditionImpl``), ``now > expireTimestamp``
  in <=2.0 (``GroupMetadata.removeExpiredOffsets`` compared ``expireTimestamp < now``).
* Rule 2 -- classic group with a protocol type, Empty: every offset expires ``retention`` after the
  time the group became Empty (``currentStateTimestamp``), or after its own commit when that is
  unknown (V0/V1 group records) -- ``ClassicGroup.offsetExpirationCondition``.
* Rule 3 -- classic ``consumer`` group, Stable, subscriptions known: only offsets of topics no
  member subscribes to, from their commit time (KIP-496; "Stable" since KAFKA-13636).
* Rule 4 -- no protocol type (simple / offsets-only group): every offset from its commit time.
* Rule 5 -- KIP-848 consumer group (4.x): offsets of topics outside the group's subscribed topic
  names (incl. regex-resolved ones), from their commit time, *in any state*
  (``ConsumerGroup``/``ModernGroup.offsetExpirationCondition``, ``isSubscribedToTopic``).
* Rule 6 -- streams group (4.1+): from commit time; topics of the topology's source and repartition
  source topics are protected unless the group is Empty or has no topology
  (``StreamsGroup.isSubscribedToTopic``).
* Rule 7 -- anything else (a non-empty ``connect`` group, a share group, a classic group still
  joining its first generation): nothing expires.
* Rule 8 -- a group that is Empty with no offsets left is deleted at the coordinator's next
  cleanup sweep (``GroupCoordinatorShard.cleanupGroupMetadata`` -> ``maybeDeleteGroup``, every
  ``offsets.retention.check.interval.ms``; nothing deletes it earlier -- no path of
  ``GroupMetadataManager`` removes a group when it becomes Empty); share groups never
  (``ShareGroup.shouldExpire``).  The sweep writes the group's tombstone(s): always in 4.x
  (``ClassicGroup.createGroupTombstoneRecords``, ``ConsumerGroup``/``StreamsGroup``'s K=3/K=17
  last), in 2.1-3.x only if ``generation > 0``.  Until then the group is listed (ListGroups) in
  state Empty, so the mirror keeps it so: `expire` only *arms* a wait for the tombstone
  (``GROUP_TOMBSTONE`` in ``Group.pending``); the tombstone deletes the group
  (``GroupDeleted`` reason "expired").  Where no tombstone is expected (2.1-3.x, generation 0:
  an offsets-only group) the sweep that wrote the last offset tombstones deleted the group, so
  the mirror deletes it once no offset expiry awaits its tombstone.
* <=2.0 -- every offset had an ``expireTimestamp`` (commit time + retention); group state was
  irrelevant (``GroupMetadata.removeExpiredOffsets`` at AK 2.0.0).

What a log reader cannot see, and how the mirror treats it: pending transactional offsets block a
partition's expiry in the broker (4.x) -- under ``read_committed`` the mirror never sees them, so it
may expire such an offset up to one transaction earlier than the broker (counted as a disagreement
only if the broker's tombstone then never comes).

**Agreement with the broker** (the fidelity signal `ExpiryDisagreement`): the broker's own
tombstones arrive in the log.  For a tombstone of an offset the mirror still holds, with the
mirror's deadline ``d`` and the tombstone's record time ``t``:

1. ``d is not None and t >= d`` -- the broker expired it on (or after) schedule before the mirror
   swept: an expiry (origin "broker"), not a disagreement;
2. otherwise, if no admin operation could have deleted it -- the group is non-empty and subscribed
   to the topic, where OffsetDelete answers GROUP_SUBSCRIBED_TO_TOPIC and DeleteGroups
   NON_EMPTY_GROUP -- an ``early_tombstone`` disagreement (false positive: deleting a topic the
   group still subscribes to);
3. otherwise an admin delete (OffsetDelete, DeleteGroups, topic deletion): `OffsetsDeleted`.

A tombstone for an offset the mirror already expired confirms that expiry (no-op).  An expiry the
broker does not confirm within ``OffsetConfig.confirm_grace_ms`` of the mirror's deadline -- no
tombstone by then in the log (judged at the next record's time or at ``expire``'s ``now``) -- is an
``unconfirmed`` disagreement.  The tombstone bytes alone cannot tell an expiry from an admin
delete; the deadline is what can.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from state import events as ev
from state.config import DEFAULT_CONFIG, SEMANTICS_4X, SEMANTICS_LEGACY, OffsetConfig
from state.model import (
    CLASSIC,
    CONSUMER,
    DEAD,
    EMPTY,
    O_COMMIT_TS,
    O_EXPIRE_TS,
    SHARE,
    STABLE,
    STREAMS,
    Group,
    OffsetEntry,
    TopicPartition,
)

GROUP_TOMBSTONE: TopicPartition = ("", -1)  # key of the expected group tombstone in Group.pending
#: a group tombstone that did not come within the grace period (reported once as an ``unconfirmed``
#: disagreement): the group stays as the broker evidently keeps it, and the wait is not armed again
#: while the group stays deletable.  Never late itself; the tombstone, if it comes, still deletes.
GROUP_TOMBSTONE_OVERDUE: TopicPartition = ("", -2)
_GROUP_KEYS: frozenset[TopicPartition] = frozenset({GROUP_TOMBSTONE, GROUP_TOMBSTONE_OVERDUE})

BaseFn = Callable[[OffsetEntry], int]


def _commit_base(entry: OffsetEntry) -> int:
    return entry[O_COMMIT_TS]


def is_joining(g: Group) -> bool:
    """Classic group whose last record is 4.x's "new empty group" (generation 0, no protocol type):
    in the broker it is PreparingRebalance for its first generation, not Empty (Rule 7)."""
    return g.kind == CLASSIC and g.generation == 0 and g.protocol_type is None


def classic_subscribed_topics(g: Group) -> frozenset[str] | None:
    """``ClassicGroup.computeSubscribedTopics``: only for protocol type ``consumer``; Empty -> the empty
    set; otherwise the union of members' subscribed topics, or unknown (None) if any member's
    subscription did not parse (then ``isSubscribedToTopic`` answers True for every topic)."""
    if g.protocol_type != "consumer":
        return None
    if not g.members:
        return frozenset()
    if g.protocol is None:
        return None
    topics: set[str] = set()
    for m in g.members.values():
        if m.subscribed_topics is None:
            return None
        topics.update(m.subscribed_topics)
    return frozenset(topics)


def consumer_subscribed_topics(g: Group) -> frozenset[str]:
    """KIP-848: members' SubscribedTopicNames plus topics resolved from their regexes (K=16)."""
    topics: set[str] = set()
    regexes: set[str] = set()
    for m in g.members.values():
        if m.subscribed_topics:
            topics.update(m.subscribed_topics)
        if m.subscribed_regex:
            regexes.add(m.subscribed_regex)
    for regex in regexes:
        topics.update(g.regexes.get(regex, ()))
    return frozenset(topics)


def streams_source_topics(g: Group) -> frozenset[str]:
    if g.topology is None:
        return frozenset()
    return frozenset(g.topology.get("source_topics", ()))


def is_subscribed(g: Group, topic: str) -> bool:
    """``Group.isSubscribedToTopic`` of the group's kind (4.x)."""
    if g.kind == CLASSIC:
        subs = classic_subscribed_topics(g)
        if subs is None:
            # ClassicGroup.isSubscribedToTopic: unknown subscriptions -> usesConsumerGroupProtocol()
            return g.protocol_type == "consumer"
        return topic in subs
    if g.kind == CONSUMER:
        return topic in consumer_subscribed_topics(g)
    if g.kind == STREAMS:
        if g.state in (EMPTY, DEAD) or g.topology is None:
            return False
        return topic in streams_source_topics(g)
    return False


# ------------------------------------------------------------------------------ the rules
def rule_1_explicit_deadline(entry: OffsetEntry, config: OffsetConfig) -> int | None:
    """Rule 1: the first ms at which an offset with an explicit expireTimestamp is expired."""
    expire_ts = entry[O_EXPIRE_TS]
    if expire_ts is None:
        return None
    # <=2.0 used "expireTimestamp < now", 2.1+ "now >= expireTimestamp".
    return expire_ts + 1 if config.semantics == SEMANTICS_LEGACY else expire_ts


def rule_2_classic_empty(g: Group) -> BaseFn | None:
    """Rule 2: classic with a protocol type, Empty -> base = time it became Empty, else commit time."""
    if g.kind == CLASSIC and g.protocol_type is not None and g.state == EMPTY:
        since = g.current_state_timestamp_ms
        if since is None:
            return _commit_base
        return lambda _entry: since
    return None


def rule_3_classic_stable_consumer(g: Group) -> BaseFn | None:
    """Rule 3: classic consumer-protocol group, Stable, subscriptions known -> commit time
    (unsubscribed topics only: `is_subscribed` filters)."""
    if (
        g.kind == CLASSIC
        and g.protocol_type == "consumer"
        and g.state == STABLE
        and classic_subscribed_topics(g) is not None
    ):
        return _commit_base
    return None


def rule_4_simple(g: Group) -> BaseFn | None:
    """Rule 4: classic group without protocol type (simple / offsets-only) -> commit time."""
    if g.kind == CLASSIC and g.protocol_type is None and not is_joining(g):
        return _commit_base
    return None


def rule_5_consumer(g: Group, config: OffsetConfig) -> BaseFn | None:
    """Rule 5: KIP-848 consumer group -> commit time, any state (4.x; the same rule is applied if
    such records appear under 2.1-3.x semantics, where only an opt-in coordinator wrote them)."""
    return _commit_base if g.kind == CONSUMER else None


def rule_6_streams(g: Group) -> BaseFn | None:
    """Rule 6: streams group -> commit time (protected topics filtered by `is_subscribed`)."""
    return _commit_base if g.kind == STREAMS else None


def expiration_condition(g: Group, config: OffsetConfig) -> BaseFn | None:
    """The group's ``offsetExpirationCondition`` (Rules 2-6), or None for Rule 7 (nothing expires)."""
    for rule in (rule_2_classic_empty, rule_3_classic_stable_consumer, rule_4_simple, rule_6_streams):
        base = rule(g)
        if base is not None:
            return base
    return rule_5_consumer(g, config)


def expires_at_ms(g: Group, topic: str, partition: int, config: OffsetConfig = DEFAULT_CONFIG) -> int | None:
    """The first ms at which this offset is expired under the group's current state, or None if the
    rules keep it forever in this state (or the offset does not exist)."""
    entry = g.offsets.get((topic, partition))
    if entry is None:
        return None
    return _deadline(g, topic, entry, config, _condition_cache(g, config))


class _Cond:
    __slots__ = ("base", "subscribed")

    def __init__(self, base: BaseFn | None, subscribed: Callable[[str], bool]) -> None:
        self.base = base
        self.subscribed = subscribed


def _condition_cache(g: Group, config: OffsetConfig) -> _Cond:
    if config.semantics == SEMANTICS_LEGACY:
        return _Cond(_commit_base, lambda _t: False)
    base = expiration_condition(g, config) if g.kind is not None else None
    cache: dict[str, bool] = {}

    def subscribed(topic: str) -> bool:
        v = cache.get(topic)
        if v is None:
            v = cache[topic] = is_subscribed(g, topic)
        return v

    return _Cond(base, subscribed)


def _deadline(g: Group, topic: str, entry: OffsetEntry, config: OffsetConfig, cond: _Cond) -> int | None:
    if cond.base is None:
        return None  # Rule 7 (4.x: no condition -> the sweep skips the group, explicit ts included)
    if cond.subscribed(topic):
        return None  # 4.x/3.x: subscribed topics never expire, explicit expireTimestamp included
    explicit = rule_1_explicit_deadline(entry, config)
    if explicit is not None:
        return explicit
    if config.semantics == SEMANTICS_LEGACY:
        # <=2.0 stored commit + retention as expireTimestamp; a v2+ record read under these
        # semantics gets the same deadline, with the strict comparison.
        return entry[O_COMMIT_TS] + config.retention_ms + 1
    return cond.base(entry) + config.retention_ms


def all_deadlines(g: Group, config: OffsetConfig = DEFAULT_CONFIG) -> dict[TopicPartition, int | None]:
    """`expires_at_ms` of every offset (one condition evaluation for the whole group).

    `_deadline` inlined: this runs for every offset of every group a micro-batch touches."""
    cond = _condition_cache(g, config)
    base = cond.base
    if base is None:
        return dict.fromkeys(g.offsets, None)  # Rule 7
    subscribed = cond.subscribed
    legacy = config.semantics == SEMANTICS_LEGACY
    retention = config.retention_ms
    out: dict[TopicPartition, int | None] = {}
    for tp, e in g.offsets.items():
        if subscribed(tp[0]):
            out[tp] = None
            continue
        explicit = e[O_EXPIRE_TS]
        if explicit is not None:  # Rule 1 (<=2.0: strict comparison)
            out[tp] = explicit + 1 if legacy else explicit
        elif legacy:
            out[tp] = e[O_COMMIT_TS] + retention + 1
        else:
            out[tp] = base(e) + retention
    return out


def rule_8_deletable(g: Group, config: OffsetConfig) -> bool:
    """Rule 8: Empty, no offsets left, and a kind the sweep may delete."""
    if g.kind is None or g.offsets or g.kind == SHARE or is_joining(g):
        return False
    return g.state == EMPTY


def awaits_group_tombstone(g: Group) -> bool:
    """Whether the mirror waits for (or gave up waiting for) the broker's tombstone of this group."""
    return GROUP_TOMBSTONE in g.pending or GROUP_TOMBSTONE_OVERDUE in g.pending


def _offsets_pending(g: Group) -> bool:
    return any(tp not in _GROUP_KEYS for tp in g.pending)


def _deletion_due(g: Group, config: OffsetConfig) -> bool:
    """Rule 8 holds and `expire` has a step to take for it: arm the wait for the group tombstone,
    or -- no tombstone expected -- delete the group (once the broker confirmed the offsets' end)."""
    if not rule_8_deletable(g, config):
        return False
    if expects_group_tombstone(g, config):
        return not awaits_group_tombstone(g)
    return not _offsets_pending(g)


def expects_group_tombstone(g: Group, config: OffsetConfig) -> bool:
    """Whether the broker writes a group tombstone when it deletes this group by expiry."""
    if config.semantics == SEMANTICS_4X:
        return True
    # 2.1-3.x and <=2.0: GroupMetadataManager.cleanupGroupMetadata writes it only if generation > 0.
    return (g.generation or 0) > 0


def next_deadline_ms(
    g: Group,
    config: OffsetConfig = DEFAULT_CONFIG,
    deadlines: Mapping[TopicPartition, int | None] | None = None,
) -> int | None:
    """The earliest time at which `expire` has something to do: an offset deadline, a deletion due
    now (Rule 8: the group's state time), or the end of a confirmation grace period.  ``None``: no
    timer needed.  The streaming adapter sets its timeout to this.  ``deadlines``: the group's
    `all_deadlines`, when the caller has them already (saves evaluating every offset again)."""
    best: int | None = None
    if g.exists:
        if _deletion_due(g, config):
            best = g.state_since_ms if g.state_since_ms is not None else 0
        elif deadlines is not None:
            best = min((d for d in deadlines.values() if d is not None), default=None)
        else:
            cond = _condition_cache(g, config)
            if cond.base is not None:
                for (topic, _p), e in g.offsets.items():
                    d = _deadline(g, topic, e, config, cond)
                    if d is not None and (best is None or d < best):
                        best = d
    for tp, d in g.pending.items():
        if tp == GROUP_TOMBSTONE_OVERDUE:
            continue
        c = d + config.confirm_grace_ms + 1
        if best is None or c < best:
            best = c
    return best


def check_pending(
    g: Group, now_ms: int, config: OffsetConfig, out: list[ev.Event], source: tuple[int | None, int | None]
) -> None:
    """Expiries the broker did not confirm within the grace period -> ``unconfirmed`` disagreements.
    A late group tombstone leaves ``GROUP_TOMBSTONE_OVERDUE`` behind (the group stays)."""
    late = [
        (tp, d)
        for tp, d in g.pending.items()
        if tp != GROUP_TOMBSTONE_OVERDUE and now_ms > d + config.confirm_grace_ms
    ]
    if not late:
        return
    for tp, d in late:
        del g.pending[tp]
        if tp == GROUP_TOMBSTONE:
            g.pending[GROUP_TOMBSTONE_OVERDUE] = d
    g.counters["expiry_disagreements"] += len(late)
    out.append(
        ev.ExpiryDisagreement(
            g.group_id,
            source[0],
            source[1],
            now_ms if source[0] is not None else None,
            reason="unconfirmed",
            partitions=tuple(
                sorted("<group>" if tp == GROUP_TOMBSTONE else ev.tp_str(*tp) for tp, _ in late)
            ),
            deadline_ms=min(d for _, d in late),
            at_ms=now_ms,
        )
    )


def classify_tombstone(g: Group, topic: str, partition: int, t_ms: int, config: OffsetConfig) -> str:
    """For a broker tombstone of a live offset at record time ``t_ms``: "expired" | "disagreement" |
    "deleted" (see the module docstring)."""
    d = expires_at_ms(g, topic, partition, config)
    if d is not None and t_ms >= d:
        return "expired"
    if g.exists and g.state not in (EMPTY, DEAD) and is_subscribed(g, topic):
        return "disagreement"
    return "deleted"


def expire(
    g: Group, now_ms: int, config: OffsetConfig = DEFAULT_CONFIG
) -> tuple[Group | None, list[ev.Event]]:
    """Apply the rules at ``now_ms``: remove expired offsets, delete the group if Rule 8 holds, and
    flag unconfirmed expiries.  Returns the group -- ``None`` when nothing is left to keep (the
    adapter then calls ``state.remove()``) -- and the events.  Idempotent for a fixed ``now_ms``."""
    kept, out, _deadlines = expire_at(g, now_ms, config)
    return kept, out


def expire_at(
    g: Group, now_ms: int, config: OffsetConfig = DEFAULT_CONFIG
) -> tuple[Group | None, list[ev.Event], dict[TopicPartition, int | None]]:
    """`expire`, also returning `all_deadlines` of what is left (``{}`` for ``None``): the rules
    evaluate every offset once here, and the caller needs the same figures for the summary, the
    timeout and the offsets feed -- one pass instead of three."""
    out: list[ev.Event] = []
    check_pending(g, now_ms, config, out, (None, None))
    deadlines: dict[TopicPartition, int | None] = {}
    if g.exists:
        deadlines = all_deadlines(g, config)
        expired = sorted(tp for tp, d in deadlines.items() if d is not None and now_ms >= d)
        if expired:
            for tp in expired:
                pend = deadlines[tp]
                assert pend is not None
                del g.offsets[tp]
                del deadlines[tp]
                g.pending[tp] = pend
            g.counters["offsets_expired"] += len(expired)
            g.last_change_ms = now_ms
            out.append(
                ev.OffsetsExpired(
                    g.group_id,
                    None,
                    None,
                    None,
                    count=len(expired),
                    partitions=tuple(ev.tp_str(*tp) for tp in expired),
                    origin="mirror",
                    at_ms=now_ms,
                )
            )
        if not rule_8_deletable(g, config):
            # not (or no longer) deletable: the broker's sweep will not delete it either
            g.pending.pop(GROUP_TOMBSTONE, None)
            g.pending.pop(GROUP_TOMBSTONE_OVERDUE, None)
        elif _deletion_due(g, config):
            if expects_group_tombstone(g, config):
                # the broker deletes it at its next sweep, writing the tombstone(s): keep the group
                # (Empty, as ListGroups shows it) until then
                g.pending[GROUP_TOMBSTONE] = now_ms
            else:
                kind = g.display_kind
                mark_dead(g, now_ms)
                g.last_change_ms = now_ms
                out.append(
                    ev.GroupDeleted(g.group_id, None, None, None, kind=kind, reason="expired", at_ms=now_ms)
                )
    if not g.exists:
        if not g.pending and not g.offsets:
            return None, out, {}
        # a dead group's remaining offsets wait for their tombstones under Rule 7 (no deadline)
        deadlines = all_deadlines(g, config)
    return g, out, deadlines


def mark_dead(g: Group, at_ms: int | None) -> None:
    """The coordinator dropped its group object (deleted or expired): keep only offsets, pending
    confirmations, counters and bookkeeping."""
    g.kind = None
    g.reset_kind_fields()
    g.state = DEAD
    g.state_since_ms = at_ms
    g.members = {}
