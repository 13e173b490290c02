"""The group timeline (issue 26): per group, its newest change events -- state transitions,
rebalances and their timings, members joining and leaving, assignment changes, consumer-status
changes, offsets expiring or deleted -- for ``GET /groups/{id}/timeline``, newest first.

Fed by the sink with the events the mirror already makes (`state.events`, and the driver's own:
consumer health, reconciliation), bounded per group (setting ``timeline_events_per_group``) and
kept on the driver only: a restart starts every timeline empty (the events files and the events
topic keep the whole history).  ``offsets_committed`` is left out: one per micro-batch and group,
it would push everything else out (the commit rhythm has its own metrics).

Memory: one bytes object per group -- its events as newline-separated compact JSON without the
group id (which is the key), zlib-compressed once the group holds more than a few: event texts of
one group repeat field names, member ids and client ids, so they compress several times.  Deleted
groups keep their timeline (it ends with why) for the `RETIRED_KEPT` most recently deleted.
Sizes measured by bench/driver_memory.py (docs/insights.md).
"""

from __future__ import annotations

import json
import threading
import zlib
from collections import OrderedDict
from collections.abc import Iterable
from typing import Any, Final

#: event types not kept (aggregates made once per micro-batch and group)
SKIPPED: Final = frozenset({"offsets_committed"})
#: deleted groups whose timeline is kept (oldest dropped first)
RETIRED_KEPT: Final = 10_000
#: a group's events are stored compressed from this many bytes on
COMPRESS_FROM: Final = 512
_Z: Final = b"\x01"  # first byte of a compressed blob (plain JSON lines start with "{")


def _lines(blob: bytes) -> list[bytes]:
    if not blob:
        return []
    raw = zlib.decompress(blob[1:]) if blob[:1] == _Z else blob
    return raw.split(b"\n")


def _blob(lines: list[bytes]) -> bytes:
    raw = b"\n".join(lines)
    return _Z + zlib.compress(raw, 6) if len(raw) >= COMPRESS_FROM else raw


class Timeline:
    """Group id -> its newest ``limit`` events (oldest first inside), thread-safe."""

    def __init__(self, limit: int = 50) -> None:
        self.limit = limit
        self._lock = threading.Lock()
        self._groups: dict[str, bytes] = {}
        self._retired: OrderedDict[str, bytes] = OrderedDict()

    def add(self, events: Iterable[dict[str, Any]]) -> None:
        """Events (JSON objects with ``group_id`` and ``type``) in the order they happened."""
        if self.limit <= 0:
            return
        by_group: dict[str, list[bytes]] = {}
        for e in events:
            if e.get("type") in SKIPPED:
                continue
            gid = e.get("group_id")
            if not isinstance(gid, str) or not gid:
                continue  # mirror-wide events (drift) belong to no group
            body = {k: v for k, v in e.items() if k != "group_id"}
            by_group.setdefault(gid, []).append(
                json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode()
            )
        if not by_group:
            return
        with self._lock:
            for gid, new in by_group.items():
                blob = self._groups.get(gid)
                if blob is None:
                    blob = self._retired.pop(gid, b"")  # a deleted group's id in use again
                lines = (_lines(blob) + new)[-self.limit :]
                self._groups[gid] = _blob(lines)

    def add_json(self, texts: Iterable[str]) -> None:
        """Events as the sink has them (JSON text)."""
        self.add(json.loads(t) for t in texts)

    def retire(self, group_ids: Iterable[str]) -> None:
        """Groups deleted: their timeline is kept among the most recently deleted."""
        with self._lock:
            for gid in group_ids:
                blob = self._groups.pop(gid, None)
                if blob is None:
                    continue
                self._retired[gid] = blob
                self._retired.move_to_end(gid)
            while len(self._retired) > RETIRED_KEPT:
                self._retired.popitem(last=False)

    def events(self, group_id: str, limit: int | None = None) -> list[dict[str, Any]] | None:
        """The group's events newest first (None: no timeline for this id)."""
        with self._lock:
            blob = self._groups.get(group_id)
            if blob is None:
                blob = self._retired.get(group_id)
        if blob is None:
            return None
        out = [json.loads(line) for line in reversed(_lines(blob))]
        return out if limit is None else out[:limit]

    def __len__(self) -> int:
        with self._lock:
            return len(self._groups)

    def stored_bytes(self) -> int:
        """The events' stored bytes (compressed where they are), all groups."""
        with self._lock:
            return sum(map(len, self._groups.values())) + sum(map(len, self._retired.values()))
