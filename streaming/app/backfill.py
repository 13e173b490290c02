"""``backfill: driver``: a new checkpoint's backfill folded on the driver while Spark starts.

`streaming.pipeline.backfill` says what is folded and how the query takes it over; this module
runs it: `DriverBackfill.start` (before Spark's session, on a checkpoint with no micro-batch yet)
reads and folds in a thread of its own, and `DriverBackfill.hand_over` (at the query's first
start) applies the result through the sink, writes the seed and tells the query where the
driver's read ended.  Anything that goes wrong on the way is logged and the query folds the
backfill itself, as with ``backfill: query``: the driver's fold only ever saves time.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import logging
import time
from typing import TYPE_CHECKING, Any

from streaming.cluster.jvm import Jvm
from streaming.cluster.topic_read import TopicMissingError, TopicRead, read_topic
from streaming.lifecycle import Worker
from streaming.pipeline.backfill import Backfill, fold_backfill, local_path, reset_new_checkpoint, write_seed
from streaming.pipeline.prepare import GroupFilter
from streaming.pipeline.query import MirrorQuery
from streaming.settings import Settings

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger("coordinator_mirror")

#: the read gives up when no partition moved for this long (the query then folds the backfill)
READ_STALL_S = 120.0


def local_checkpoint_is_new(checkpoint: str) -> bool | None:
    """Whether a local checkpoint has no micro-batch yet (no ``offsets/<n>`` file); None for a
    checkpoint on another file system (known only once Spark's Hadoop file system is up)."""
    local = local_path(checkpoint)
    if local is None:
        return None
    folder = local / "offsets"
    return not folder.is_dir() or not any(p.name.isdigit() for p in folder.iterdir())


def release_freed_memory() -> None:
    """Give the memory the fold freed back to the system: glibc's allocator keeps freed heap
    pages resident until asked (``malloc_trim``); the fold's records, packed cells and rows were
    ~70-100 MB of them at 1 M records.  A no-op where there is no glibc."""
    gc.collect()
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6").malloc_trim(0)


class DriverBackfill(Worker):
    """The driver's read and fold of a new checkpoint's backfill: once, on the ``mirror-backfill``
    thread (`start`; `hand_over` waits for it), or here and now (`run`)."""

    join_timeout_s = 30.0

    def __init__(self, settings: Settings, jvm: Jvm, now_ms: Any) -> None:
        super().__init__("mirror-backfill", 0.0, first_wait=False)
        self.settings = settings
        self.jvm = jvm
        self.now_ms = now_ms
        self.read = TopicRead()
        self.result: Backfill | None = None
        self.error: BaseException | None = None

    def work(self) -> bool:
        self.run()
        return False  # once

    @property
    def topic_was_missing(self) -> bool:
        """The read found no topic (a new cluster): worth running again once the topic exists."""
        return isinstance(self.error, TopicMissingError)

    def run(self) -> None:
        """Read and fold here and now (the result or the error kept for `hand_over`)."""
        self.result = self.error = None
        self.read = TopicRead()
        s = self.settings
        started = time.monotonic()
        conf = {
            # a poll's records per partition fetch: Kafka's default 500 records per poll is ~100x
            # more calls for a backfill; overridable through kafka_options
            "max.poll.records": "50000",
            **s.kafka_options,
            "bootstrap.servers": s.bootstrap_servers or "",
            "isolation.level": "read_committed",
        }
        try:
            batches = read_topic(
                self.jvm, conf, s.topic, self.read, timeout_s=READ_STALL_S, stop=self.stop_event
            )
            self.result = fold_backfill(
                batches,
                s.offset_config(),
                GroupFilter(*s.group_filter),
                emit_offsets=bool(s.offsets_topic),
                now_ms=self.now_ms(),
                records_per_fold=s.max_offsets_per_trigger,
            )
            self.jvm.release_memory()  # the read is over: its fetch buffers go back to the system
            r = self.result
            log.info(
                "backfill folded on the driver: %d records, %d groups in %.1fs "
                "(read and decode %.1fs, fold %.1fs)",
                self.read.records,
                r.groups,
                time.monotonic() - started,
                r.read_s,
                r.fold_s,
            )
        except BaseException as exc:  # the query folds the backfill instead (hand_over)
            self.error = exc

    def wake(self) -> None:
        """`stop`: the read stops between two polls, and a call waiting on a broker that does not
        answer ends now (a mirror stopped during its start: its client JVM is closed after the
        stop, never under a running call)."""
        self.read.wake()

    def hand_over(self, spark: SparkSession, query: MirrorQuery) -> bool:
        """Wait for the fold, then apply it through a sink and write the seed; True when the query
        is to start from the seed, False when the query folds the backfill itself."""
        s = self.settings
        reset_new_checkpoint(spark, s.checkpoint_location)  # of a start stopped before its query ran
        if self.started:
            began = time.monotonic()
            self.join()  # it ends: read_topic gives up after READ_STALL_S without progress
            log.info("the query's start waited %.1fs for the driver's fold", time.monotonic() - began)
        result = self.result
        if self.error is not None or result is None:
            log.warning(
                "the driver's backfill failed (%s): the query folds the backfill",
                str(self.error).splitlines()[0][:300] if self.error else "no result",
            )
            return False
        try:
            write_seed(spark, s.checkpoint_location, result.seeds)
            query.apply_backfill(result)
        except Exception as exc:
            reset_new_checkpoint(spark, s.checkpoint_location)
            log.warning("handing the driver's backfill over failed (%s): the query folds the backfill", exc)
            return False
        query.seed_ends = dict(self.read.ends)
        self.result = None  # the rows and seed cells are handed over: not kept
        del result
        release_freed_memory()
        return True
