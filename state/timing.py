"""Rebalance timings from the log: how long each rebalance took, in Kafka's own phases.

Called by the fold after every group record (`state.replay.dispatch.apply_record`), with the
events that record made; time is the records' own (their log timestamps and the times the
records carry).  What each kind of group writes, and so what can be timed:

* **Classic** (K=2, ``GroupMetadataManager``/``GroupCoordinator``): PreparingRebalance and
  CompletingRebalance are never written; the leader's SyncGroup writes the whole group while it is
  CompletingRebalance, so that record's ``currentStateTimestamp`` is when the join phase ended and
  its record time is when the group became Stable -- the **CompletingRebalance** phase of every
  generation (value V2+).  The start of the join phase is written only for a new group: 4.x writes a
  "new empty group" record (generation 0, no protocol type) at the first JoinGroup, so the
  **PreparingRebalance** phase -- and the total -- are known for a group's first generation.
* **KIP-848 consumer, share and streams groups**: every step is a record -- the group epoch bump
  (K=3/11/17, with the member record that caused it), the target assignment (K=6/12/20; 4.3 writes
  the time the assignment was computed, ``AssignmentTimestamp``, KIP-1263), each member's epoch and
  state (K=8/14/22).  The rebalance starts with the first record that takes a settled group (every
  member at the target epoch, in its STABLE member state, no newer group epoch) out of that state,
  is **Assigning** until the target assignment that ends it, **Reconciling** until every member
  reached it; a rebalance that ends with no member left is not timed (nothing to reconcile).

**No invented timing.**  A start is trusted only after the mirror saw the group settled: the replay
of a compacted log (a new checkpoint) holds only each key's newest record, so the first settled
state it reaches -- and any "rebalance" before it -- is an artefact of compaction.  A modern
group's first rebalance is therefore not timed (its creation looks like any compacted history); a
classic group's is, from its generation-0 record, which only a live log keeps.  History that
contradicts itself -- a target epoch ahead of the group epoch, epochs or generations going back,
times before the start -- drops the rebalance being timed and waits for the next settled state.
Times are the coordinator's (its record timestamps are append times: a write's records share one).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final, NamedTuple

from state import events as ev
from state.model import (
    CLASSIC,
    CONSUMER_MEMBER_STABLE,
    STREAMS,
    STREAMS_MEMBER_STABLE,
    Group,
)

#: member ids kept per rebalance for the joined / left lists (the counts are always exact)
MAX_MEMBER_IDS: Final = 20
#: phase names per kind -- the group state Kafka reports during each span
CLASSIC_PHASES: Final = ("PreparingRebalance", "CompletingRebalance")
MODERN_PHASES: Final = ("Assigning", "Reconciling")
TOTAL: Final = "total"


class Timing(NamedTuple):
    """The last timed rebalance of a group (`Group.last_timing`)."""

    generation: int
    started_ms: int | None
    assigned_ms: int | None
    stable_ms: int


class Tracker:
    """What the fold remembers between records to time a rebalance (`Group.timing`)."""

    __slots__ = (
        "assigned_ms",
        "joined",
        "left",
        "n_joined",
        "n_left",
        "settled",
        "start_epoch",
        "started_ms",
        "trusted",
    )

    def __init__(self) -> None:
        #: the mirror saw the group settled since its history began (or since it contradicted itself)
        self.trusted = False
        #: the group is settled now (as of the last record)
        self.settled = False
        #: a rebalance being timed: when it started (None: none, or its start is unknown)
        self.started_ms: int | None = None
        #: modern: the target assignment epoch when it started; classic: unused
        self.start_epoch: int | None = None
        self.assigned_ms: int | None = None
        #: members that joined / left since the previous rebalance (ids capped, counts exact)
        self.joined: list[str] = []
        self.left: list[str] = []
        self.n_joined = 0
        self.n_left = 0

    def to_row(self) -> list[Any]:
        return [self.trusted, self.settled, self.started_ms, self.start_epoch, self.assigned_ms,
                self.joined, self.left, self.n_joined, self.n_left]  # fmt: skip

    @classmethod
    def from_row(cls, row: Sequence[Any]) -> Tracker:
        t = cls()
        (t.trusted, t.settled, t.started_ms, t.start_epoch, t.assigned_ms, joined, left,
         t.n_joined, t.n_left) = row  # fmt: skip
        t.joined, t.left = list(joined), list(left)
        return t

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Tracker) and self.to_row() == other.to_row()

    __hash__ = None  # type: ignore[assignment]  # mutable

    def __repr__(self) -> str:
        return f"Tracker({self.to_row()!r})"

    # -- helpers ------------------------------------------------------------------------------
    def note_members(self, events: Sequence[ev.Event]) -> None:
        for e in events:
            if isinstance(e, ev.MemberJoined):
                self._add(self.joined, e.member_id)
                self.n_joined += 1
            elif isinstance(e, ev.MemberLeft):
                self._add(self.left, e.member_id)
                self.n_left += 1
            elif isinstance(e, ev.MemberReplaced):  # a static member came back under a new id
                self._add(self.joined, e.after)
                self._add(self.left, e.before)
                self.n_joined += 1
                self.n_left += 1

    @staticmethod
    def _add(ids: list[str], member_id: str) -> None:
        if len(ids) < MAX_MEMBER_IDS and member_id not in ids:
            ids.append(member_id)

    def settle(self, *, rebalanced: bool = True) -> None:
        """The group is settled: nothing in progress.  ``rebalanced``: a rebalance ended (timed or
        not), so the member changes were reported with it or are dropped; else they are kept for
        the next rebalance (one coordinator write is several records: a leaving member's records
        come before the epoch bump, and the group looks settled in between)."""
        self.trusted = self.settled = True
        self.started_ms = self.start_epoch = self.assigned_ms = None
        if rebalanced:
            self.joined, self.left, self.n_joined, self.n_left = [], [], 0, 0

    def distrust(self) -> None:
        """The history contradicts itself: time nothing until the group is settled again."""
        self.trusted = self.settled = False
        self.started_ms = self.start_epoch = self.assigned_ms = None


class Before(NamedTuple):
    """The few facts of a group taken before a record is applied."""

    kind: str | None
    generation: int | None
    group_epoch: int | None
    assignment_epoch: int | None


def before(g: Group | None) -> Before | None:
    if g is None or g.kind is None:
        return None
    return Before(g.kind, g.generation, g.group_epoch, g.assignment_epoch)


def tracker(g: Group) -> Tracker:
    t: Tracker | None = g.timing
    if t is None:
        t = g.timing = Tracker()
    return t


#: (partition, offset, timestamp_ms) of the record being replayed
Src = tuple[int, int, int]


def after_record(
    g: Group | None, prior: Before | None, rec: Any, events: Sequence[ev.Event], src: Src
) -> ev.RebalanceTimed | None:
    """Update the group's tracker after one group record (``events``: what that record made);
    the `RebalanceTimed` event when the record ended a timed rebalance."""
    if g is None:
        return None
    if g.kind is None or (prior is not None and prior.kind != g.kind):
        g.timing = None  # deleted, or converted to another kind: its history starts over
        if g.kind is None:
            return None
    t = tracker(g)
    t.note_members(events)
    if g.kind == CLASSIC:
        return _classic(g, t, prior, rec, src)
    return _modern(g, t, prior, rec, src)


# ---------------------------------------------------------------------------------------- classic
def _classic(g: Group, t: Tracker, prior: Before | None, rec: Any, src: Src) -> ev.RebalanceTimed | None:
    if rec.record_type != 2 or rec.value is None:
        return None
    v = rec.value
    ts = src[2]
    cst = v.current_state_timestamp_ms
    gen = v.generation
    old = prior.generation if prior is not None else None
    if gen == 0 and v.protocol_type is None:
        # 4.x's "new empty group" record, written at the group's first JoinGroup: the join phase
        # of its first generation starts here
        t.distrust()
        t.trusted = True
        t.started_ms = cst if cst is not None and cst <= ts else ts
        return None
    if old is not None and gen < old:
        t.distrust()  # a generation going back: a log this mirror cannot follow
        return None
    if old is not None and gen == old:
        if t.started_ms is None:
            t.settle(rebalanced=False)  # a rewrite of a settled generation (a static member's new id)
        return None
    # a new generation
    if not v.members:
        t.settle()  # the rebalance ended with the group Empty: no CompletingRebalance, nothing to time
        return None
    started = t.started_ms
    if cst is not None and (cst > ts or (started is not None and cst < started)):
        t.distrust()
        return None
    assigned = cst
    if started is None and assigned is None:
        t.settle()  # a V0/V1 record of a generation whose start was not written: nothing known
        return None
    skipped = 0 if old is None else gen - old - 1  # as the rebalance_completed event counts them
    return _timed(g, t, src, Timing(gen, started, assigned, ts), skipped)


# ----------------------------------------------------------------------------------------- modern
def _stable_code(g: Group) -> int:
    return STREAMS_MEMBER_STABLE if g.kind == STREAMS else CONSUMER_MEMBER_STABLE


def _epoch(x: int | None) -> int | None:
    return None if x is None or x < 0 else x


def _settled(g: Group) -> bool:
    """Every member at the target epoch in its STABLE member state, no newer group epoch."""
    target, epoch = _epoch(g.assignment_epoch), _epoch(g.group_epoch)
    if target is None or epoch is None or epoch != target:
        return False
    code = _stable_code(g)
    return all(m.member_epoch == target and m.member_state == code for m in g.members.values())


def _modern(g: Group, t: Tracker, prior: Before | None, rec: Any, src: Src) -> ev.RebalanceTimed | None:
    ts = src[2]
    epoch, target = _epoch(g.group_epoch), _epoch(g.assignment_epoch)
    old_epoch = _epoch(prior.group_epoch) if prior is not None else None
    old_target = _epoch(prior.assignment_epoch) if prior is not None else None
    inconsistent = (
        (target is not None and epoch is not None and target > epoch)
        or (old_epoch is not None and epoch is not None and epoch < old_epoch)
        or (old_target is not None and target is not None and target < old_target)
        or (t.started_ms is not None and ts < t.started_ms)
        or any(m.member_epoch is not None and target is not None and m.member_epoch > target
               for m in g.members.values())
    )  # fmt: skip
    if inconsistent:
        t.distrust()
        return None
    if target is not None and (old_target is None or target > old_target) and t.started_ms is not None:
        # the target assignment this rebalance reached (so far): 4.3+ says when it was computed
        at = getattr(rec.value, "assignment_timestamp_ms", None) if rec.value is not None else None
        t.assigned_ms = ts if at is None else min(max(at, t.started_ms), ts)
    settled_now = _settled(g)
    was_settled = t.settled
    t.settled = settled_now
    if not settled_now:
        if was_settled and t.trusted and t.started_ms is None:
            t.started_ms = ts  # the first record that takes a settled group out of that state
            t.start_epoch = target
            t.assigned_ms = None
        return None
    if g.members and t.started_ms is not None and target == t.start_epoch:
        t.settle(rebalanced=False)  # back where it started, no new target: not a rebalance (yet)
        return None
    if not g.members or t.started_ms is None or t.assigned_ms is None:
        t.settle()  # nothing timed: no member to reconcile, or a start not seen
        return None
    assert target is not None
    skipped = 0 if t.start_epoch is None else max(0, target - t.start_epoch - 1)
    return _timed(g, t, src, Timing(target, t.started_ms, t.assigned_ms, ts), skipped)


def _timed(g: Group, t: Tracker, src: Src, timing: Timing, skipped: int) -> ev.RebalanceTimed:
    g.last_timing = timing
    generation, started, assigned, stable = timing
    p, o, ts = src
    out = ev.RebalanceTimed(
        g.group_id,
        p,
        o,
        ts,
        kind=g.display_kind,
        generation=generation,
        skipped=skipped,
        started_ms=started,
        assigned_ms=assigned,
        stable_ms=stable,
        duration_ms=None if started is None else stable - started,
        members=len(g.members),
        joined=tuple(t.joined),
        left=tuple(t.left),
        joined_count=t.n_joined,
        left_count=t.n_left,
    )
    t.settle()
    return out


# --------------------------------------------------------------------------------------- phases
def phases(kind: str | None, started: int | None, assigned: int | None, stable: int) -> list[tuple[str, int]]:
    """The known phases of a timed rebalance, (Kafka state name or ``total``, ms): what the
    histogram and the per-group gauge export."""
    first, second = CLASSIC_PHASES if kind in (CLASSIC, "simple") else MODERN_PHASES
    out: list[tuple[str, int]] = []
    if started is not None:
        out.append((TOTAL, stable - started))
        if assigned is not None:
            out.append((first, assigned - started))
    if assigned is not None:
        out.append((second, stable - assigned))
    return out
