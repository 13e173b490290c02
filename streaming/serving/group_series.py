"""The per-group and per-partition series of ``GET /metrics``: a `GroupNumbers` per group (the
numbers and label values its series need, decoded from the group's state bytes) and the writer
that turns a list of them into exposition text (`write_groups`, into a `Body`).  The exporter
(`streaming.serving.metrics.MirrorMetrics`) keeps the views and writes the mirror-level families
after these.  Names, types, help and labels come from `streaming.serving.catalogue` only.
"""

from __future__ import annotations

import bisect
import io
import sys
from array import array
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Final

from state import codec
from state.abandoned import abandoned_partitions
from state.causes import COUNTER as BUMP_COUNTER
from state.causes import REBALANCE, SHARE_INITIALIZATION, STATIC_REJOIN
from state.config import OffsetConfig
from state.expiry import all_deadlines
from state.model import Group
from state.rhythm import commit_rate, oldest_commit_ms, partitions_behind, points
from state.timing import phases
from streaming.health.lag import NO_OWNER, Owner, group_owners
from streaming.serving.catalogue import (
    EXPIRY_WINDOWS,
    GROUP_COUNTERS,
    GROUP_METRICS,
    GROUP_STATES,
    PARTITION_METRICS,
    MetricDef,
)
from streaming.serving.render import assignor
from streaming.serving.text_format import escape, fmt, header

#: a sample: label values in the family's label order, value
Samples = list[tuple[tuple[str, ...], float]]
#: a family another module contributes: its catalogue entry and its samples (all label values)
Family = tuple[MetricDef, Samples]
#: called at every scrape (under the exporter's lock) for the families it contributes
SampleProvider = Callable[[], Iterable[Family]]

_INFO: Final = "coordinator_mirror_group_info"
_STATE: Final = "coordinator_mirror_group_state"
_NEXT_EXPIRY: Final = "coordinator_mirror_group_next_offset_expiry_seconds"
_EXPIRING: Final = "coordinator_mirror_group_offsets_expiring"
_COMMIT_RATE: Final = "coordinator_mirror_group_commits_per_second"
#: default of the setting commit_behind_s, in ms (`state.rhythm.partitions_behind`)
DEFAULT_BEHIND_MS: Final = 300_000
_OFFSET: Final = "kafka_consumergroup_group_offset"
_COMMIT_TS: Final = "kafka_consumergroup_group_commit_timestamp_seconds"
_MODERN: Final = frozenset({"consumer", "share", "streams"})
#: "no sample" in an int64 array
_NONE: Final = -(2**63)
#: the per-group families with at most one sample and no label of their own, in catalogue order:
#: name -> whether the value is a time in ms (exposed in seconds)
_SCALAR_MS: Final = {
    m.name: m.name.endswith("_timestamp_seconds")
    for m in GROUP_METRICS
    if m.labels == ("cluster_name", "group") and m.name not in (_NEXT_EXPIRY, _COMMIT_RATE)
}
_SCALARS: Final = tuple(_SCALAR_MS)
#: lines held before they are encoded into the body (keeps the transient strings few)
_FLUSH_PARTS: Final = 8192


def _label(value: str | None) -> str:
    # label values repeat across groups (kinds, states, protocols, topics): one string each
    return sys.intern(escape(value or ""))


class GroupNumbers:
    """One group's metric inputs, decoded from its state bytes: numbers and label values, no text.

    ``blob`` is the bytes object it was built from (the cache key: the store replaces it when the
    group changes).  ``scalars`` follows `_SCALARS` (`_NONE`: no sample).  The per-partition arrays
    are kept only for groups that export per-partition series, in ``(topic, partition)`` order,
    with ``topics`` as runs of (escaped topic, number of partitions); ``owners`` indexes each
    partition's owner labels (the member assigned it, kafka-lag-exporter's ``member_host``,
    ``consumer_id``, ``client_id``) in ``owner_labels``, whose first entry is the unknown owner."""

    __slots__ = (
        "abandoned",
        "blob",
        "bumps",
        "commits",
        "deadlines",
        "group_id",
        "info",
        "kind",
        "offsets",
        "owner_labels",
        "owners",
        "partitions",
        "phases",
        "scalars",
        "state",
        "topics",
        "window",
    )

    topics: tuple[tuple[str, int], ...]
    partitions: array[int] | None
    offsets: array[int] | None
    commits: array[int] | None
    owners: array[int] | None
    owner_labels: tuple[str, ...]

    def __init__(
        self,
        group_id: str,
        blob: bytes,
        config: OffsetConfig,
        default_assignor: str,
        per_partition: bool,
        *,
        behind_ms: int = DEFAULT_BEHIND_MS,
    ) -> None:
        g = codec.decode(blob)
        deadlines = all_deadlines(g, config)
        self.blob = blob
        self.group_id = group_id
        # kind and state as they are (the mirror-level count escapes them), the info labels escaped
        kind = self.kind = sys.intern(g.display_kind or "unknown")
        self.state = sys.intern(g.state or "Unknown")
        modern = kind in _MODERN
        protocol_type = kind if modern else g.protocol_type
        self.info = (
            _label(kind),
            _label(g.group_type),
            _label(protocol_type),
            _label(assignor(g, default_assignor)[0]),
        )
        # issue 26: the last timed rebalance's phases, abandoned topics, the commit-rate window
        t = g.last_timing
        self.phases = () if t is None else tuple(phases(kind, t.started_ms, t.assigned_ms, t.stable_ms))
        abandoned = abandoned_partitions(g)
        by_topic: dict[str, list[int]] = {}
        for tp in abandoned:
            d = deadlines.get(tp)
            entry = by_topic.setdefault(tp[0], [0, _NONE])
            entry[0] += 1
            if d is not None and (entry[1] == _NONE or d < entry[1]):
                entry[1] = d
        self.abandoned = tuple((_label(topic), n, d) for topic, (n, d) in sorted(by_topic.items()))
        self.window = points(g.commit_window)
        # issue 38: epoch bumps by cause (`state.causes`); classic generations are rebalances
        rebalances = g.counters.get("rebalances", 0)
        self.bumps: tuple[tuple[str, int], ...] = (
            (
                (REBALANCE, rebalances),
                (STATIC_REJOIN, g.counters.get(BUMP_COUNTER[STATIC_REJOIN], 0)),
                (SHARE_INITIALIZATION, g.counters.get(BUMP_COUNTER[SHARE_INITIALIZATION], 0)),
            )
            if modern
            else ((REBALANCE, rebalances),)
        )
        values = _scalar_values(g, modern, abandoned, behind_ms)
        self.scalars = array("q", (_NONE if v is None else v for v in values))
        self.deadlines = array("q", sorted(d for d in deadlines.values() if d is not None))
        self.topics = ()
        self.partitions = self.offsets = self.commits = self.owners = None
        self.owner_labels = _NO_OWNER_LABELS
        if per_partition and g.offsets:
            entries = sorted(g.offsets.items())
            runs = Counter(topic for (topic, _), _ in entries)  # insertion order = sorted order
            self.topics = tuple((_label(t), n) for t, n in runs.items())
            self.partitions = array("q", (p for (_, p), _ in entries))
            self.offsets = array("q", (e[0] for _, e in entries))
            self.commits = array("q", (_NONE if e[3] is None else e[3] for _, e in entries))
            owners = group_owners(g)
            index: dict[Owner, int] = {NO_OWNER: 0}
            for owner in owners.values():
                index.setdefault(owner, len(index))
            self.owner_labels = tuple(_owner_labels(o) for o in index)
            self.owners = array("i", (index[owners.get(tp, NO_OWNER)] for tp, _ in entries))

    # -- time-dependent series ---------------------------------------------------------------
    def next_expiry(self, now_ms: int) -> Samples:
        if not self.deadlines:
            return []
        return [((), max(0.0, (self.deadlines[0] - now_ms) / 1000))]

    def expiring(self, now_ms: int) -> Samples:
        return [
            ((window,), bisect.bisect_right(self.deadlines, now_ms + seconds * 1000))
            for window, seconds in EXPIRY_WINDOWS
        ]

    def rebalance_phases(self, now_ms: int) -> Samples:
        return [((phase,), ms / 1000) for phase, ms in self.phases]

    def commit_rate(self, now_ms: int) -> Samples:
        rate = commit_rate(self.window, now_ms)  # (t, commits) pairs
        return [] if rate is None else [((), rate)]

    def abandoned_offsets(self, now_ms: int) -> Samples:
        return [((topic,), n) for topic, n, _ in self.abandoned]

    def abandoned_expiry(self, now_ms: int) -> Samples:
        return [((topic,), d / 1000) for topic, _, d in self.abandoned if d != _NONE]

    def epoch_bumps(self, now_ms: int) -> Samples:
        return [((cause,), n) for cause, n in self.bumps]


def _owner_labels(o: Owner) -> str:
    return (
        f'member_host="{escape(o.member_host)}",consumer_id="{escape(o.consumer_id)}",'
        f'client_id="{escape(o.client_id)}"'
    )


_NO_OWNER_LABELS: Final = (_owner_labels(NO_OWNER),)


#: per-group families with labels of their own (or time-dependent): name -> the view's method
_LABELLED: Final = {
    _NEXT_EXPIRY: GroupNumbers.next_expiry,
    _EXPIRING: GroupNumbers.expiring,
    "coordinator_mirror_group_rebalance_duration_seconds": GroupNumbers.rebalance_phases,
    _COMMIT_RATE: GroupNumbers.commit_rate,
    "coordinator_mirror_group_abandoned_offsets": GroupNumbers.abandoned_offsets,
    "coordinator_mirror_group_abandoned_expiry_timestamp_seconds": GroupNumbers.abandoned_expiry,
    "coordinator_mirror_group_epoch_bumps_total": GroupNumbers.epoch_bumps,
}


def _scalar_values(g: Group, modern: bool, abandoned: frozenset[Any], behind_ms: int) -> list[int | None]:
    """The `_SCALARS` of a group, in that order."""
    newest = max((e[3] or 0 for e in g.offsets.values()), default=0)
    by_name: dict[str, int | None] = {
        "coordinator_mirror_group_state_since_timestamp_seconds": g.state_since_ms,
        "coordinator_mirror_group_epoch": g.group_epoch if modern else g.generation,
        "coordinator_mirror_group_assignment_epoch": g.assignment_epoch if modern else None,
        "coordinator_mirror_group_members": len(g.members),
        "coordinator_mirror_group_last_rebalance_timestamp_seconds": g.last_rebalance_ms,
        "coordinator_mirror_group_offsets": len(g.offsets),
        "coordinator_mirror_group_last_commit_timestamp_seconds": newest or None,
        "coordinator_mirror_group_oldest_commit_timestamp_seconds": oldest_commit_ms(g, abandoned),
        "coordinator_mirror_group_partitions_behind": partitions_behind(g, behind_ms, abandoned)
        if g.offsets
        else None,
    }
    for key, (name, _) in GROUP_COUNTERS.items():
        by_name[name] = g.counters.get(key, 0)
    return [by_name[name] for name in _SCALARS]


def _ms(value: int) -> str:
    """A time in ms as seconds, exactly: ``1700000000123e-3`` is the same float as ms / 1000."""
    return f"{value}e-3"


class Body:
    """The response body, written as it is rendered: parts are joined and encoded a few thousand at
    a time, so neither a million small strings nor a second copy of the body are ever alive.  The
    buffer starts at ``size_hint`` bytes (the last body's size, plus a margin): growing a 150 MB
    buffer from nothing costs ~70 reallocations copying ~9x its size; a fresh zeroed allocation of
    the hinted size costs nothing until written."""

    def __init__(self, size_hint: int = 0) -> None:
        self.out = io.BytesIO(bytes(size_hint)) if size_hint else io.BytesIO()
        self.parts: list[str] = []
        self.series = 0

    def flush(self) -> None:
        if self.parts:
            self.out.write("".join(self.parts).encode("utf-8"))
            self.parts.clear()

    def header(self, m: MetricDef) -> None:
        self.flush()
        self.parts.append(header(m))

    def samples(self, m: MetricDef, samples: Samples, prefix: str = "", written: int = 0) -> None:
        """Samples with their own label values: the family's labels after the first ``written``,
        which ``prefix`` holds as text."""
        labels = m.labels[written:]
        sep = "," if prefix and labels else ""
        for values, value in samples:
            ls = ",".join(f'{k}="{escape(x)}"' for k, x in zip(labels, values, strict=True))
            self.parts.append(f"{m.name}{{{prefix}{sep}{ls}}} {fmt(value)}\n")
        self.series += len(samples)

    def getvalue(self) -> bytes:
        self.flush()
        self.out.truncate()  # the hinted size's unwritten tail
        return self.out.getvalue()  # BytesIO hands its buffer over: no copy


def write_groups(body: Body, views: Sequence[GroupNumbers], cluster: str, now_ms: int) -> None:
    """Every per-group and per-partition family, one family at a time (the text format wants a
    family's samples together)."""
    c = escape(cluster)
    labels = [f'cluster_name="{c}",group="{escape(v.group_id)}"' for v in views]
    _write_group_families(body, views, labels, now_ms)
    _write_partition_families(body, views, labels)


def _write_group_families(body: Body, views: Sequence[GroupNumbers], labels: list[str], now_ms: int) -> None:
    parts = body.parts
    n = len(views)
    for m in GROUP_METRICS:
        body.header(m)
        name = m.name
        if name == _INFO:
            for v, lab in zip(views, labels, strict=True):
                k, t, pt, a = v.info
                parts.append(f'{name}{{{lab},kind="{k}",type="{t}",protocol_type="{pt}",protocol="{a}"}} 1\n')
            body.series += n
        elif name == _STATE:
            for v, lab in zip(views, labels, strict=True):
                states = GROUP_STATES.get(v.kind, ())
                if v.state not in states:
                    states = (*states, v.state)
                parts.extend(
                    f'{name}{{{lab},state="{escape(s)}"}} {1 if s == v.state else 0}\n' for s in states
                )
                body.series += len(states)
        elif name in _SCALAR_MS:
            i = _SCALARS.index(name)
            if _SCALAR_MS[name]:
                lines = [
                    f"{name}{{{lab}}} {x}e-3\n"
                    for v, lab in zip(views, labels, strict=True)
                    if (x := v.scalars[i]) != _NONE
                ]
            else:
                lines = [
                    f"{name}{{{lab}}} {x}\n"
                    for v, lab in zip(views, labels, strict=True)
                    if (x := v.scalars[i]) != _NONE
                ]
            parts.extend(lines)
            body.series += len(lines)
        else:  # families with labels of their own, or time-dependent ones
            fn = _LABELLED[name]
            for v, lab in zip(views, labels, strict=True):
                body.samples(m, fn(v, now_ms), lab, 2)
        body.flush()


def _write_partition_families(body: Body, views: Sequence[GroupNumbers], labels: list[str]) -> None:
    parts = body.parts
    for m in PARTITION_METRICS:
        body.header(m)
        name = m.name
        for v, lab in zip(views, labels, strict=True):
            if v.partitions is None:
                continue
            values = v.offsets if name == _OFFSET else v.commits
            assert values is not None and v.owners is not None
            before = len(parts)
            start = 0
            for topic, count in v.topics:
                tp = f'{name}{{{lab},topic="{topic}",partition="'
                end = start + count
                pv = zip(v.partitions[start:end], values[start:end], strict=True)
                if name == _OFFSET:
                    own = v.owner_labels
                    parts.extend(
                        [
                            f'{tp}{p}",{own[i]}}} {x}\n'
                            for (p, x), i in zip(pv, v.owners[start:end], strict=True)
                        ]
                    )
                else:
                    parts.extend([f'{tp}{p}"}} {x}e-3\n' for p, x in pv if x != _NONE])
                start = end
            body.series += len(parts) - before
            if len(parts) > _FLUSH_PARTS:
                body.flush()
        body.flush()
