"""Start-up checks of the checkpoint against the cluster: whose checkpoint it is (claim, cluster
binding), and whether records -- possibly tombstones -- went missing while the mirror was down
(drift: a downtime longer than the topic's ``delete.retention.ms``, or a log start offset past the
checkpoint's position).  Drift is reported (metric, change event, an early reconciliation round),
never fatal.

The checkpoint files and the cluster are collaborators handed in (`CheckpointFiles`,
`CheckpointCluster`), so the rules run against fakes in tests/test_streaming/test_app/test_drift.py.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any, Protocol

from state.events import DriftSuspected
from streaming.app.driver_events import DriverEvents
from streaming.app.errors import EXIT_CONFIG, StartupError, first_line
from streaming.cluster.groups import log_start_drift
from streaming.pipeline.recovery import CHECKPOINT_META_FORMAT
from streaming.serving.status import MirrorStatus

log = logging.getLogger("coordinator_mirror")


class CheckpointFiles(Protocol):
    """``<checkpoint>/mirror.json`` and the position of the last committed batch."""

    def read_meta(self) -> dict[str, Any] | None: ...
    def write_meta(self, meta: dict[str, Any]) -> None: ...
    def committed_offsets(self) -> dict[int, int] | None: ...


class CheckpointCluster(Protocol):
    """What the checks ask of the cluster (`streaming.cluster.groups.ClusterClient`)."""

    def cluster_id(self) -> str: ...
    def delete_retention_ms(self, topic: str) -> int | None: ...
    def log_start_offsets(self, topic: str) -> dict[int, int]: ...


class DriftReporter:
    """A suspected drift: metric, event (written once the sink exists) and an early
    reconciliation round (``possible_missed_tombstones``)."""

    def __init__(self, status: MirrorStatus, events: DriverEvents, clock_ms: Callable[[], int]) -> None:
        self.status = status
        self.events = events
        self.clock_ms = clock_ms

    def suspect(self, reason: str, partitions: tuple[str, ...]) -> None:
        self.status.drift(reason)
        now_ms = self.clock_ms()
        event = DriftSuspected("", None, None, None, reason=reason, partitions=partitions, at_ms=now_ms)
        self.events.write([event.to_json()], now_ms, wait=True)
        self.status.add_tallies({("event", DriftSuspected.TYPE): 1})


def down_too_long(last_batch_ms: int | None, retention_ms: int | None, now_ms: int) -> bool:
    """Was the mirror down (since its last completed batch) longer than tombstones survive?"""
    return (
        bool(last_batch_ms) and retention_ms is not None and now_ms - int(last_batch_ms or 0) > retention_ms
    )


class CheckpointClaim:
    """Refuse another cluster's checkpoint (or a newer format); record ours in ``mirror.json``;
    report drift; keep ``last_batch_ms`` current while running (`keep`)."""

    def __init__(
        self,
        checkpoint: str,
        topic: str,
        bootstrap: str | None,
        *,
        files: CheckpointFiles,
        cluster: CheckpointCluster,
        drift: DriftReporter,
        clock_ms: Callable[[], int],
    ) -> None:
        self.checkpoint = checkpoint
        self.topic = topic
        self.bootstrap = bootstrap
        self.files = files
        self.cluster = cluster
        self.drift = drift
        self.clock_ms = clock_ms
        self.meta: dict[str, Any] = {}
        self._written = 0.0

    def claim(self) -> None:
        """Warn when the mirror was down longer than the topic's ``delete.retention.ms``
        (tombstones of groups deleted meanwhile may be compacted away: the first reconciliation
        round runs right after the catch-up)."""
        cluster_id = self.cluster.cluster_id()
        meta = self.files.read_meta()
        if meta is not None:
            if int(meta.get("format", 0)) > CHECKPOINT_META_FORMAT:
                raise StartupError(
                    f"the checkpoint at {self.checkpoint} was written by a newer mirror (format "
                    f"{meta.get('format')}, this one reads up to {CHECKPOINT_META_FORMAT}): run that "
                    "version, or point checkpoint_location at a new directory (the mirror then "
                    "rebuilds from the topic).",
                    EXIT_CONFIG,
                )
            if meta.get("cluster_id") and meta["cluster_id"] != cluster_id:
                raise StartupError(
                    f"the checkpoint at {self.checkpoint} belongs to Kafka cluster "
                    f"{meta['cluster_id']}, but {self.bootstrap} is cluster {cluster_id}: point "
                    "checkpoint_location at this cluster's checkpoint (or a new directory), or fix "
                    "bootstrap_servers.",
                    EXIT_CONFIG,
                )
            last = meta.get("last_batch_ms")
            retention = self.cluster.delete_retention_ms(self.topic)
            now_ms = self.clock_ms()
            if down_too_long(last, retention, now_ms):
                assert retention is not None and last
                log.warning(
                    "the mirror was down %.1f h, longer than %s's delete.retention.ms (%.1f h): "
                    "tombstones of groups deleted meanwhile may be gone; reconciling with the "
                    "coordinators after the catch-up",
                    (now_ms - int(last)) / 3_600_000,
                    self.topic,
                    retention / 3_600_000,
                )
                self.drift.suspect("downtime", ())
        self.check_log_start()
        self.meta = {
            "format": CHECKPOINT_META_FORMAT,
            "cluster_id": cluster_id,
            "last_batch_ms": (meta or {}).get("last_batch_ms"),
        }
        self.files.write_meta(self.meta)
        self._written = time.monotonic()

    def check_log_start(self) -> None:
        """A log start offset past the checkpoint's position: records (possibly tombstones) were
        removed while the mirror was down, and the query will skip them."""
        committed = self.files.committed_offsets()
        if not committed:
            return
        try:
            starts = self.cluster.log_start_offsets(self.topic)
        except Exception as exc:  # not fatal: the periodic reconciliation still runs
            log.warning(
                "drift check: the log start offsets of %s are unknown: %s", self.topic, first_line(str(exc))
            )
            return
        drift = log_start_drift(committed, starts)
        if drift:
            parts = tuple(f"{p}:{c}->{start}" for p, (c, start) in drift.items())
            log.warning(
                "%s: the log start offset of %d partition(s) is past the checkpoint (%s): records removed "
                "while the mirror was down are skipped, groups deleted meanwhile may look alive; "
                "reconciling with the coordinators after the catch-up",
                self.topic,
                len(drift),
                ", ".join(parts[:5]),
            )
            self.drift.suspect("log_start", parts)  # the query then starts with failOnDataLoss off

    def keep(self, finished_at_ms: int) -> None:
        """Keep ``mirror.json``'s ``last_batch_ms`` (how long the mirror was down, at the next
        start) within a minute of the truth."""
        if not self.meta or time.monotonic() - self._written < 60:
            return
        if finished_at_ms and finished_at_ms != self.meta.get("last_batch_ms"):
            self.meta["last_batch_ms"] = finished_at_ms
            self.files.write_meta(self.meta)
        self._written = time.monotonic()
