"""Records lost to retention: a committed offset below its partition's log start offset means the
broker deleted records the group had not read yet -- counted per group and partition, exactly,
from the rounds of log offsets the lag tracker applies; and the margin before it happens.

* **Lost** (`RetentionWatch.on_round`, a listener of `LagTracker.apply_round`): when a group's
  committed offset ``c`` is below the round's log start offset ``s``, the records ``[c, s)`` are
  gone before the group read them.  Each position is counted once per group and partition: the
  watch remembers how far it counted (``counted_to``), so a log start that moves on while the
  group stays stopped adds only the newly deleted records, and a group that resumes (its offset
  reset to the log start or later) adds nothing.  The counts only grow; a group's counts leave with
  the group.  They survive a restart through `RetentionWatch.to_json` / `load` (the offset
  history's files, `streaming.serving.offset_history`): otherwise the same loss would be counted
  again after every start.
* **Margin** (`margin`): how far the committed offset is from the log start -- in records, and in
  seconds at the current rates: the log start advances at the produce rate in a steady state
  (time- or size-based retention deletes what was appended that long ago), the committed offset at
  the consume rate, so the gap closes at ``produce - consume`` records/s; null when it is not
  closing.  A group without a measured consume rate (a single commit in its window) is taken not
  to move: the margin is then the worst case.  The log start really moves in whole segments, so it
  jumps: the seconds are when the gap closes on average, not the next segment deletion.

What it cannot know: records deleted between two rounds of a group's partition that the group
committed past in between (it never lost them); the retention settings themselves (it reads their
effect, the log start offset); a partition whose log start the round did not read (no figure).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from streaming.health.lag import LagTracker, LogOffsets

#: the change event a new loss makes (`RetentionWatch.on_round`)
RECORDS_LOST: Final = "records_lost"

Key = tuple[str, str, int]  # group id, topic, partition


@dataclass(frozen=True)
class Margin:
    """How far a committed offset is from the log start offset."""

    #: committed - log start (0 once records are lost)
    records: int
    #: seconds until the log start reaches the committed offset at today's rates, None: not closing
    seconds: float | None

    def to_json(self) -> dict[str, Any]:
        return {"records": self.records, "seconds": self.seconds}


def margin(committed: int, log_start: int, consume: float | None, produce: float | None) -> Margin:
    """The margin before retention deletes unread records of a partition (see the module doc)."""
    gap = max(0, committed - log_start)
    consume = 0.0 if consume is None else consume  # no measured rate (one commit): not moving
    if gap == 0 or produce is None or produce <= consume:
        return Margin(gap, 0.0 if gap == 0 else None)
    return Margin(gap, gap / (produce - consume))


class RetentionWatch:
    """Counts the records each group lost to retention, per partition (see the module doc).

    ``emit``: told the change events of each round that found a new loss (the mirror writes them
    where its other driver events go).  One writer (the thread applying rounds), any number of
    readers (metrics, HTTP): one lock."""

    def __init__(self, tracker: LagTracker) -> None:
        self.tracker = tracker
        self._lock = threading.Lock()
        #: (group, topic, partition) -> records lost so far
        self.lost: dict[Key, int] = {}
        #: (group, topic, partition) -> the log start offset counted up to
        self.counted_to: dict[Key, int] = {}
        self.emit: Callable[[list[dict[str, Any]], int], object] | None = None
        #: bumped by every change of the counts: renderers cache on it
        self.version = 0
        #: what the last round looked at: the log starts, the topic names, each group's view
        self._starts: dict[tuple[str, int], int] = {}
        self._names: dict[str, str] = {}
        self._views: dict[str, object] = {}
        tracker.listeners.append(self.on_round)

    def on_round(self, r: LogOffsets) -> list[dict[str, Any]]:
        """A round of log offsets: new losses counted, their events returned (and emitted).

        A group is looked at again only when its view (committed offsets) changed, or when a log
        start or a topic name changed: with both the same as last round, every one of its keys
        was either not behind the log start or counted up to it then, so it has nothing new -- a
        quiet cluster's round walks no group's offsets."""
        starts = {tp: e.earliest for tp, e in r.partitions.items() if e.earliest}
        events: list[dict[str, Any]] = []
        tracker = self.tracker
        name_of = tracker.name_of
        groups = tracker.items()
        names = dict(tracker.topic_names)
        everything = starts != self._starts or names != self._names
        seen = self._views
        todo = groups if everything else [(gid, v) for gid, v in groups if seen.get(gid) is not v]
        self._starts, self._names = starts, names
        self._views = {gid: view for gid, view in groups}
        with self._lock:
            for gid, view in todo:
                for (t, p), (committed, _) in view.offsets.items():
                    topic = name_of(t)
                    start = starts.get((topic, p))
                    if start is None or committed >= start:
                        continue
                    key = (gid, topic, p)
                    counted = self.counted_to.get(key, committed)
                    since = max(committed, counted)
                    if start <= since:
                        continue
                    n = start - since
                    total = self.lost.get(key, 0) + n
                    self.lost[key] = total
                    self.counted_to[key] = start
                    events.append(
                        {
                            "type": RECORDS_LOST,
                            "group_id": gid,
                            "timestamp_ms": r.sampled_at_ms,
                            "topic": topic,
                            "partition": p,
                            "committed_offset": committed,
                            "log_start_offset": start,
                            "records": n,
                            "records_total": total,
                        }
                    )
            live = {gid for gid, _ in groups}
            gone = [k for k in self.counted_to if k[0] not in live]
            for k in gone:
                self.counted_to.pop(k, None)
                self.lost.pop(k, None)
            if events or gone:
                self.version += 1
        if events and self.emit is not None:
            self.emit(events, r.sampled_at_ms)
        return events

    def lost_of(self, group_id: str) -> dict[tuple[str, int], int]:
        """The group's lost records per (topic, partition): only partitions that lost some."""
        with self._lock:
            return {(t, p): n for (g, t, p), n in self.lost.items() if g == group_id}

    def totals(self) -> list[tuple[Key, int]]:
        with self._lock:
            return sorted(self.lost.items())

    # -- persistence (the offset history's files) ------------------------------------------------
    def to_json(self) -> list[list[Any]]:
        with self._lock:
            return [[g, t, p, self.lost.get((g, t, p), 0), c] for (g, t, p), c in self.counted_to.items()]

    def load(self, rows: list[list[Any]]) -> None:
        with self._lock:
            for g, t, p, lost, counted in rows:
                key = (str(g), str(t), int(p))
                self.counted_to[key] = int(counted)
                if lost:
                    self.lost[key] = int(lost)
            self.version += 1
