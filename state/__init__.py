"""Decoded records -> the per-group GroupMetadata mirror (pure Python: no Spark, no clock).

Public API (see state/README.md):

* `fold(group, records)` / `replay(group, record)` -> `FoldResult(group | None, events, skipped)`
* `fold_columns(group, cols)` -- the batch path over one group's rows as column lists
  (`decoders.columns`); `step_detail(group, cols, now_ms)` -> ``(group | None, events,
  next_deadline_ms | None, deadlines)``: what the ``applyInPandasWithState`` adapter calls per
  group and trigger
* `expire(group, now_ms)`, `expires_at_ms(group, topic, partition)`, `next_deadline_ms(group)`
* `snapshot(group)` / `summary(group)` -- the HTTP API's JSON
* `encode(group)` / `decode(blob)` -- the versioned state bytes
* `OffsetConfig(retention_ms, semantics, confirm_grace_ms)`; events in `state.events`

A ``None`` group everywhere means "no state for this id" (the adapter calls ``state.remove()``).
"""

from __future__ import annotations

from state import events
from state.codec import CURRENT_VERSION, StateCodecError, decode, encode
from state.config import DEFAULT_CONFIG, OffsetConfig
from state.events import EVENT_KEY, Event, event_from_json, event_key
from state.expiry import all_deadlines, expire, expires_at_ms, next_deadline_ms
from state.fold import StepResult, fold_columns, step_detail
from state.model import Group, Member
from state.replay import FoldResult, fold, replay
from state.snapshot import snapshot, summary

__all__ = [
    "CURRENT_VERSION",
    "DEFAULT_CONFIG",
    "EVENT_KEY",
    "Event",
    "FoldResult",
    "Group",
    "Member",
    "OffsetConfig",
    "StateCodecError",
    "StepResult",
    "all_deadlines",
    "decode",
    "encode",
    "event_from_json",
    "event_key",
    "events",
    "expire",
    "expires_at_ms",
    "fold",
    "fold_columns",
    "next_deadline_ms",
    "replay",
    "snapshot",
    "step_detail",
    "summary",
]
