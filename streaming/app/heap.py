"""The driver interpreter's garbage collector at a large mirror's scale.

The driver holds a few long-lived objects per group and partition -- the lag window's arrays
(`streaming.health.window`), each group's offsets and owners, the served summaries: ~1.6 M objects
the collector tracks at 100k groups x 10 partitions, ~16 per group.  None of them is ever part of a
reference cycle, yet CPython's full collection walks every one: measured in ``bench/pipeline.py``
(100k x 10, 500 commits/s and one 10k-group burst): three full collections in about a minute,
1.0-1.2 s of CPU each, during which the driver holds the GIL -- a micro-batch's hand-over to the served
store went from ~0.2 s to ~1 s whenever one fell inside it, and the HTTP API stalled as long.

So once the mirror is ready, what lives then moves to the permanent generation (``gc.freeze()``,
the interpreter's own tool for long-lived heaps), which collections do not walk; and every
`FREEZE_INTERVAL_S` the survivors since are collected and frozen too -- the lag tracker builds its
windows after ready, from the hand-over of the start's groups, so a freeze at ready alone left
0.96 M of them walked (measured: full collections still 0.7-1.0 s).  With the periodic freeze the
longest full collection in the same bench was 0.36 s, with ~190k objects left to walk.

Frozen objects are still freed by reference counting when they are dropped; only a reference
cycle among them waits -- so every `FULL_INTERVAL_S` the heap is unfrozen, collected in full (one
pause as long as before: once an hour, not every twenty seconds) and frozen again.  What waits is
bounded by that hour: in practice a micro-batch's py4j objects caught alive by a freeze (py4j
keeps their Java side while they live).

`stop` unfreezes: a process that embeds a mirror gets its collector back as it was.
"""

from __future__ import annotations

import gc
import logging
import time
from collections.abc import Callable
from typing import Final

from streaming.lifecycle import Worker

log = logging.getLogger("coordinator_mirror")

#: how often what survived since the last freeze is collected and frozen
FREEZE_INTERVAL_S: Final = 60.0
#: how often the whole heap is collected (any reference cycle among frozen objects freed)
FULL_INTERVAL_S: Final = 3600.0


class DriverHeap(Worker):
    """The ``mirror-heap`` thread, a `step` a second: nothing until ``ready()``; then a full
    collection and a freeze, survivors frozen every ``freeze_interval_s`` and the whole heap
    collected every ``full_interval_s``.  Process-wide, as the collector is: one per process,
    whatever it mirrors."""

    def __init__(
        self,
        ready: Callable[[], bool],
        *,
        freeze_interval_s: float = FREEZE_INTERVAL_S,
        full_interval_s: float = FULL_INTERVAL_S,
    ) -> None:
        super().__init__("mirror-heap", 1.0)
        self.ready = ready
        self.freeze_interval_s = freeze_interval_s
        self.full_interval_s = full_interval_s
        self._next_freeze: float | None = None
        self._next_full = 0.0
        #: the last step's pause, s, and what it did ("full" or "freeze")
        self.last: tuple[str, float] | None = None

    def step(self, now: float) -> str | None:
        """What this step did: "full", "freeze" or None (not ready, or not due)."""
        if not self.ready():
            return None
        if self._next_freeze is None or now >= self._next_full:
            kind = "full"
            self._next_full = now + self.full_interval_s
        elif now >= self._next_freeze:
            kind = "freeze"
        else:
            return None
        began = time.perf_counter()
        if kind == "full":
            gc.unfreeze()
        gc.collect()
        gc.freeze()
        pause = time.perf_counter() - began
        self._next_freeze = now + self.freeze_interval_s
        self.last = (kind, pause)
        log.debug(
            "driver heap: %s collection in %.3fs, %d objects frozen", kind, pause, gc.get_freeze_count()
        )
        return kind

    def work(self) -> None:
        self.step(time.monotonic())

    def on_stop(self) -> None:
        """The collector as it was: nothing frozen."""
        if self._next_freeze is not None:
            gc.unfreeze()
            self._next_freeze = None
