"""The dispatch table from record type K to its ``replay_*`` function, and the fold that applies a
group's records through it in log order.

* Records at or before `Group.last_position` are ignored, so replays after a restart are idempotent
  (why log order is Kafka's own rule: "Newest log position wins" in `state.replay.offsets`).
* Unknown record types and decode errors are counted and kept, never fatal.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Final

from decoders.records import DecodeError, Record, UnknownRecord
from state import causes, timing
from state.config import DEFAULT_CONFIG, OffsetConfig
from state.expiry import check_pending
from state.model import Group
from state.replay.classic import replay_group_metadata
from state.replay.context import FoldContext, FoldResult, src_of
from state.replay.modern import (
    replay_consumer_current_member_assignment,
    replay_consumer_group_metadata,
    replay_consumer_member_metadata,
    replay_consumer_partition_metadata,
    replay_consumer_regex,
    replay_consumer_target_assignment_member,
    replay_consumer_target_assignment_metadata,
    replay_share_current_member_assignment,
    replay_share_group_metadata,
    replay_share_member_metadata,
    replay_share_partition_metadata,
    replay_share_target_assignment_member,
    replay_share_target_assignment_metadata,
    replay_streams_current_member_assignment,
    replay_streams_group_metadata,
    replay_streams_member_metadata,
    replay_streams_target_assignment_member,
    replay_streams_target_assignment_metadata,
    replay_streams_topology,
)
from state.replay.offsets import replay_offset_commit

Position = tuple[int, int]
_COMMIT_TYPES: Final = frozenset({0, 1})


ReplayFn = Callable[[Group, Record[Any, Any], FoldContext], "Group | None"]

DISPATCH: Final[dict[int, ReplayFn]] = {
    0: replay_offset_commit,
    1: replay_offset_commit,
    2: replay_group_metadata,
    3: replay_consumer_group_metadata,
    4: replay_consumer_partition_metadata,
    5: replay_consumer_member_metadata,
    6: replay_consumer_target_assignment_metadata,
    7: replay_consumer_target_assignment_member,
    8: replay_consumer_current_member_assignment,
    9: replay_share_partition_metadata,
    10: replay_share_member_metadata,
    11: replay_share_group_metadata,
    12: replay_share_target_assignment_metadata,
    13: replay_share_target_assignment_member,
    14: replay_share_current_member_assignment,
    15: replay_share_partition_metadata,
    16: replay_consumer_regex,
    17: replay_streams_group_metadata,
    19: replay_streams_member_metadata,
    20: replay_streams_target_assignment_metadata,
    21: replay_streams_target_assignment_member,
    22: replay_streams_current_member_assignment,
    23: replay_streams_topology,
}


# ============================================================================================
# Folding


def skipped_entry(rec: UnknownRecord | DecodeError) -> dict[str, Any]:
    s = rec.source
    if isinstance(rec, UnknownRecord):
        return {
            "kind": "unknown",
            "partition": s.partition,
            "offset": s.offset,
            "record_type": rec.record_type,
        }
    return {
        "kind": "error",
        "partition": s.partition,
        "offset": s.offset,
        "record_type": rec.record_type,
        "field": rec.field,
        "reason": rec.reason,
    }


def is_applied(g: Group | None, pos: Position) -> bool:
    """Whether a record at ``pos`` is at or before what the group already applied."""
    return g is not None and g.last_position is not None and pos <= g.last_position


def apply_record(
    g: Group | None,
    rec: Record[Any, Any] | UnknownRecord | DecodeError,
    ctx: FoldContext,
    group_id: str | None,
) -> Group | None:
    """Apply one decoded record (any kind) to the group; the heart of `fold` and the batch path."""
    src = src_of(rec)
    pos = (src[0], src[1])
    if is_applied(g, pos):
        return g
    if g is None:
        gid = group_id
        if isinstance(rec, Record) or (isinstance(rec, DecodeError) and rec.key is not None):
            gid = rec.key.group_id
        g = Group(gid if gid is not None else "")
    if g.pending:
        check_pending(g, src[2], ctx.config, ctx.events, (src[0], src[1]))
    if isinstance(rec, Record):
        fn = DISPATCH.get(rec.record_type)
        # rebalance timing follows the group records (offset commits never move a rebalance)
        timed = fn is not None and rec.record_type not in _COMMIT_TYPES
        prior = timing.before(g) if timed else None
        bumps = causes.before(g) if timed else None
        n_events = len(ctx.events)
        if fn is None:
            g.counters["unknown_records"] += 1
            entry = {"kind": "unknown", "partition": src[0], "offset": src[1], "record_type": rec.record_type}
            g.keep_error(entry)
            ctx.skipped.append(entry)
            out: Group | None = g
        else:
            out = fn(g, rec, ctx)
            if timed:
                assert bumps is not None
                causes.note(out, bumps, rec.record_type, ctx.events[n_events:])
                made = timing.after_record(out, prior, rec, ctx.events[n_events:], src)
                if made is not None:
                    ctx.events.append(made)
    else:
        entry = skipped_entry(rec)
        g.counters["unknown_records" if isinstance(rec, UnknownRecord) else "decode_errors"] += 1
        g.keep_error(entry)
        ctx.skipped.append(entry)
        out = g
    if out is not None:
        if out.kind is None and not out.offsets and not out.pending:
            return None  # nothing for this id (e.g. a tombstone of something never seen)
        out.counters["records"] += 1
        out.last_position = pos
        out.last_change_ms = src[2]
    return out


def finish(g: Group | None, ctx: FoldContext) -> FoldResult:
    if g is not None:
        ctx.flush(g.group_id)
        if not g.exists and not g.offsets and not g.pending:
            g = None
    return FoldResult(g, ctx.events, ctx.skipped)


def fold(
    group: Group | None,
    records: Iterable[Record[Any, Any] | UnknownRecord | DecodeError],
    *,
    group_id: str | None = None,
    config: OffsetConfig = DEFAULT_CONFIG,
) -> FoldResult:
    """Fold records (one group's, in log order) into ``group`` (``None`` = no state yet).

    Mutates and returns ``group`` (or a new `Group`, or ``None``); pure in the sense that the same
    state and records always give the same result.  ``group_id`` names the group when ``group`` is
    None and the first record carries no decodable key (unknown types)."""
    ctx = FoldContext(config)
    g = group
    for rec in records:
        g = apply_record(g, rec, ctx, group_id)
    return finish(g, ctx)


def replay(
    group: Group | None,
    record: Record[Any, Any] | UnknownRecord | DecodeError,
    *,
    config: OffsetConfig = DEFAULT_CONFIG,
) -> FoldResult:
    """One record (the per-record API; `fold` of a one-element list)."""
    return fold(group, (record,), config=config)
