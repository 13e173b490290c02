"""`streaming.serving.status.MirrorStatus`: one lock, a method per change, copies for readers -- and
the races it closes: writers on several threads (the progress follower growing the positions, the
sink counting batches, the supervisor and the share-state supervisor changing health) while ``/ready``
and ``/metrics`` read."""

from __future__ import annotations

import sys
import threading
import time
from typing import Any

from lab.synthetic import exporter, filled_store
from lab.synthetic import settings as mirror_settings
from streaming.serving.api import ready_body
from streaming.serving.metrics import exposition
from streaming.serving.status import BatchStats, MirrorStatus, PartHealth, Readiness
from streaming.serving.store import SnapshotStore


def test_readiness_moves_from_targets_to_ready_and_the_seed_lowers_targets() -> None:
    status = MirrorStatus()
    status.set_targets({0: 10, 1: 0}, {0: 110, 1: 50})
    assert not status.ready and status.readiness_json()["records_behind"] == 150
    status.seeded({0: 100, 1: 60})  # the driver's read saw less on partition 0, more on 1
    assert status.targets() == {0: 100, 1: 50} and status.ready
    assert status.ready_at_ms is not None


def test_an_empty_topic_is_ready_at_once() -> None:
    status = MirrorStatus()
    status.set_targets({0: 5}, {0: 5})
    assert status.ready


def test_source_changes_are_reported_once_each_way() -> None:
    status = MirrorStatus()
    assert status.source_checked(None) is None
    assert status.source_checked("TimeoutException: no answer") is False
    assert status.source_checked("TimeoutException: still none") is None
    assert status.view().source_error == "TimeoutException: still none"
    assert status.source_checked(None) is True and status.source_up


def test_back_from_an_outage_is_not_ready_until_the_query_progresses() -> None:
    """The cluster answers again while the query may still be blocked in the offset fetch it was
    in when the cluster went away: /ready says "resuming" until a progress of the query."""
    status = MirrorStatus()
    status.set_targets({}, {0: 5})
    status.advance({0: 5})
    assert ready_body(status)[0]
    status.source_checked("TimeoutException: no answer")
    ok, body = ready_body(status)
    assert not ok and body["reason"] == "source unavailable: TimeoutException: no answer"
    status.source_checked(None)
    ok, body = ready_body(status)
    assert not ok and body["reason"].startswith("resuming:") and body["source_up"] is True
    assert status.view().resuming
    status.source_checked(None)  # more answers change nothing: it waits for the query
    assert ready_body(status)[1]["reason"].startswith("resuming:")
    status.advance({0: 5})  # a progress (an idle trigger's: the same positions)
    ok, body = ready_body(status)
    assert ok and body["reason"] is None and not status.view().resuming


def test_a_start_with_the_source_up_is_not_resuming() -> None:
    status = MirrorStatus()
    status.source_checked(None)
    status.set_targets({0: 5}, {0: 5})
    assert ready_body(status)[0] and not status.view().resuming


def test_a_batch_is_counted_once_unless_forced() -> None:
    status = MirrorStatus()
    assert status.count_batch(3) and not status.count_batch(3) and not status.count_batch(2)
    assert status.count_batch(-1, force=True)  # the driver's backfill, counted whatever came before
    assert status.counted_batch == 3


def test_missed_tombstones_are_taken_once() -> None:
    status = MirrorStatus()
    status.drift("downtime")
    assert status.missed_tombstones and status.take_missed_tombstones()
    assert not status.take_missed_tombstones() and status.drift_suspected("downtime") == 1


def test_a_part_health_changes_field_by_field() -> None:
    status = MirrorStatus()
    assert status.part_health("share_state") == PartHealth()
    status.part("share_state", state="restarting", failures=1, failure="boom")
    status.part("share_state", state="running", failure=None, restarts=1)
    assert status.view().parts["share_state"] == PartHealth("running", 1, 1, None, None)
    ok, body = ready_body(status)
    assert body["parts"]["share_state"]["restarts"] == 1 and not ok  # not caught up: parts never decide


def test_readers_get_copies() -> None:
    status = MirrorStatus()
    status.set_targets({}, {0: 5})
    targets = status.targets()
    targets[1] = 9
    assert status.targets() == {0: 5}


def test_writers_on_many_threads_while_ready_and_metrics_read() -> None:
    """Four writer threads change everything a reader reads -- new partitions appear in the positions
    (a dict that grows), tallies, batches, parts, the source -- while three threads render ``/ready``
    and ``/metrics`` and list ``GET /errors``.  Without one lock a reader iterating a dict or deque
    that grows meanwhile raises (``dictionary changed size during iteration``); here every read
    succeeds and every write is counted."""
    m = exporter(mirror_settings(), filled_store(50, 2))
    status: MirrorStatus = m.status
    store: SnapshotStore = m.store
    status.set_targets({}, {p: 10**9 for p in range(4)})
    stop = threading.Event()
    failures: list[BaseException] = []
    reads = [0]
    rounds = 2_000

    def guarded(fn: Any) -> Any:
        def run() -> None:
            try:
                fn()
            except BaseException as exc:  # the test's verdict
                failures.append(exc)

        return run

    def progress() -> None:
        for i in range(rounds):
            status.advance({p: i for p in range(i % 400)}, {p: 10**9 for p in range(i % 400)})

    def sink() -> None:
        for i in range(rounds):
            status.batch_done(BatchStats(batch_id=i))
            if status.count_batch(i):
                status.add_tallies({("event", f"type{i % 50}"): 1})
            store.add_errors([{"status": "error", "source_offset": i}])

    def supervisor() -> None:
        for i in range(rounds):
            status.source_checked(None if i % 2 else "down")
            status.reconciled("ok", {"missing_in_mirror": {f"g{j}" for j in range(i % 30)}}, i)
            status.drift(f"reason{i % 20}")

    def share() -> None:
        for i in range(rounds):
            status.part(f"part{i % 25}", state="running" if i % 2 else "restarting", failures=i)

    def reader() -> None:
        while not stop.is_set():
            ready_body(status)
            exposition(m)
            store.errors_list()
            reads[0] += 1

    writers = [threading.Thread(target=guarded(f)) for f in (progress, sink, supervisor, share)]
    readers = [threading.Thread(target=guarded(reader)) for _ in range(3)]
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as the interpreter can
    try:
        for t in readers + writers:
            t.start()
        for t in writers:
            t.join(120)
        time.sleep(0.05)
    finally:
        stop.set()
        for t in readers:
            t.join(60)
        sys.setswitchinterval(old)
    assert not failures, failures[:3]
    assert reads[0] > 0
    assert sum(n for k, n in status.tallies().items() if k[0] == "event") == rounds
    assert len(status.positions()) == 399 and status.view().last_batch.batch_id == rounds - 1
    assert len(status.parts()) == 25


def test_readiness_alone_is_the_old_unlocked_shape() -> None:
    """`Readiness` is not thread-safe by itself (the status holds it under its lock): its JSON of
    what was set is exact."""
    r = Readiness()
    r.starts, r.targets = {0: 100}, {0: 200}
    r.update({0: 150})
    assert r.to_json()["partitions"]["0"] == {"position": 150, "target": 200, "latest": None, "behind": 50}
