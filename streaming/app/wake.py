"""The expiry wake: a micro-batch when a group's expiry deadline is due and the query is idle.

The expiry rules run inside the stateful function, driven by Spark's processing-time timeouts
(`streaming.pipeline.adapter`): a group's timeout is its next deadline, and Spark fires it in the
first micro-batch after that.  Spark would run a micro-batch every trigger for that, data or not --
most of a quiet mirror's CPU (~0.7-0.85 core at 10k groups).  The query runs none without new data
instead (`streaming.pipeline.query.no_data_batches`), and this thread (``mirror-wake``) gives it one
when a deadline is due: the driver knows every group's next deadline (its summary's
``next_deadline_ms``, indexed by `streaming.serving.store.SnapshotStore.due_deadline`), and a file
with no rows in the query's side input (`streaming.pipeline.backfill.write_wake`) is new data.

* A deadline is *covered* once a micro-batch with a later timestamp ran: Spark fired the timeout
  in it (the sink reads each batch's timestamp).  The seed batch (batch 0 of a checkpoint the
  driver's backfill seeded) does not count: it sets the timeouts of deadlines already passed to
  fire in the next batch.
* A due deadline not covered wakes the query only when it is idle (its last trigger found no new
  data): a busy query's next batch covers it anyway, and a wake would only add a file.  So a
  timeout fires at most one trigger after its deadline, as it did with a batch every trigger.
* Each wake is a file the file source lists and logs; the files read by committed batches are
  removed (the source's log keeps a line per file: one per wake, which is one per deadline that
  came due on an idle cluster).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from streaming.lifecycle import Worker
from streaming.serving.status import MirrorStatus
from streaming.serving.store import SnapshotStore

if TYPE_CHECKING:
    from pyspark.sql.streaming import StreamingQuery

    from streaming.pipeline.query import MirrorQuery

log = logging.getLogger("coordinator_mirror")

#: the longest wait between two looks when nothing is due (a look is a heap peek: cheap)
IDLE_LOOK_S = 5.0
#: wakes are removed once a batch this much later than them was committed
KEEP_WAKES_MS = 10_000


class ExpiryWake(Worker):
    """The ``mirror-wake`` thread (see the module's docstring)."""

    def __init__(
        self,
        store: SnapshotStore,
        status: MirrorStatus,
        definition: Callable[[], MirrorQuery | None],
        running: Callable[[], StreamingQuery | None],
        trigger_s: float,
        *,
        clock_ms: Callable[[], int] = lambda: int(time.time() * 1000),
    ) -> None:
        super().__init__("mirror-wake", 0.0, first_wait=False)
        self.store = store
        self.status = status
        self.definition = definition
        self.running = running
        self.trigger_s = trigger_s
        self.clock_ms = clock_ms
        #: every deadline below this has fired (a batch with a later timestamp ran, or will: a wake)
        self.covered_ms = 0
        #: wakes written
        self.wakes = 0
        #: (batch id, timestamp) of the last two batches the sink completed
        self._batches: list[tuple[int, int]] = []
        self._look = threading.Event()

    def on_batch(self, batch_id: int, _rows: list[Any]) -> None:
        """The sink's hook (on Spark's stream thread): look again, a deadline may have moved."""
        self._look.set()

    def wake(self) -> None:
        self._look.set()

    def _pause(self, seconds: float) -> None:
        self._look.wait(max(0.0, seconds))
        self._look.clear()

    def work(self) -> bool | None:
        definition, q = self.definition(), self.running()
        if definition is None or not definition.wakes or q is None:
            self._pause(IDLE_LOOK_S)  # no query yet, or one made without the side input
            return None
        self._covered_by_batches()
        due = self.store.due_deadline(self.covered_ms)
        now = self.clock_ms()
        if due is None or due >= now:
            self._pause(IDLE_LOOK_S if due is None else min(IDLE_LOOK_S, (due - now + 1) / 1000))
            return None
        if not self.stopping and idle(q):
            definition.wake(now)
            self.wakes += 1
            self.covered_ms = now  # the batch it makes has a later timestamp: every due timeout fires
            log.debug("expiry wake: a deadline %d ms ago (%d wakes)", now - due, self.wakes)
            self._remove_read_wakes(definition)
        self._pause(self.trigger_s)
        return None

    def _covered_by_batches(self) -> None:
        last = self.status.last_batch
        if last.timestamp_ms is None or (self._batches and self._batches[-1][0] == last.batch_id):
            return
        self._batches = [*self._batches[-1:], (last.batch_id, last.timestamp_ms)]
        if last.batch_id >= 1:  # not the seed batch (see the module's docstring)
            self.covered_ms = max(self.covered_ms, last.timestamp_ms)

    def _remove_read_wakes(self, definition: MirrorQuery) -> None:
        """Wakes older than the batch before the last one: that batch has been committed (its
        successor ran), and it was planned after them."""
        if len(self._batches) < 2:
            return
        try:
            definition.remove_wakes(self._batches[0][1] - KEEP_WAKES_MS)
        except Exception:  # a file left behind costs a line in a listing, nothing more
            log.debug("removing read wakes failed", exc_info=True)


def idle(query: StreamingQuery) -> bool:
    """The query's last trigger found no new data (so no batch will come without a wake)."""
    try:
        return not query.status.get("isDataAvailable", False)
    except Exception:  # a query stopping under the call
        return False
