"""What must hold for every group state the mirror keeps, checked after a group's fold.

The replay functions never raise on odd-but-possible sequences (a generation going back is counted
as an ``anomaly``); the checks here are the coordinator's own guarantees, which no log it writes
can break at any record boundary.  A violation means a record the coordinator did not write (or a
replay bug): the streaming adapter quarantines the group (`streaming.pipeline.adapter`) instead of
keeping a state nobody can trust.

* a classic group with members has its leader among them (the coordinator writes a group record
  with members only after a SyncGroup, whose leader is a member, or when a static member is
  replaced, which moves the leadership to the new member id).
"""

from __future__ import annotations

from state.model import CLASSIC, Group


class InvariantError(ValueError):
    """A group state that breaks one of the coordinator's guarantees (the message names which)."""


def check(g: Group | None) -> None:
    if g is None:
        return
    if g.kind == CLASSIC and g.members and g.leader is not None and g.leader not in g.members:
        raise InvariantError(f"classic group leader {g.leader} is not one of its {len(g.members)} members")
