"""The preview: the driver follows ``__consumer_offsets`` and folds each new record into the served
state before the micro-batch that reads it.

Why: a commit becomes visible when the micro-batch holding it ends, and a micro-batch pays
``applyInPandasWithState``'s per-group cost for every group it touches -- ~1 s at 500 commits/s
over 10k groups on 2 cores, a whole minute for the seed batch of a 100k-group backfill, ~10 s for
the first batch of a cold JVM (docs/performance.md).  The driver already holds every group's state
bytes (`streaming.serving.store.SnapshotStore`), and the query's group function runs on the driver
too (the driver's backfill: `streaming.pipeline.backfill`).  So a thread here reads the topic with
Kafka's consumer in the client JVM from where the served states end (`SnapshotStore.covered`),
decodes with the query's own decode step and folds each group's new records onto its served state
with the query's own group function -- the state the micro-batch will make, ~0.1 s after the
record is written.

What stays the query's: the state in Spark's state store (the checkpoint), the expiry timeouts,
the change events and timeline, the offsets feed, lag and Burrow -- all of which follow with the
micro-batch.  When the batch ends, its state for a group replaces the preview's unless the preview
has folded records the batch has not read (`SnapshotStore.apply`): the two are one fold of one
sequence of records, the batch's at most a few records behind.

A group is never folded twice over a record: the store takes a preview only for records past both
what the states it holds have read and what the preview folded before, under one lock with the
batches' apply (`SnapshotStore.preview`).  A group whose fold fails here, or that is quarantined,
is left to its micro-batch (which reports it).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import tempfile
from collections.abc import Callable
from typing import Any, Final

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from state.codec import blob_version
from streaming.cluster.jvm import TOPIC_DUMP, Jvm, Remote
from streaming.cluster.topic_read import parse_columns
from streaming.lifecycle import Worker
from streaming.pipeline.adapter import fold_cells, group_columns
from streaming.pipeline.backfill import DriverGroupState
from streaming.pipeline.prepare import GroupFilter, make_decode_collapse_pack
from streaming.serving.store import SnapshotStore
from streaming.settings import Settings

log = logging.getLogger("coordinator_mirror")

#: a poll waits this long for a record (it returns as soon as one comes)
POLL_MS: Final = 500
#: records per poll at most (a burst is folded in steps of this many)
RECORDS_PER_POLL: Final = 20_000


class Preview(Worker):
    """The ``mirror-preview`` thread of one cluster (setting ``preview``)."""

    join_timeout_s = 10.0

    def __init__(
        self, settings: Settings, jvm: Callable[[], Jvm], store: SnapshotStore, now_ms: Callable[[], int]
    ) -> None:
        super().__init__("mirror-preview", 0.0, first_wait=False)
        self.settings = settings
        self.jvm = jvm
        self.store = store
        self.now_ms = now_ms
        self.config = settings.offset_config()
        self.decode = make_decode_collapse_pack(GroupFilter(*settings.group_filter))
        self._remote: Remote | None = None
        self._folder: str | None = None
        #: the next offset to read per partition
        self.positions: dict[int, int] = {}
        #: records read (the store counts the groups folded and left: ``preview_counts``)
        self.records = 0

    # -- the thread ------------------------------------------------------------------------
    def work(self) -> bool | None:
        if self._remote is None:
            covered = self.store.covered()
            if covered is None:  # not known yet: the backfill's hand-over, a recovery, a first batch
                self.sleep(0.1)
                return None
            self._open({p: max(at, self.positions.get(p, 0)) for p, at in covered.items()})
        self.step()
        return None

    def on_error(self, exc: Exception) -> None:
        """A failed poll (a cluster that does not answer the consumer's start, a client JVM
        going away): one line in the log (the first, then every 100th), and the consumer is
        opened again from where this thread read to (the states' position if further) after a
        pause; meanwhile the micro-batches serve every change as without the preview."""
        self.errors += 1
        if self.errors % 100 == 1:
            text = str(exc).strip().splitlines()
            log.warning(
                "%s: the preview paused (%d time(s)), the micro-batches go on: %s",
                self.thread_name,
                self.errors,
                text[0][:300] if text else type(exc).__name__,
            )
        self._close()
        self.sleep(2.0)

    def wake(self) -> None:
        remote = self._remote
        if remote is not None:
            with contextlib.suppress(Exception):  # the poll may have ended meanwhile
                remote.call("wakeup")

    def on_stop(self) -> None:
        self._close()

    # -- the consumer ----------------------------------------------------------------------
    def _open(self, positions: dict[int, int]) -> None:
        s = self.settings
        conf = {
            **s.kafka_options,
            "bootstrap.servers": s.bootstrap_servers or "",
            "isolation.level": "read_committed",  # as the query's source reads
            "auto.offset.reset": "earliest",
        }
        jvm = self.jvm()
        remote = self._remote = jvm.open(TOPIC_DUMP, conf, 30.0)  # `wake` can end its calls now
        self._folder = tempfile.mkdtemp(prefix="cm-preview-")  # 0700: the records stay this user's
        try:
            if self.stopping:
                raise InterruptedError("stopped")
            flat = jvm.gateway.new_array(jvm.gateway.jvm.long, 2 * len(positions))
            for i, (p, at) in enumerate(sorted(positions.items())):
                flat[2 * i], flat[2 * i + 1] = p, at
            remote.call("follow", self.settings.topic, flat)
        except BaseException:
            self._close()
            raise
        self.positions = dict(positions)
        log.debug("preview: following %s from %d partition(s)", self.settings.topic, len(positions))

    def _close(self) -> None:
        remote, self._remote = self._remote, None
        if remote is not None:
            with contextlib.suppress(Exception):
                remote.close()
        folder, self._folder = self._folder, None
        if folder is not None:
            shutil.rmtree(folder, ignore_errors=True)

    # -- one poll --------------------------------------------------------------------------
    def step(self) -> int:
        """One poll's records folded into the served states; the groups folded."""
        assert self._remote is not None and self._folder is not None
        path = os.path.join(self._folder, "frame")
        self._remote.call("pollColumnsTo", POLL_MS, RECORDS_PER_POLL, path)
        with open(path, "rb") as f:
            moved, batch = parse_columns(f.read())
        for p, at in moved.items():
            self.positions[p] = max(self.positions.get(p, 0), at)
        if not batch.num_rows:
            return 0
        self.records += batch.num_rows
        batch = self._unread(batch)
        folded = self.fold(batch) if batch.num_rows else 0
        if folded:
            oldest = pc.min(batch.column("timestamp")).as_py()
            self.store.observe_preview_delay(max(0.0, (self.now_ms() - int(oldest)) / 1000))
        return folded

    def _unread(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        """The records past where the served states have read (a batch may have overtaken this
        thread: after a pause, or while it opened)."""
        covered = self.store.covered() or {}
        if not covered:
            return batch
        floor = np.full(max(covered) + 1, -1, np.int64)
        for p, at in covered.items():
            floor[p] = at
        parts = batch.column("partition").to_numpy()
        offsets = batch.column("offset").to_numpy()
        known = parts < len(floor)
        keep = ~known | (offsets >= floor[np.where(known, parts, 0)])
        return batch if keep.all() else batch.filter(pa.array(keep))

    def fold(self, batch: pa.RecordBatch) -> int:
        """``batch``'s records (raw, `streaming.cluster.topic_read.RAW_SCHEMA`) decoded with the
        query's own step and each group's folded into its served state (`SnapshotStore.preview`);
        the groups folded."""
        cells: dict[str, list[bytes]] = {}
        for packed in self.decode([batch]):
            for gid, blob in zip(
                packed.column("group_id").to_pylist(), packed.column("packed").to_pylist(), strict=True
            ):
                if gid is not None and blob:  # undecodable keys and filtered groups: the batch's
                    cells.setdefault(gid, []).append(blob)
        folded = 0
        now = self.now_ms()
        for gid, blobs in cells.items():
            cols, _seed = group_columns(list(blobs))
            if cols is None or not cols["source_offset"]:
                continue
            partition = int(cols["source_partition"][0])
            offsets = cols["source_offset"]
            fold = self._fold_for(gid, blobs, now)
            if self.store.preview(gid, partition, min(offsets), max(offsets), fold):
                folded += 1
        return folded

    def _fold_for(
        self, gid: str, blobs: list[bytes], now: int
    ) -> Callable[[bytes | None], tuple[bool, bytes | None, dict[str, Any] | None]]:
        config = self.config

        def fold(state: bytes | None) -> tuple[bool, bytes | None, dict[str, Any] | None]:
            gstate = DriverGroupState(now)
            if state is not None:
                gstate.update((blob_version(state), state))
            blob: bytes | None = None
            summary: dict[str, Any] | None = None
            for row in fold_cells(gid, blobs, gstate, config, False):
                kind = row[1]
                if kind == "quarantine":
                    return False, None, None
                if kind == "snapshot":
                    summ = json.loads(row[4])
                    if summ.get("exists", True):
                        blob, summary = bytes(row[5]), summ
                    else:
                        blob, summary = None, None
                elif kind == "deleted":
                    blob, summary = None, None
            return True, blob, summary

        return fold
