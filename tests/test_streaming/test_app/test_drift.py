"""`streaming.app.drift` with a fake cluster and fake checkpoint files: whose checkpoint it is, a
newer format, and the two drift checks -- down longer than ``delete.retention.ms``, a log start
offset past the checkpoint's position -- each reported as metric, event and an early
reconciliation round, never fatal."""

from __future__ import annotations

from typing import Any

import pytest

from streaming.app.drift import CheckpointClaim, DriftReporter, down_too_long
from streaming.app.driver_events import DriverEvents
from streaming.app.errors import EXIT_CONFIG, StartupError
from streaming.pipeline.recovery import CHECKPOINT_META_FORMAT
from streaming.serving.status import MirrorStatus

HOUR = 3_600_000
NOW = 1_700_000_000_000


class FakeCluster:
    def __init__(self, cluster_id: str = "c-1", retention_ms: int | None = 24 * HOUR) -> None:
        self.id = cluster_id
        self.retention_ms = retention_ms
        self.starts: dict[int, int] = {}
        self.starts_error: Exception | None = None

    def cluster_id(self) -> str:
        return self.id

    def delete_retention_ms(self, topic: str) -> int | None:
        return self.retention_ms

    def log_start_offsets(self, topic: str) -> dict[int, int]:
        if self.starts_error is not None:
            raise self.starts_error
        return self.starts


class FakeFiles:
    def __init__(self, meta: dict[str, Any] | None = None, committed: dict[int, int] | None = None) -> None:
        self.meta = meta
        self.committed = committed
        self.written: list[dict[str, Any]] = []

    def read_meta(self) -> dict[str, Any] | None:
        return self.meta

    def write_meta(self, meta: dict[str, Any]) -> None:
        self.written.append(dict(meta))

    def committed_offsets(self) -> dict[int, int] | None:
        return self.committed


class FakeSink:
    def __init__(self) -> None:
        self.written: list[dict[str, Any]] = []

    def write_driver_events(self, events: list[dict[str, Any]], at_ms: int, name: str) -> None:
        self.written.extend(events)


def claim_with(files: FakeFiles, cluster: FakeCluster) -> tuple[CheckpointClaim, MirrorStatus, DriverEvents]:
    status = MirrorStatus()
    events = DriverEvents()
    drift = DriftReporter(status, events, lambda: NOW)
    claim = CheckpointClaim(
        "/ckpt",
        "__consumer_offsets",
        "b:9092",
        files=files,
        cluster=cluster,
        drift=drift,
        clock_ms=lambda: NOW,
    )
    return claim, status, events


@pytest.mark.parametrize(
    ("last_batch_ms", "retention_ms", "drifted"),
    [
        (NOW - 25 * HOUR, 24 * HOUR, True),
        (NOW - 23 * HOUR, 24 * HOUR, False),
        (NOW - 24 * HOUR, 24 * HOUR, False),  # exactly as long: the tombstones are still there
        (None, 24 * HOUR, False),  # never completed a batch
        (NOW - 25 * HOUR, None, False),  # retention unknown (no DescribeConfigs)
    ],
)
def test_down_longer_than_tombstones_survive(
    last_batch_ms: int | None, retention_ms: int | None, drifted: bool
) -> None:
    assert down_too_long(last_batch_ms, retention_ms, NOW) is drifted


def test_a_long_downtime_is_reported_and_the_event_waits_for_the_sink() -> None:
    files = FakeFiles(
        {"format": CHECKPOINT_META_FORMAT, "cluster_id": "c-1", "last_batch_ms": NOW - 48 * HOUR}
    )
    claim, status, events = claim_with(files, FakeCluster())
    claim.claim()
    assert status.view().drift_suspected == {"downtime": 1}
    assert status.missed_tombstones  # an early reconciliation round
    assert status.tallies()[("event", "drift_suspected")] == 1
    sink = FakeSink()
    events.attach(sink)  # type: ignore[arg-type]
    assert [e["reason"] for e in sink.written] == ["downtime"]
    assert files.written[-1] == {
        "format": CHECKPOINT_META_FORMAT,
        "cluster_id": "c-1",
        "last_batch_ms": NOW - 48 * HOUR,
    }


def test_a_log_start_past_the_checkpoint_is_reported_per_partition() -> None:
    files = FakeFiles(committed={0: 100, 1: 50, 2: 10})
    cluster = FakeCluster()
    cluster.starts = {0: 120, 1: 50, 2: 0, 3: 999}  # 3: added since, read from its start
    claim, status, events = claim_with(files, cluster)
    claim.claim()
    assert status.view().drift_suspected == {"log_start": 1}
    sink = FakeSink()
    events.attach(sink)  # type: ignore[arg-type]
    [event] = sink.written
    assert event["reason"] == "log_start" and event["partitions"] == ["0:100->120"]


def test_no_drift_no_report() -> None:
    files = FakeFiles({"format": 1, "cluster_id": "c-1", "last_batch_ms": NOW - HOUR}, committed={0: 100})
    cluster = FakeCluster()
    cluster.starts = {0: 100}
    claim, status, _events = claim_with(files, cluster)
    claim.claim()
    assert status.view().drift_suspected == {} and not status.missed_tombstones


def test_unknown_log_starts_are_not_fatal() -> None:
    cluster = FakeCluster()
    cluster.starts_error = RuntimeError("TimeoutException: ListOffsets")
    claim, status, _events = claim_with(FakeFiles(committed={0: 1}), cluster)
    claim.claim()
    assert status.view().drift_suspected == {}


def test_another_clusters_checkpoint_is_refused() -> None:
    claim, _status, _events = claim_with(
        FakeFiles({"format": 1, "cluster_id": "c-other"}), FakeCluster("c-1")
    )
    with pytest.raises(StartupError, match="belongs to Kafka cluster c-other") as err:
        claim.claim()
    assert err.value.exit_code == EXIT_CONFIG


def test_a_newer_checkpoint_format_is_refused() -> None:
    files = FakeFiles({"format": CHECKPOINT_META_FORMAT + 1, "cluster_id": "c-1"})
    claim, _status, _events = claim_with(files, FakeCluster())
    with pytest.raises(StartupError, match="written by a newer mirror"):
        claim.claim()
    assert not files.written
