"""Offset commits and offset tombstones (K=0, K=1) -- ``OffsetMetadataManager``'s concern -- and the
simple classic group an offset without a group creates.

* **An offset commit creates a simple group** when none exists (``OffsetMetadataManager.replay``:
  ``getOrMaybeCreateClassicGroup(groupId, true)``).
* **Newest log position wins.**  4.x stores a replayed commit unconditionally and materialises a
  committed transaction's offsets only if their *record* offset is newer than the stored one
  (``replayEndTransactionMarker``).  Under ``read_committed`` the reader sees committed
  transactional records at their log position, so "apply in log order" is the same rule; records
  at or before `Group.last_position` are ignored (replays after a restart are idempotent).
* **K=0 and K=1** are different keys for compaction but the same offset: both replay here.
"""

from __future__ import annotations

from typing import Any

from decoders.records import Record
from state import events as ev
from state.expiry import classify_tombstone
from state.model import CLASSIC, EMPTY, Group, OffsetEntry, TopicPartition
from state.replay.context import FoldContext, Src, ensure_kind, src_of
from state.rhythm import note_commits


def create_simple(g: Group, src: Src, ctx: FoldContext) -> None:
    """``getOrMaybeCreateClassicGroup(groupId, true)``: offsets without a group object."""
    ensure_kind(g, CLASSIC, src, ctx)
    g.state = EMPTY
    g.state_since_ms = src[2]


def apply_commit(g: Group, tp: TopicPartition, entry: OffsetEntry, src: Src, ctx: FoldContext) -> None:
    """Store one committed offset (shared by the per-record and the batch paths)."""
    if g.kind is None:
        create_simple(g, src, ctx)
    topic_id = entry[5]
    if topic_id is not None:
        g.topic_names[topic_id] = tp[0]
    if g.pending:
        g.pending.pop(tp, None)
    g.offsets[tp] = entry
    ctx.committed.add(tp)
    ctx.commit_topics.add(tp[0])
    ctx.last_src["commit"] = src


def apply_offset_tombstone(g: Group, tp: TopicPartition, src: Src, ctx: FoldContext) -> None:
    """An offset tombstone: a no-op for an offset already gone (confirming a mirror expiry if it
    was one); otherwise an expiry, an admin delete or a disagreement (state/expiry.py)."""
    if tp not in g.offsets:
        if g.pending.pop(tp, None) is not None:
            g.counters["expiries_confirmed"] += 1
        return
    verdict = classify_tombstone(g, tp[0], tp[1], src[2], ctx.config)
    del g.offsets[tp]
    if verdict == "expired":
        g.counters["offsets_expired"] += 1
        ctx.broker_expired.append(tp)
        ctx.last_src["expired"] = src
    elif verdict == "disagreement":
        g.counters["expiry_disagreements"] += 1
        p, o, t = src
        ctx.events.append(
            ev.ExpiryDisagreement(g.group_id, p, o, t, reason="early_tombstone", partitions=(ev.tp_str(*tp),))
        )
    else:
        g.counters["offsets_deleted"] += 1
        ctx.deleted.append(tp)
        ctx.last_src["deleted"] = src


def replay_offset_commit(g: Group, rec: Record[Any, Any], ctx: FoldContext) -> Group | None:
    """K=0 (legacy, 0.8.2) and K=1 -- ``OffsetMetadataManager.replay``."""
    key = rec.key
    tp = (key.topic, key.partition)
    src = src_of(rec)
    v = rec.value
    if v is None:
        apply_offset_tombstone(g, tp, src, ctx)
        return g
    entry: OffsetEntry = (
        v.offset,
        v.leader_epoch,
        v.metadata,
        v.commit_timestamp_ms,
        v.expire_timestamp_ms,
        v.topic_id,
        src[0],
        src[1],
    )
    apply_commit(g, tp, entry, src, ctx)
    ctx.commits += 1
    g.counters["commits"] += 1
    g.commit_window = note_commits(g.commit_window, src[2], g.counters["commits"])
    return g
