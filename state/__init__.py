"""Decoded records -> the per-group GroupMetadata mirror (pure Python: no Spark, no clock).

Public API (see state/README.md):

* `fold(group, records)` / `replay(group, record)` -> `FoldResult(group | None, events, skipped)`
* `fold_frame(group, df)` -- the batch path over a ``decoders.OUTPUT_SCHEMA`` pandas frame, and
  `fold_columns(group, cols)` over the same columns as plain lists;
  `step(group, df_or_cols, now_ms)` -> ``(group | None, events, next_deadline_ms | None)``: what the
  ``applyInPandasWithState`` adapter calls per group and trigger
* `expire(group, now_ms)`, `expires_at_ms(group, topic, partition)`, `next_deadline_ms(group)`
* `snapshot(group)` / `summary(group)` -- the HTTP API's JSON
* `encode(group)` / `decode(blob)` -- the versioned state bytes
* `OffsetConfig(retention_ms, semantics, confirm_grace_ms)`; events in `state.events`

A ``None`` group everywhere means "no state for this id" (the adapter calls ``state.remove()``).
The batch names load lazily (PEP 562): per-record users do not import pandas.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from state import events
from state.codec import CURRENT_VERSION, StateCodecError, decode, encode
from state.config import DEFAULT_CONFIG, OffsetConfig
from state.events import Event, event_from_json
from state.expiry import all_deadlines, expire, expires_at_ms, next_deadline_ms
from state.model import Group, Member
from state.replay import FoldResult, fold, replay
from state.snapshot import snapshot, summary

if TYPE_CHECKING:
    from state.fold import fold_columns, fold_frame, step

_BATCH_NAMES = frozenset({"fold_columns", "fold_frame", "step"})


def __getattr__(name: str) -> Any:
    if name in _BATCH_NAMES:
        return getattr(importlib.import_module("state.fold"), name)
    raise AttributeError(f"module 'state' has no attribute {name!r}")


__all__ = [
    "CURRENT_VERSION",
    "DEFAULT_CONFIG",
    "Event",
    "FoldResult",
    "Group",
    "Member",
    "OffsetConfig",
    "StateCodecError",
    "all_deadlines",
    "decode",
    "encode",
    "event_from_json",
    "events",
    "expire",
    "expires_at_ms",
    "fold",
    "fold_columns",
    "fold_frame",
    "next_deadline_ms",
    "replay",
    "snapshot",
    "step",
    "summary",
]
