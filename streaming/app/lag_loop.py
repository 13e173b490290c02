"""The lag loop: the ``mirror-offsets`` thread.  Every ``lag_interval_s`` one round of log offsets
(`streaming.cluster.offsets.OffsetReader`) into the lag tracker, then one Burrow evaluation whose
status changes become change events (counted in coordinator_mirror_events_total).

The groups the sink changed reach the tracker through `LagLoop.on_batch` (the sink's hook): their
state bytes are only parked there (the newest per group wins) and decoded by this thread before
its next round -- off the batch's path, and once per round however many batches changed a group
in between.  Without a running thread (lag off, a capture source, or before `start`) they are
applied at once.
"""

from __future__ import annotations

import itertools
import json
import logging
import threading
import time
from collections.abc import Iterable
from typing import Any, Protocol

from state import codec
from state.model import Group
from streaming.app.driver_events import DriverEvents
from streaming.health.lag import LagTracker, LogOffsets
from streaming.lifecycle import Worker
from streaming.pipeline.sinks import HEALTH_EVENTS
from streaming.serving.burrow import Burrow
from streaming.serving.status import MirrorStatus

log = logging.getLogger("coordinator_mirror")

#: groups decoded and applied at a time (`LagLoop.apply`)
APPLY_CHUNK = 250


class OffsetRounds(Protocol):
    """One round of log offsets (`streaming.cluster.offsets.OffsetReader`)."""

    def read(self, wanted: Iterable[tuple[str, int]], subscribed: Iterable[str] = ()) -> LogOffsets: ...


class LagLoop(Worker):
    """The ``mirror-offsets`` thread: a round every ``interval_s`` (from the start of the last)."""

    def __init__(
        self,
        interval_s: float,
        status: MirrorStatus,
        tracker: LagTracker,
        burrow: Burrow,
        *,
        reader: OffsetRounds | None,
        events: DriverEvents,
    ) -> None:
        super().__init__("mirror-offsets", interval_s, paced=True, first_wait=False)
        self.status = status
        self.tracker = tracker
        self.burrow = burrow
        self.reader = reader
        self.events = events
        self._lock = threading.Lock()
        #: groups changed since the thread's last round (`on_batch`)
        self._pending: dict[str, bytes | None] = {}

    def start(self) -> None:
        """The thread (once; the sink of every query the supervisor starts feeds it) -- none
        without a reader (lag off, a capture source)."""
        if self.reader is not None:
            super().start()

    def on_stop(self) -> None:
        self.reader = None  # the cluster client it reads through closes after this

    def apply(self, groups: Iterable[tuple[str, Any]]) -> None:
        """Groups as applied to the store (state bytes, a rendered snapshot, or None: deleted) into
        the lag tracker and Burrow's window of commits, `APPLY_CHUNK` groups at a time: a backfill
        hands over every group at once, and decoding them all before applying any held each
        group's whole decoded state at the same time (10k groups x 50 partitions: the driver's
        RSS +346 MB at once against +239 MB in chunks of 250, which is what the tracker and the
        window keep -- and 27% less CPU; `bench/lag_apply.py`)."""
        it = iter(groups)
        while chunk := list(itertools.islice(it, APPLY_CHUNK)):
            changed: list[tuple[str, Group | None]] = []
            for gid, blob in chunk:
                if blob is None:
                    changed.append((gid, None))
                elif isinstance(blob, bytes | bytearray):
                    changed.append((gid, codec.decode(bytes(blob))))
            views = self.tracker.apply_groups(changed)
            self.burrow.history.record(views, self.tracker)

    def on_batch(self, batch_id: int, rows: list[Any]) -> None:
        """The sink's hook: the changed groups' state bytes, parked for the thread (or applied)."""
        changed: dict[str, bytes | None] = {}
        for r in rows:
            if r.kind == "snapshot":
                live = json.loads(r.summary).get("exists", True)
                changed[r.group_id] = bytes(r.blob) if live else None
            elif r.kind == "deleted":
                changed[r.group_id] = None
        if self.reader is None and not self.alive():  # no thread will take them: now
            self.apply(changed.items())
            return
        # parked for the thread -- also before it starts: the driver's backfill (batch -1) comes
        # before the lag loop's start, and applying its 10k groups here held up the query's start
        with self._lock:
            self._pending.update(changed)

    def _drain(self) -> None:
        with self._lock:
            pending, self._pending = self._pending, {}
        if pending:
            self.apply(pending.items())

    def round(self) -> None:
        """One round: the parked groups, the log offsets, one paced evaluation, its events."""
        reader = self.reader
        assert reader is not None
        self._drain()
        r = reader.read(self.tracker.wanted(), self.tracker.subscribed())
        self.tracker.apply_round(r)
        now_ms = int(time.time() * 1000)
        # paced: at most a third of a core, so that a round over thousands of changed groups does
        # not halve the CPU of the micro-batches running meanwhile (on 2 cores a 2.5 s evaluation
        # made them 2-3x slower for as long: the latency p99)
        events = self.burrow.evaluate_all(now_ms, pause=lambda busy: self.sleep(2 * busy))
        if events:
            tallies: dict[tuple[str, ...], int] = {}
            for e in events:
                tallies[("event", e["type"])] = tallies.get(("event", e["type"]), 0) + 1
                log.info("consumer health: %s", json.dumps(e))
            self.status.add_tallies(tallies)
            try:
                self.events.write(events, now_ms, HEALTH_EVENTS)
            except Exception:  # the events stay in the log and in Burrow's paths; the next round goes on
                log.warning("%d consumer-health event(s) not written", len(events), exc_info=True)

    def work(self) -> None:
        self.round()

    def on_error(self, exc: Exception) -> None:
        """A failed round is counted and retried at the next interval, never fatal."""
        self.tracker.failed_rounds += 1
        log.warning("log offsets round failed", exc_info=exc)
