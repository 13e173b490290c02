"""Following the streaming query's progress: positions (readiness) and batch statistics (the run
status), on a thread of its own.  The decode counts the query observes are not taken from here:
the sink reads them with the batch's rows (`streaming.pipeline.sinks.MirrorSink.observed_counts`),
so a batch the query committed but never made progress for still counts.

Polls ``query.lastProgress`` / ``recentProgress`` instead of registering a Python
StreamingQueryListener.  The reason first given -- a listener added after another was removed
from the same session receives no events -- did not reproduce in a minimal add/remove/add check
on PySpark 4.0.0 or 4.2.0; polling stays as the design.  A query the supervisor replaced (failed,
restarted from the checkpoint) is read to its end first: the batches it completed since the last
poll belong in the history and readiness.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

from streaming.lifecycle import Worker
from streaming.serving.run_status import RunStatus
from streaming.serving.status import MirrorStatus
from streaming.settings import Settings

if TYPE_CHECKING:
    from pyspark.sql.streaming import StreamingQuery

log = logging.getLogger("coordinator_mirror")

#: more than Spark's buffer of recent progress (spark.sql.streaming.numRecentProgressUpdates, 100)
PROGRESS_KEYS_KEPT: Final = 1000


def partition_offsets(raw: Any, topic: str) -> dict[int, int]:
    """Spark's KafkaSourceOffset JSON ``{"topic": {"0": 12, ...}}`` -> {partition: offset}."""
    if not raw:
        return {}
    try:
        data = json.loads(raw) if isinstance(raw, str) else raw
    except (TypeError, ValueError):
        return {}
    if not isinstance(data, dict) or topic not in data:
        return {}
    return {int(p): int(o) for p, o in data[topic].items()}


def batch_entry(progress: Any) -> dict[str, Any]:
    """One batch of the run status's progress history."""
    return {
        "batch_id": progress.batchId,
        "input_rows": int(progress.numInputRows),
        "duration_ms": dict(progress.durationMs),
        "timestamp": progress.timestamp,
        "state_rows": [int(op.numRowsTotal) for op in progress.stateOperators],
        "state_bytes": [int(op.memoryUsedBytes) for op in progress.stateOperators],
    }


class ProgressFollower(Worker):
    """The ``mirror-progress`` thread: follows whichever query the mirror runs now (none yet: it
    waits); stopped after the query, whose last batches' progress the query's stop takes (`take`)."""

    def __init__(
        self,
        settings: Settings,
        status: MirrorStatus,
        run: RunStatus,
        current_query: Callable[[], StreamingQuery | None],
        stopping: Callable[[], bool] = lambda: False,
    ) -> None:
        super().__init__("mirror-progress", 0.2)
        self.settings = settings
        self.status = status
        self.run = run
        self.current_query = current_query
        #: the mirror is stopping: after its stop line the log says nothing more (a first batch
        #: drained by the stop is not announced)
        self.mirror_stopping = stopping
        #: keys of the progress entries taken, oldest first (`take`)
        self._taken: dict[tuple[str, int, str], None] = {}
        self._lock = threading.Lock()
        self._following: StreamingQuery | None = None

    def work(self) -> None:
        """Every new progress of the query running now -- and of the one it replaced, read to its
        end first.  A failure (py4j hiccups while the JVM stops) is logged by `Worker.on_error`
        -- the first, then every 100th -- and the next poll goes on."""
        q = self.current_query()
        following = self._following
        if following is not None and following is not q:
            self.take(following)
        self._following = q
        if q is not None:
            self.take(q)

    def on_error(self, exc: Exception) -> None:
        self.errors += 1
        if self.errors % 100 == 1:  # not once per poll
            log.warning("reading the query's progress failed (%d time(s))", self.errors, exc_info=exc)

    def take(self, q: StreamingQuery) -> None:
        """Every progress of ``q`` not taken yet, oldest first.

        Progress entries are told apart by (run id, batch id, trigger start), not by batch id
        alone: a trigger that ran no batch (no source had new data -- e.g. the first trigger after
        a restart, before the tick source's first row) reports the *next* batch's id with no
        observed metrics, and the batch that then runs under that id must still be taken.

        Only the new tail of Spark's buffer (up to 100 entries) crosses py4j: PySpark's
        ``recentProgress`` converts all of them, each a JSON of every partition's offsets and the
        state store's metrics -- with a micro-batch every half second that was a sizeable share of
        the driver's CPU (py-spy: ~20% of a core under 500 commits/s)."""
        from pyspark.sql.streaming.listener import StreamingQueryProgress

        with self._lock:
            buffer = q._jsq.recentProgress()
            fresh: list[tuple[tuple[str, int, str], Any]] = []
            for i in range(len(buffer) - 1, -1, -1):  # newest first, down to the first one taken
                jp = buffer[i]
                key = (str(jp.runId().toString()), int(jp.batchId()), str(jp.timestamp()))
                if key in self._taken:
                    break
                fresh.append((key, jp))
            for key, jp in reversed(fresh):
                self.on_progress(StreamingQueryProgress.fromJson(json.loads(jp.json())))
                self._taken[key] = None
            while len(self._taken) > PROGRESS_KEYS_KEPT:
                del self._taken[next(iter(self._taken))]

    def on_progress(self, progress: Any) -> None:
        topic = self.settings.topic
        src = next((x for x in progress.sources if topic in str(x.endOffset or "")), None)
        positions = partition_offsets(src.endOffset if src else None, topic)
        latest = partition_offsets(getattr(src, "latestOffset", None) if src else None, topic)
        if positions:
            self.status.advance(positions, latest)
        elif self.settings.source == "capture" and self.status.last_batch.batch_id >= 0:
            files = [x for x in progress.sources if "FileStreamSource" in str(x.description)]
            if files and all(int(x.numInputRows) == 0 for x in files):
                self.status.mark_ready()  # a replayed capture has been read completely
        if "addBatch" not in progress.durationMs:
            return  # a trigger that ran no batch: not a batch of the history (nor of its metrics)
        entry = batch_entry(progress)
        if entry["batch_id"] == 0 and not self.mirror_stopping():  # a new checkpoint's first batch
            phases = ", ".join(
                f"{k} {v / 1000:.1f}s" for k, v in sorted(entry["duration_ms"].items()) if v >= 100
            )
            log.info(
                "the first micro-batch: %d input rows, %d groups in the state store (%s)",
                entry["input_rows"],
                sum(entry["state_rows"]),
                phases,
            )
        self.run.add_batch(entry)
