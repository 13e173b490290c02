"""Change events the driver makes itself (drift at start, reconciliation mismatches, consumer
health from the offsets thread), written through the sink of the query's latest start.  Events
made before the first sink exists (the start-up drift checks) wait for it."""

from __future__ import annotations

import threading
from typing import Any

from streaming.pipeline.sinks import DRIVER_EVENTS, MirrorSink


class DriverEvents:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._sink: MirrorSink | None = None
        self._pending: list[tuple[list[dict[str, Any]], int, str]] = []

    def attach(self, sink: MirrorSink) -> None:
        """The query's new sink (`streaming.pipeline.query.MirrorQuery.on_sink`); the events
        waiting for one are written now."""
        with self._lock:
            self._sink = sink
            pending, self._pending = self._pending, []
        for events, at_ms, name in pending:
            sink.write_driver_events(events, at_ms, name)

    def write(
        self, events: list[dict[str, Any]], at_ms: int, name: str = DRIVER_EVENTS, *, wait: bool = False
    ) -> None:
        """Write ``events`` to the output ``name`` now; without a sink yet, keep them for the first
        one (``wait``) or drop them (they are counted and logged where they are made)."""
        with self._lock:
            sink = self._sink
            if sink is None:
                if wait:
                    self._pending.append((list(events), at_ms, name))
                return
        sink.write_driver_events(events, at_ms, name)
