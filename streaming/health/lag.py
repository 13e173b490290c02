"""Consumer lag from the mirror's committed offsets and sampled log offsets: the pure computation.

Inputs, both handed over by the application shell:

* the groups (`LagTracker.apply_groups`, decoded from the state bytes of the groups that changed
  since the previous round of log offsets): committed offsets, owners (member host, member id,
  client id from the group's assignment) and topic ids learned from the log;
* rounds of log offsets (`LogOffsets`, read by `streaming.cluster.offsets` at the interval
  ``lag_interval_s``): log-start offset, high watermark and last stable offset (LSO) of every
  partition a group commits to or is assigned, and the cluster's topic id -> name map.

What is reported (docs/monitoring.md, "Lag"):

* ``kafka_partition_latest_offset`` is the high watermark (kafka-lag-exporter's definition: the
  consumer's ``endOffsets`` under read_uncommitted); the LSO is exported beside it.
* lag in messages = ``max(0, end - committed)`` where ``end`` is the LSO (setting
  ``lag_isolation=read_committed``, the default: a read_committed consumer can never pass the
  LSO, so an open transaction is not lag it can work off) or the high watermark
  (``read_uncommitted``).  For a topic without open transactions the two are equal.
* lag in seconds: kafka-lag-exporter's method (its ``LookupTable``): a sliding window of
  ``(end offset, sample time)`` points per partition, flat runs compressed to their two ends; the
  time at which the log end passed the committed offset is interpolated linearly between the two
  points around it (extrapolated along the whole window's trend when outside), and the lag is the
  sample time minus that.  0 when the committed offset is the newest end; NaN with fewer than
  two points.  Error bound: within the window the true append time of the record at the committed
  offset lies between the two bracketing sample times, so the error is at most one sampling
  interval (measured in tests/test_live/test_lag_live.py and bench/lag.py).

Everything here is a function of its arguments: time is passed in, nothing talks to Kafka.
"""

from __future__ import annotations

import math
import threading
from array import array
from collections.abc import Callable, ItemsView, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from decoders.uuids import is_kafka_uuid
from state.abandoned import abandoned_partitions
from state.model import CONSUMER, SHARE, STREAMS, Group

TopicPartition = tuple[str, int]
#: how many deleted group ids the tracker remembers (for the reason of a 404)
DELETED_REMEMBERED: Final = 10_000
#: topic-partition keys the tracker's `KeyTable` may hold beyond twice a round's partitions
KEYS_SLACK: Final = 10_000
UNKNOWN: Final = "unknown"  # owner labels of a partition no member is assigned (kafka-lag-exporter's)


# ------------------------------------------------------------------------------- log offsets
@dataclass(frozen=True)
class PartitionEnds:
    """One partition's log offsets from one round."""

    earliest: int | None
    high_watermark: int
    stable: int  # last stable offset (ListOffsets latest, read_committed)


@dataclass(frozen=True)
class LogOffsets:
    """One round of log offsets (`streaming.cluster.offsets.OffsetReader.read`)."""

    sampled_at_ms: int
    partitions: Mapping[TopicPartition, PartitionEnds]
    #: topic id -> name, from cluster metadata
    topic_names: Mapping[str, str] = field(default_factory=dict)
    #: topics asked for that the cluster does not have (deleted, or never created)
    missing_topics: frozenset[str] = frozenset()
    round_seconds: float = 0.0
    requests: int = 0
    error: str | None = None
    #: topics asked for that the mirror's principal may not Describe (a missing ACL): no offsets
    denied_topics: frozenset[str] = frozenset()


# ------------------------------------------------------------------- kafka-lag-exporter's table
class LookupTable:
    """Sampled ``(offset, time_ms)`` points of one partition's log end, oldest first, at most
    ``limit`` (kafka-lag-exporter's ``LookupTable.Table``; the same add and lookup rules).

    Points are kept in one ``array('q')`` (offset, time, offset, time, ...): 16 bytes a point."""

    __slots__ = ("limit", "points")

    def __init__(self, limit: int = 60) -> None:
        self.limit = max(2, limit)
        self.points = array("q")

    def __len__(self) -> int:
        return len(self.points) // 2

    def latest(self) -> tuple[int, int] | None:
        p = self.points
        return (p[-2], p[-1]) if p else None

    def add(self, offset: int, time_ms: int) -> bool:
        """Add a sample; True when the points' offsets changed (a point appended), False when the
        sample was ignored or only moved a flat line's right end out in time."""
        p = self.points
        if p:
            last_offset, last_time = p[-2], p[-1]
            if last_time >= time_ms or last_offset > offset:
                return False  # out of order, or not monotonic (a truncated log): ignored as they do
            if last_offset == offset and len(p) >= 4 and p[-4] == offset:
                p[-1] = time_ms  # a flat line stays one segment: move its right end out
                return False
        if len(p) >= 2 * self.limit:
            del p[:2]
        p.append(offset)
        p.append(time_ms)
        return True

    def predict_ms(self, offset: int) -> float | None:
        """When the log end passed ``offset`` (ms), or None with fewer than two points; the
        caller checks for the zero-lag case (``offset`` at the newest point) first."""
        p = self.points
        n = len(p) // 2
        if n < 2:
            return None
        # newest segment first, as they search: the pair of points around the offset
        for i in range(n - 1, 0, -1):
            lo_off, hi_off = p[2 * i - 2], p[2 * i]
            if lo_off <= offset <= hi_off:
                left, right = i - 1, i
                break
        else:
            left, right = 0, n - 1  # outside the window: the whole window's trend
        lo_off, lo_t, hi_off, hi_t = p[2 * left], p[2 * left + 1], p[2 * right], p[2 * right + 1]
        dy = hi_off - lo_off
        if dy == 0:
            # a flat window (all of it, the end never moved while sampled): the end was past the
            # offset at the window's first point already -- a lower bound of the lag, where
            # kafka-lag-exporter divides by zero; never the newest point (that would read as ~0 s
            # for a stopped consumer on an idle topic)
            return float(lo_t)
        return hi_t - (hi_off - offset) * (hi_t - lo_t) / dy


def lag_messages(committed: int, end: int) -> int:
    """Messages behind: never negative (the end was read before the commit, or a commit past it)."""
    return max(0, end - committed)


def lag_seconds(committed: int, table: LookupTable, at_ms: int) -> float:
    """Seconds behind at ``at_ms`` (kafka-lag-exporter's rule): 0 at the newest end, NaN with
    too few points, else ``at_ms`` minus the interpolated time the end passed ``committed``."""
    newest = table.latest()
    if newest is not None and committed >= newest[0]:
        return 0.0
    predicted = table.predict_ms(committed)
    if predicted is None:
        return math.nan
    return max(0.0, (at_ms - predicted) / 1000)


# ----------------------------------------------------------------------- the groups' side
@dataclass(frozen=True)
class Owner:
    member_host: str = UNKNOWN
    consumer_id: str = UNKNOWN
    client_id: str = UNKNOWN


NO_OWNER: Final = Owner()


def snapshot_owners(snap: Mapping[str, Any]) -> dict[tuple[str, int], Owner]:
    """Who holds each assigned partition in a JSON snapshot (`state.snapshot`): `group_owners`
    derived from the rendered view instead of the decoded group (the exporter test's oracle)."""
    owners: dict[tuple[str, int], Owner] = {}
    for m in snap.get("members") or ():
        assignment = m.get("assignment")
        if not assignment:
            continue
        owner = Owner(
            m.get("client_host") or UNKNOWN, m.get("member_id") or UNKNOWN, m.get("client_id") or UNKNOWN
        )
        for a in assignment:
            for p in a["partitions"]:
                owners[(a["topic"], p)] = owner
    return owners


class PackedOffsets(Mapping[TopicPartition, tuple[int, int]]):
    """A group's committed offsets and commit times as the lag view keeps them: one tuple of its
    keys (the tracker's shared tuples) and one ``array('q')`` of (offset, commit ms) per key.  A
    dict of ``(offset, time)`` tuples, with their int objects, was ~8 KB for 50 partitions and
    ~65 MB of the driver at 10k groups x 50; this is ~1.3 KB.  Iterating and ``items()`` are what
    the lag rounds do, in the order given; a lookup by key walks the keys (tests, not rounds)."""

    __slots__ = ("_keys", "_values")

    def __init__(self, items: Iterable[tuple[TopicPartition, tuple[int, int]]] = ()) -> None:
        keys: list[TopicPartition] = []
        values = array("q")
        for tp, (offset, commit_ms) in items:
            keys.append(tp)
            values.append(offset)
            values.append(commit_ms)
        self._keys = tuple(keys)
        self._values = values

    def __len__(self) -> int:
        return len(self._keys)

    def __iter__(self) -> Iterator[TopicPartition]:
        return iter(self._keys)

    def __contains__(self, tp: object) -> bool:
        return tp in self._keys

    def __getitem__(self, tp: TopicPartition) -> tuple[int, int]:
        try:
            i = self._keys.index(tp)
        except ValueError:
            raise KeyError(tp) from None
        return self._values[2 * i], self._values[2 * i + 1]

    def items(self) -> ItemsView[TopicPartition, tuple[int, int]]:
        return _PackedItems(self)

    def __repr__(self) -> str:
        return f"PackedOffsets({dict(self.items())!r})"


class _PackedItems(ItemsView[TopicPartition, tuple[int, int]]):
    _mapping: PackedOffsets

    def __iter__(self) -> Iterator[tuple[TopicPartition, tuple[int, int]]]:
        m = self._mapping
        it = iter(m._values)
        return zip(m._keys, zip(it, it, strict=True), strict=True)


@dataclass
class GroupOffsets:
    """What lag needs of one group: committed offsets and commit times, owners, topic ids."""

    kind: str
    #: (topic (name, or id when the log never named it), partition) -> (offset, commit time ms):
    #: `PackedOffsets` as the tracker builds it
    offsets: Mapping[TopicPartition, tuple[int, int]]
    owners: dict[TopicPartition, Owner]
    topic_ids: dict[str, str]  # id -> name learned from the log
    #: topic names the members subscribe to (classic subscriptions, KIP-848 SubscribedTopicNames)
    subscribed: frozenset[str] = frozenset()
    #: committed partitions on topics no member subscribes to any more (`state.abandoned`): their
    #: lag is reported apart, never in the group's lag
    abandoned: frozenset[TopicPartition] = frozenset()


def group_owners(g: Group, keys: KeyTable | None = None) -> dict[TopicPartition, Owner]:
    """Who holds each assigned partition of a decoded group (`state.codec.decode`), topics named
    as its committed offsets name them: the owner labels of ``kafka_consumergroup_group_offset``
    (`streaming.serving.metrics`) and of the lag series; ``keys``: shared key tuples (`KeyTable`)."""
    by_id = g.kind in (CONSUMER, SHARE)
    # a streams member's assignment is tasks -- (subtopology id, partition) -- and a task reads that
    # partition of each of its subtopology's source topics (KIP-1071); a subtopology the topology
    # does not name (state written before it was kept) owns nothing rather than a topic "0"
    tasks: dict[str, list[str]] = (g.topology or {}).get("source_topics_of") or {}

    def topics(t: str) -> Sequence[str]:
        if g.kind == STREAMS:
            return tasks.get(t, ())
        return (g.topic_name(t) if by_id else t,)

    owners: dict[TopicPartition, Owner] = {}
    key = keys.key if keys is not None else _as_is
    for m in g.members.values():
        owner = Owner(m.client_host or UNKNOWN, m.member_id or UNKNOWN, m.client_id or UNKNOWN)
        for t, ps in m.assignment:
            for name in topics(t):
                for p in ps:
                    owners[key((name, p))] = owner
    return owners


def _as_is(tp: TopicPartition) -> TopicPartition:
    return tp


class KeyTable:
    """One tuple object per topic-partition for the dictionaries that hold every group's
    partitions (the lag views' offsets and owners, Burrow's windows): each group's decoded state
    brings tuples of its own, and 10k groups x 50 partitions kept three fresh tuples per partition
    (~90 MB of the driver's RSS, `bench/lag_apply.py`).  Only identity is shared -- a key's value
    never depends on the table -- so `forget` at any time is safe; the lag tracker forgets when
    the table has grown well past the partitions its rounds read (topics deleted meanwhile)."""

    def __init__(self) -> None:
        self.table: dict[TopicPartition, TopicPartition] = {}

    def key(self, tp: TopicPartition) -> TopicPartition:
        return self.table.setdefault(tp, tp)

    def forget(self) -> None:
        self.table = {}


def group_offsets(g: Group, keys: KeyTable) -> GroupOffsets:
    """The lag view of a decoded group (`state.codec.decode`), its keys shared through ``keys``."""
    owners = group_owners(g, keys)
    key = keys.key
    offsets = PackedOffsets((key(tp), (e[0], e[3])) for tp, e in g.offsets.items())
    ids = dict(g.topic_names)
    for (t, _), e in g.offsets.items():
        if e[5] and t != e[5]:
            ids[e[5]] = t
    subscribed = frozenset(t for m in g.members.values() for t in (m.subscribed_topics or ()))
    return GroupOffsets(
        g.display_kind or "unknown", offsets, owners, ids, subscribed, abandoned_partitions(g)
    )


@dataclass(frozen=True)
class PartitionLag:
    topic: str
    partition: int
    committed: int | None  # None: assigned, nothing committed yet
    commit_ms: int | None
    owner: Owner
    end: int | None  # None: the end is unknown (topic deleted, not sampled yet)
    lag: float  # messages; NaN when unknown
    lag_seconds: float
    topic_deleted: bool = False
    #: a topic no member subscribes to any more (`GroupOffsets.abandoned`)
    abandoned: bool = False


class LagTracker:
    """The driver's lag state: the groups' offsets, the lookup tables, the latest round.

    One writer per input (the sink thread applies groups, the offsets thread applies rounds),
    any number of readers (metrics, HTTP): one lock, held only to swap or copy references."""

    def __init__(
        self,
        isolation: Literal["read_committed", "read_uncommitted"] = "read_committed",
        lookup_points: int = 60,
    ) -> None:
        self.isolation = isolation
        self.lookup_points = lookup_points
        self._lock = threading.Lock()
        self.groups: dict[str, GroupOffsets] = {}
        self.tables: dict[TopicPartition, LookupTable] = {}
        self.round: LogOffsets | None = None
        self.rounds = 0
        self.failed_rounds = 0
        #: bumped by every change of the groups or the round: renderers cache on it
        self.version = 0
        #: topic id -> name: the log's and the cluster's (the cluster wins)
        self.topic_names: dict[str, str] = {}
        #: called with every round applied (Burrow's ring of sampled ends), in the applying thread
        self.listeners: list[Callable[[LogOffsets], object]] = []
        #: ids of groups deleted (tombstone, DeleteGroups, expiry) since, newest last, bounded: the
        #: reason of a 404 from ``GET /groups/{id}/lag``
        self.deleted: dict[str, None] = {}
        #: what changed for Burrow's evaluation since it last looked (`take_changes`): the
        #: partitions whose end or sampled ends changed; everything (topic names changed)
        self._changed: set[TopicPartition] = set()
        self._all_changed = True
        #: more topic-partitions whose log offsets to read each round (`add_wanted`)
        self._also_wanted: list[Callable[[], set[TopicPartition]]] = []
        #: the topic-partition tuples the groups' views and Burrow's windows share
        self.keys = KeyTable()
        #: bumped when the groups or the topic names change: `wanted` caches on it
        self._wanted_version = 0
        self._wanted: tuple[int, frozenset[TopicPartition]] | None = None

    # -- inputs --------------------------------------------------------------------------------
    def add_wanted(self, more: Callable[[], set[TopicPartition]]) -> None:
        """Register more topic-partitions whose log offsets each round reads (the share groups'
        share-partitions: `streaming.pipeline.share_state.wanted_by`)."""
        self._also_wanted.append(more)

    def apply_groups(
        self, changed: Iterable[tuple[str, Group | None]]
    ) -> list[tuple[str, GroupOffsets | None]]:
        """Groups as the sink applied them (None: deleted).  Returns what was applied."""
        out: list[tuple[str, GroupOffsets | None]] = []
        for gid, g in changed:
            view = None if g is None or not g.exists else group_offsets(g, self.keys)
            out.append((gid, view))
        with self._lock:
            for gid, view in out:
                if view is None:
                    if self.groups.pop(gid, None) is not None:
                        self.deleted.pop(gid, None)
                        self.deleted[gid] = None
                        if len(self.deleted) > DELETED_REMEMBERED:
                            del self.deleted[next(iter(self.deleted))]
                else:
                    self.deleted.pop(gid, None)
                    self.groups[gid] = view
                    for tid, name in view.topic_ids.items():
                        if tid not in self.topic_names:
                            self.topic_names[tid] = name
                            self._all_changed = True  # rows may be named differently now
                            self._wanted_version += 1
            if out:
                self.version += 1
                self._wanted_version += 1
        return out

    def wanted(self) -> frozenset[TopicPartition]:
        """Every named topic-partition some group commits to or is assigned (ids the cluster
        cannot name are left out: ListOffsets needs names).  The groups' part is kept until the
        groups or the topic names change: a quiet cluster's round does not walk every group's
        offsets again (10k groups x 50: ~0.3 s of a core a round, half of an idle driver's CPU)."""
        with self._lock:
            version = self._wanted_version
            cached = self._wanted
            stale = cached is None or cached[0] != version
            groups = list(self.groups.values()) if stale else []
            names = dict(self.topic_names)
        if stale or cached is None:
            out: set[TopicPartition] = set()
            for v in groups:
                for t, p in v.offsets:
                    out.add((names.get(t, t), p))
                for t, p in v.owners:
                    out.add((names.get(t, t), p))
            cached = (version, _named(out, names))
            with self._lock:
                if self._wanted_version == version:
                    self._wanted = cached
        more: set[TopicPartition] = set()
        for also in self._also_wanted:
            more |= also()
        return cached[1] | _named(more, names) if more else cached[1]

    def subscribed(self) -> set[str]:
        """Every topic name some group's members subscribe to: the offsets reader checks that the
        cluster has them (a deleted topic still subscribed to is flagged; nothing is read)."""
        with self._lock:
            groups = list(self.groups.values())
        return {t for v in groups for t in v.subscribed}

    def apply_round(self, r: LogOffsets) -> None:
        end = self.end_of
        with self._lock:
            if r.error is not None and not r.partitions:
                self.failed_rounds += 1
                return
            before = self.round.partitions if self.round is not None else {}
            self.round = r
            self.rounds += 1
            self.version += 1
            if any(self.topic_names.get(tid) != name for tid, name in r.topic_names.items()):
                self._all_changed = True
                self._wanted_version += 1
            self.topic_names.update(r.topic_names)
            changed = self._changed
            for tp, ends in r.partitions.items():
                table = self.tables.get(tp)
                if table is None:
                    table = self.tables[tp] = LookupTable(self.lookup_points)
                appended = table.add(end(ends), r.sampled_at_ms)
                old = before.get(tp)
                if appended or old is None or end(old) != end(ends):
                    changed.add(tp)
            changed.update(tp for tp in before if tp not in r.partitions)
            # partitions no longer wanted (or gone) drop their tables, as kafka-lag-exporter evicts
            for tp in [tp for tp in self.tables if tp not in r.partitions]:
                del self.tables[tp]
            if len(self.keys.table) > 2 * len(r.partitions) + KEYS_SLACK:
                self.keys.forget()  # deleted topics' keys: the next groups applied share anew
        for listener in self.listeners:
            listener(r)

    def take_changes(self) -> tuple[set[TopicPartition], bool]:
        """What changed since the previous call (Burrow's incremental evaluation): the partitions
        whose end offset or sampled ends changed (or that left the round), and whether every
        group must be evaluated again (topic names changed)."""
        with self._lock:
            out = (self._changed, self._all_changed)
            self._changed, self._all_changed = set(), False
        return out

    def unresolved_topic_ids(self, topics: Iterable[str]) -> dict[str, int]:
        """Topic ids shown as ids, by reason: ``unnamed`` -- ids among ``topics`` (the topics of
        the groups' lag rows, named where a name is known) that neither the log nor the cluster
        names (deleted, or not described yet); ``malformed`` -- ids in the cluster's id -> name
        map that are not in Kafka's text form (`decoders.uuids.canonical_uuid` could not convert
        what the client handed over), so no group's id can ever match them."""
        r = self.round
        names = self.topic_names
        known = set(names.values())
        if r is not None:
            known.update(t for t, _ in r.partitions)
        unnamed = {t for t in topics if t not in known and t not in names and is_kafka_uuid(t)}
        malformed = 0 if r is None else sum(1 for tid in r.topic_names if not is_kafka_uuid(tid))
        return {"unnamed": len(unnamed), "malformed": malformed}

    def end_of(self, ends: PartitionEnds) -> int:
        return ends.stable if self.isolation == "read_committed" else ends.high_watermark

    # -- reads -----------------------------------------------------------------------------------
    def name_of(self, topic: str) -> str:
        return self.topic_names.get(topic, topic)

    def is_deleted(self, topic: str) -> bool:
        """A topic (or an id no one can name) the cluster does not have."""
        r = self.round
        if r is None:
            return False
        if topic in r.missing_topics:
            return True
        return is_kafka_uuid(topic) and topic not in self.topic_names and topic not in r.topic_names.values()

    def deleted_topics(self, view: GroupOffsets, rows: Iterable[PartitionLag]) -> list[str]:
        """Topics the group commits to, is assigned or subscribes to that the cluster does not
        have.  The broker itself tombstones every group's offsets on a topic when it is deleted
        (the group coordinator's ``onPartitionsDeleted``, ~0.1 s after the deletion), so committed
        offsets flag a deleted topic only until the mirror folds those tombstones; members still
        subscribed to it by name flag it for as long as they are."""
        r = self.round
        missing = r.missing_topics if r is not None else frozenset()
        out = {x.topic for x in rows if x.topic_deleted}
        out.update(t for t in view.subscribed if t in missing)
        return sorted(out)

    def denied_topics(self, view: GroupOffsets) -> list[str]:
        """Topics of the group whose log offsets the principal may not read (no Describe ACL):
        their lag is unknown for that reason, not because the topic is gone."""
        r = self.round
        if r is None or not r.denied_topics:
            return []
        names = self.topic_names
        mine = {names.get(t, t) for t, _ in view.offsets} | {names.get(t, t) for t, _ in view.owners}
        return sorted(mine & r.denied_topics)

    def view(self, group_id: str) -> GroupOffsets | None:
        with self._lock:
            return self.groups.get(group_id)

    def group_lag(self, group_id: str) -> list[PartitionLag] | None:
        view = self.view(group_id)
        return None if view is None else self.lag_rows(view)

    def items(self) -> list[tuple[str, GroupOffsets]]:
        with self._lock:
            return sorted(self.groups.items())

    def lag_rows(self, view: GroupOffsets) -> list[PartitionLag]:
        r = self.round
        names = self.topic_names
        at_ms = r.sampled_at_ms if r is not None else 0
        parts = r.partitions if r is not None else {}
        rows: list[PartitionLag] = []
        keys: dict[TopicPartition, tuple[int | None, int | None]] = {
            (names.get(t, t), p): v for (t, p), v in view.offsets.items()
        }
        abandoned = {(names.get(t, t), p) for t, p in view.abandoned} if view.abandoned else set()
        owners = {(names.get(t, t), p): o for (t, p), o in view.owners.items()}
        for tp in owners:
            keys.setdefault(tp, (None, None))
        for (t, p), (committed, commit_ms) in sorted(keys.items()):
            ends = parts.get((t, p))
            end = None if ends is None else self.end_of(ends)
            if end is None or committed is None:
                lag = secs = math.nan
            else:
                lag = float(lag_messages(committed, end))
                table = self.tables.get((t, p))
                secs = math.nan if table is None else lag_seconds(committed, table, at_ms)
            rows.append(
                PartitionLag(
                    t,
                    p,
                    committed,
                    commit_ms,
                    owners.get((t, p), NO_OWNER),
                    end,
                    lag,
                    secs,
                    self.is_deleted(t),
                    (t, p) in abandoned,
                )
            )
        return rows


def _named(tps: set[TopicPartition], names: Mapping[str, str]) -> frozenset[TopicPartition]:
    """``tps`` without the topic ids no one names (ListOffsets needs names)."""
    known = set(names.values())
    return frozenset((t, p) for t, p in tps if not (is_kafka_uuid(t) and t not in known))


def iter_lag(tracker: LagTracker) -> Iterator[tuple[str, GroupOffsets, list[PartitionLag]]]:
    for gid, view in tracker.items():
        yield gid, view, tracker.lag_rows(view)
