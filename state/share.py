"""Share-partition delivery state from `__share_group_state`: the share coordinator's own fold of
ShareSnapshot (K=0) and ShareUpdate (K=1) records, per share group -- pure, time from the records.

What the share coordinator does on replay (``ShareCoordinatorShard.replay`` at 4.3), mirrored here:

* **ShareSnapshot** is the share-partition's whole state: it replaces what was held; a tombstone
  deletes the share-partition (the group, or its topic, was deleted).
* **ShareUpdate** is applied on top (``merge``): a start offset of -1 (None) keeps the current
  one, a leader epoch of -1 keeps the current one; DeliveryCompleteCount is the update's (-1 --
  a 4.1 broker -- unknown); the state batches are combined with the held ones and pruned below the
  start offset (``PersisterStateBatchCombiner``).  An update with nothing held becomes the state.
* **Combining batches**: where batches overlap, the one with the higher (delivery count, delivery
  state) wins -- the combiner's priority -- and contiguous runs with the same delivery count and
  state merge; `combine_batches` computes exactly that result (per offset, the highest priority;
  equal neighbours merged), which is what the coordinator holds and writes in its next snapshot.

Records a share-partition's key maps to one `__share_group_state` partition, so the log order of
that partition is the share-partition's order; per group the last applied offset of every state
partition is kept and records at or before it are ignored (a replay after a restart is a no-op).
Undecodable records and unknown types are counted and kept (with partition and offset), never
fatal.  Persisted delivery states: 0 Available (delivered, then released or its lock expired), 2
Acknowledged, 4 Archived (rejected, or out of delivery attempts); Acquired (1) is never persisted
-- which records a consumer holds right now is not in the log.

`partition_figures` turns one share-partition into what the mirror exports: start offset, the
in-flight window the state covers, records per delivery state, delivery attempts, and -- given the
log end -- the lag as Kafka defines it for ``kafka-share-groups --describe --offsets``
(``GroupCoordinatorService``: end offset - start offset - delivery complete count).
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable
from typing import Any, Final

import msgpack

from decoders.records import DecodeError, Record, ShareSnapshotValue, ShareUpdateValue, UnknownRecord

AVAILABLE: Final = 0
ACKNOWLEDGED: Final = 2
ARCHIVED: Final = 4
STATE_NAMES: Final = {
    AVAILABLE: "available",
    1: "acquired",
    ACKNOWLEDGED: "acknowledged",
    3: "archiving",
    ARCHIVED: "archived",
}
#: errors kept per share group (as `state.model.MAX_KEPT_ERRORS`)
MAX_KEPT_ERRORS: Final = 20
COUNTERS: Final = ("records", "snapshots", "updates", "tombstones", "unknown_records", "decode_errors")

#: (first offset, last offset, delivery state, delivery count)
Batch = tuple[int, int, int, int]
#: (topic id, partition)
SharePartitionKey = tuple[str, int]


class SharePartition:
    """What the share coordinator holds for one share-partition (``ShareGroupOffset``)."""

    __slots__ = (
        "batches",
        "create_ms",
        "delivery_complete_count",
        "leader_epoch",
        "snapshot_epoch",
        "start_offset",
        "state_epoch",
        "updated_ms",
        "write_ms",
    )

    def __init__(self) -> None:
        self.snapshot_epoch = 0
        self.state_epoch: int | None = None
        self.leader_epoch: int | None = None
        self.start_offset: int | None = None
        self.delivery_complete_count: int | None = None
        self.batches: tuple[Batch, ...] = ()
        self.create_ms: int | None = None
        self.write_ms: int | None = None
        self.updated_ms: int | None = None  # record time of the last record applied

    def to_row(self) -> list[Any]:
        return [
            self.snapshot_epoch, self.state_epoch, self.leader_epoch, self.start_offset,
            self.delivery_complete_count, [x for b in self.batches for x in b], self.create_ms,
            self.write_ms, self.updated_ms,
        ]  # fmt: skip

    @classmethod
    def from_row(cls, row: list[Any]) -> SharePartition:
        sp = cls()
        (sp.snapshot_epoch, sp.state_epoch, sp.leader_epoch, sp.start_offset, sp.delivery_complete_count,
         flat, sp.create_ms, sp.write_ms, sp.updated_ms) = row  # fmt: skip
        it = iter(flat)
        sp.batches = tuple(zip(it, it, it, it, strict=True))
        return sp

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SharePartition) and self.to_row() == other.to_row()

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"SharePartition(start={self.start_offset}, batches={self.batches})"


class ShareGroupState:
    """One share group's share-partitions, counters, kept errors and log positions."""

    __slots__ = ("counters", "errors", "group_id", "partitions", "positions")

    def __init__(self, group_id: str) -> None:
        self.group_id = group_id
        self.partitions: dict[SharePartitionKey, SharePartition] = {}
        self.counters: dict[str, int] = dict.fromkeys(COUNTERS, 0)
        self.errors: list[dict[str, Any]] = []
        #: `__share_group_state` partition -> the last offset applied for this group
        self.positions: dict[int, int] = {}

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ShareGroupState) and encode(self) == encode(other)

    __hash__ = None  # type: ignore[assignment]

    def keep_error(self, err: dict[str, Any]) -> None:
        self.errors.append(err)
        del self.errors[:-MAX_KEPT_ERRORS]


# ------------------------------------------------------------------------------------- batches
def combine_batches(held: Iterable[Batch], new: Iterable[Batch], start: int | None) -> tuple[Batch, ...]:
    """``PersisterStateBatchCombiner.combineStateBatches``: prune below ``start`` (None: no
    pruning), then per offset the batch with the highest (delivery count, delivery state), equal
    contiguous runs merged; sorted by offset."""
    batches = [b for b in (*held, *new) if b[1] >= b[0]]
    if start is not None:
        batches = [(max(f, start), la, s, c) for f, la, s, c in batches if la >= start]
    if not batches:
        return ()
    # sweep the offsets: at every boundary, the highest-priority batch covering it
    events = sorted({b[0] for b in batches} | {b[1] + 1 for b in batches})
    by_first = sorted(batches)
    heap: list[tuple[int, int, int, int]] = []  # (-count, -state, last, index)
    out: list[list[int]] = []
    j = 0
    for k, at in enumerate(events[:-1]):
        while j < len(by_first) and by_first[j][0] <= at:
            _, la, s, c = by_first[j]
            heapq.heappush(heap, (-c, -s, la, j))
            j += 1
        while heap and heap[0][2] < at:
            heapq.heappop(heap)
        if not heap:
            continue
        c, s = -heap[0][0], -heap[0][1]
        end = events[k + 1] - 1
        if out and out[-1][1] == at - 1 and out[-1][2] == s and out[-1][3] == c:
            out[-1][1] = end
        else:
            out.append([at, end, s, c])
    return tuple((f, la, s, c) for f, la, s, c in out)


def _batches(value: ShareSnapshotValue | ShareUpdateValue) -> tuple[Batch, ...]:
    return tuple(
        (b.first_offset, b.last_offset, b.delivery_state, b.delivery_count) for b in value.state_batches
    )


# ----------------------------------------------------------------------------------------- fold
def apply(
    state: ShareGroupState | None, rec: Record[Any, Any] | UnknownRecord | DecodeError, group_id: str
) -> ShareGroupState:
    """One `__share_group_state` record (decoded with `decoders.decode_share_state_record`)."""
    g = state if state is not None else ShareGroupState(group_id)
    src = rec.source
    last = g.positions.get(src.partition)
    if last is not None and src.offset <= last:
        return g  # already applied (a replay after a restart)
    g.positions[src.partition] = src.offset
    g.counters["records"] += 1
    if isinstance(rec, UnknownRecord):
        g.counters["unknown_records"] += 1
        g.keep_error(
            {
                "kind": "unknown",
                "partition": src.partition,
                "offset": src.offset,
                "record_type": rec.record_type,
            }
        )
        return g
    if isinstance(rec, DecodeError):
        g.counters["decode_errors"] += 1
        g.keep_error(
            {"kind": "error", "partition": src.partition, "offset": src.offset,
             "record_type": rec.record_type, "field": rec.field, "reason": rec.reason}
        )  # fmt: skip
        return g
    key = (rec.key.topic_id or "", rec.key.partition)
    v = rec.value
    if v is None:
        if rec.record_type == 0:
            g.counters["tombstones"] += 1
            g.partitions.pop(key, None)
        return g
    if isinstance(v, ShareSnapshotValue):
        g.counters["snapshots"] += 1
        sp = SharePartition()
        sp.snapshot_epoch = v.snapshot_epoch
        sp.state_epoch = v.state_epoch
        sp.leader_epoch = v.leader_epoch
        sp.start_offset = v.start_offset
        sp.delivery_complete_count = v.delivery_complete_count
        sp.batches = _batches(v)  # as written (the coordinator writes them combined)
        sp.create_ms = v.create_timestamp_ms
        sp.write_ms = v.write_timestamp_ms
        sp.updated_ms = src.timestamp_ms
        g.partitions[key] = sp
        return g
    if isinstance(v, ShareUpdateValue):
        g.counters["updates"] += 1
        held = g.partitions.get(key)
        if held is None:  # ShareGroupOffset.fromRecord(update): the update, as written, is the state
            sp = g.partitions[key] = SharePartition()
            sp.snapshot_epoch = v.snapshot_epoch
            sp.leader_epoch = v.leader_epoch
            sp.start_offset = v.start_offset
            sp.batches = _batches(v)
        else:
            sp = held
            if v.start_offset is not None:
                sp.start_offset = v.start_offset
            if v.leader_epoch is not None:
                sp.leader_epoch = v.leader_epoch
            sp.batches = combine_batches(sp.batches, _batches(v), sp.start_offset)
        sp.delivery_complete_count = v.delivery_complete_count
        sp.updated_ms = src.timestamp_ms
    return g


def fold(state: ShareGroupState | None, records: Iterable[Record[Any, Any] | UnknownRecord | DecodeError],
         group_id: str) -> ShareGroupState | None:  # fmt: skip
    """Records of one share group in log order; None when nothing is left (every share-partition
    deleted and nothing kept worth a state row)."""
    g = state
    for rec in records:
        g = apply(g, rec, group_id)
    if g is not None and not g.partitions and not g.errors:
        return None
    return g


# -------------------------------------------------------------------------------------- figures
def partition_figures(sp: SharePartition, end_offset: int | None = None) -> dict[str, Any]:
    """What the mirror exports for one share-partition.  ``end_offset``: the partition's log end
    (high watermark), when known: then ``lag`` = end - start offset - delivery complete count
    (Kafka's figure; the complete count is the broker's where it wrote one (4.2+), else the
    acknowledged + archived records the state holds at or after the start offset)."""
    by_state = {AVAILABLE: 0, ACKNOWLEDGED: 0, ARCHIVED: 0}
    attempts = max_count = 0
    for first, last, state, count in sp.batches:
        n = last - first + 1
        by_state[state] = by_state.get(state, 0) + n
        attempts += n * count
        max_count = max(max_count, count)
    complete = by_state[ACKNOWLEDGED] + by_state[ARCHIVED]
    window_end = sp.batches[-1][1] + 1 if sp.batches else sp.start_offset
    out: dict[str, Any] = {
        "start_offset": sp.start_offset,
        "leader_epoch": sp.leader_epoch,
        "state_epoch": sp.state_epoch,
        "snapshot_epoch": sp.snapshot_epoch,
        "in_flight": None if sp.start_offset is None or window_end is None else window_end - sp.start_offset,
        "available": by_state[AVAILABLE],
        "acknowledged": by_state[ACKNOWLEDGED],
        "archived": by_state[ARCHIVED],
        "delivery_attempts": attempts,
        "max_delivery_count": max_count,
        "delivery_complete_count": sp.delivery_complete_count,
        "complete_in_state": complete,
        "updated_ms": sp.updated_ms,
        "end_offset": end_offset,
        "lag": None,
    }
    if end_offset is not None and sp.start_offset is not None:
        done = sp.delivery_complete_count if sp.delivery_complete_count is not None else complete
        out["lag"] = max(0, end_offset - sp.start_offset - done)
    return out


def summary(g: ShareGroupState) -> dict[str, Any]:
    return {
        "group_id": g.group_id,
        "share_partitions": len(g.partitions),
        "records": g.counters["records"],
        "decode_errors": g.counters["decode_errors"],
        "updated_ms": max((sp.updated_ms or 0 for sp in g.partitions.values()), default=None) or None,
    }


# ---------------------------------------------------------------------------------------- codec
CODEC_VERSION: Final = 1


class ShareCodecError(ValueError):
    pass


def encode(g: ShareGroupState) -> bytes:
    row = [
        g.group_id,
        [[tid, p, *sp.to_row()] for (tid, p), sp in g.partitions.items()],
        [g.counters[c] for c in COUNTERS],
        g.errors,
        [x for kv in g.positions.items() for x in kv],
    ]
    packed: bytes = msgpack.packb(row, use_bin_type=True)
    return bytes([CODEC_VERSION]) + packed


def decode(blob: bytes) -> ShareGroupState:
    if not blob or blob[0] != CODEC_VERSION:
        raise ShareCodecError(f"not a version-{CODEC_VERSION} share state blob")
    try:
        group_id, parts, counters, errors, positions = msgpack.unpackb(
            blob[1:], raw=False, strict_map_key=False
        )
        g = ShareGroupState(group_id)
        for tid, p, *row in parts:
            g.partitions[(tid, p)] = SharePartition.from_row(row)
        g.counters = dict(zip(COUNTERS, counters, strict=True))
        g.errors = errors
        g.positions = dict(zip(positions[::2], positions[1::2], strict=True))
    except (ValueError, TypeError, msgpack.ExtraData) as exc:
        raise ShareCodecError(f"share state blob does not decode: {exc}") from exc
    return g
