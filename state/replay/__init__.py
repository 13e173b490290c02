"""Replay: one pure function per record type, in one dispatch table, folding records into a `Group`.

Modelled on the 4.x coordinator's ``replay`` methods (``GroupMetadataManager``,
``OffsetMetadataManager``): each record type has one ``replay_*`` function, a tombstone is an
explicit branch of it, and `DISPATCH` maps the record type K to the function.  A function gets the
group (never ``None``: a fresh `Group` whose ``kind is None`` stands for "no group object"), the
record and the fold context, and returns the group -- or ``None`` when the coordinator would no
longer hold anything for the id (the adapter then removes the state row).

Split by concern, as the coordinator splits it (each module's docstring keeps its semantic notes):

* `context` -- the fold context and result, source coordinates, and the group and member helpers
  every family shares (kind changes, state, members, group deletion);
* `offsets` -- K=0/1 offset commits and tombstones, simple groups (``OffsetMetadataManager``);
* `classic` -- K=2 classic groups (``GroupMetadataManager``, classic);
* `modern` -- K=3..23 KIP-848 consumer, share and streams groups (``GroupMetadataManager``, modern);
* `dispatch` -- `DISPATCH`, `apply_record`, `fold`, `replay`.

Layers (an import-linter contract in pyproject.toml): `dispatch` above the three families, which
never import each other, above `context`.  This package re-exports what the rest of the project uses.
"""

from __future__ import annotations

from state.replay.context import FoldContext, FoldResult
from state.replay.dispatch import DISPATCH, apply_record, finish, fold, replay
from state.replay.offsets import apply_commit, apply_offset_tombstone, create_simple

__all__ = [
    "DISPATCH",
    "FoldContext",
    "FoldResult",
    "apply_commit",
    "apply_offset_tombstone",
    "apply_record",
    "create_simple",
    "finish",
    "fold",
    "replay",
]
