"""The driver interpreter's garbage collector at a large mirror's scale.

The driver holds a few long-lived objects per group and partition -- the lag window's arrays
(`streaming.health.window`), each group's offsets and owners, the served summaries: ~1.6 M objects
the collector tracks at 100k groups x 10 partitions, ~16 per group.  None of them is ever part of a
reference cycle, yet CPython's full collection walks every one: measured in ``bench/pipeline.py``
(100k x 10, 500 commits/s and one 10k-group burst), three full collections in about a minute,
1.0-1.2 s of CPU each, during which the driver holds the GIL -- a micro-batch's hand-over to the
served store went from ~0.2 s to ~1 s whenever one fell inside it, and the HTTP API stalled as long.

So once the mirror is ready, what lives then -- the state the start built -- moves to the
permanent generation (``gc.freeze()``, the interpreter's own tool for long-lived heaps), which
collections do not walk.  Frozen objects are still freed by reference counting when they are
dropped; only a reference cycle among them waits -- so every `INTERVAL_S` the heap is unfrozen,
collected in full (one pause as long as before: once an hour, not every twenty seconds) and frozen
again.  Freezing is kept to those moments on purpose: what is alive at a freeze and becomes cyclic
garbage soon after (a micro-batch's py4j objects, whose Java side py4j keeps while they live)
waits for the next full collection.

`stop` unfreezes: a process that embeds a mirror gets its collector back as it was.
"""

from __future__ import annotations

import gc
import logging
import time
from collections.abc import Callable
from typing import Final

log = logging.getLogger("coordinator_mirror")

#: how often the whole heap is collected and frozen again
INTERVAL_S: Final = 3600.0


class DriverHeap:
    """`step` from a housekeeping loop: nothing until ``ready()``; then a full collection and a
    freeze, and again every ``interval_s``."""

    def __init__(self, ready: Callable[[], bool], *, interval_s: float = INTERVAL_S) -> None:
        self.ready = ready
        self.interval_s = interval_s
        self._next: float | None = None
        #: the last collection's pause, s
        self.last_pause_s: float | None = None

    def step(self, now: float) -> bool:
        """Whether this step collected and froze (False: not ready, or not due)."""
        if not self.ready() or (self._next is not None and now < self._next):
            return False
        began = time.perf_counter()
        gc.unfreeze()
        gc.collect()
        gc.freeze()
        self.last_pause_s = time.perf_counter() - began
        self._next = now + self.interval_s
        log.debug(
            "driver heap: full collection in %.3fs, %d objects frozen",
            self.last_pause_s,
            gc.get_freeze_count(),
        )
        return True

    def stop(self) -> None:
        """The collector as it was: nothing frozen."""
        if self._next is not None:
            gc.unfreeze()
            self._next = None
