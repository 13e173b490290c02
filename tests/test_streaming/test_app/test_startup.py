"""`streaming.app.startup` with fakes: `Beginning` -- the query's first start, and the readiness it
leaves behind when the driver folded the backfill (`streaming.app.backfill`) -- and `SourceCheck`,
which never holds its caller up and bounds every request (tests/test_reliability/test_outage.py
runs it against a real broker stopped and started)."""

from __future__ import annotations

import threading
import time

from streaming.app.startup import Beginning, SourceCheck
from streaming.serving.status import MirrorStatus
from streaming.settings import load_settings


class FakeCluster:
    def __init__(self, ends: dict[int, int]) -> None:
        self.ends = ends

    def topic_partitions(self, topic: str, timeout_s: float | None = None) -> list[int]:
        return sorted(self.ends)

    def partition_offsets(self, topic: str) -> tuple[dict[int, int], dict[int, int]]:
        return dict.fromkeys(self.ends, 0), dict(self.ends)


def _begin(ends_now: dict[int, int], seeded: dict[int, int] | None) -> tuple[MirrorStatus, list[str]]:
    status = MirrorStatus()
    calls: list[str] = []
    beginning = Beginning(
        load_settings(bootstrap_servers="127.0.0.1:9"),
        status,
        FakeCluster(ends_now),  # type: ignore[arg-type]
        recover=lambda: calls.append("recover") or 0,  # type: ignore[func-returns-value]
        start_query=lambda: calls.append("start") or "query",  # type: ignore[func-returns-value,return-value]
        hand_over_backfill=lambda: calls.append("hand over") or seeded,  # type: ignore[func-returns-value]
    )
    assert beginning.try_begin() == "query"
    return status, calls


def test_a_seeded_start_is_ready_at_the_ends_its_read_saw() -> None:
    """Commits arrived between the driver's read and the readiness targets (a busy cluster): the
    start catches up with the ends the read saw -- ready as the query starts, not after its
    first batch; the targets of partitions the read reached further stay."""
    status, calls = _begin({0: 100, 1: 50, 2: 7}, {0: 90, 1: 50, 2: 9})
    assert calls == ["recover", "hand over", "start"]
    assert status.ready and status.targets() == {0: 90, 1: 50, 2: 7}
    assert status.positions() == {0: 90, 1: 50, 2: 9}


def test_without_a_seed_the_query_catches_up() -> None:
    status, calls = _begin({0: 100}, None)
    assert calls == ["recover", "hand over", "start"]
    assert not status.ready and status.targets() == {0: 100}
    status.advance({0: 100})
    assert status.ready


class Cluster:
    """A cluster whose answers the test hands out: each request waits for ``answer`` (a value, an
    exception, or ``None`` to keep it waiting), and records the timeout it was given."""

    def __init__(self) -> None:
        self.answer: object = 3
        self.go = threading.Event()
        self.go.set()
        self.timeouts: list[float | None] = []

    def topic_partitions(self, topic: str, timeout_s: float | None = None) -> int:
        self.timeouts.append(timeout_s)
        self.go.wait(30)
        if isinstance(self.answer, Exception):
            raise self.answer
        return int(self.answer)  # type: ignore[call-overload]


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _settle(check: SourceCheck) -> None:
    assert check._running is not None
    check._running[0].join(10)


def test_a_source_check_returns_at_once_and_bounds_its_request() -> None:
    cluster, clock, status = Cluster(), Clock(), MirrorStatus()
    check = SourceCheck(cluster, "__consumer_offsets", status, 10.0, clock=clock)  # type: ignore[arg-type]
    cluster.answer = RuntimeError("org.apache.kafka.common.errors.TimeoutException: Timed out waiting")
    check()
    _settle(check)
    # the request carries half the interval as its own timeout, not the client's
    assert cluster.timeouts == [5.0]
    assert not status.source_up and "TimeoutException" in str(status.view().source_error)
    cluster.answer = 3
    check()
    _settle(check)
    assert status.source_up and status.view().source_error is None

    # a request that hangs: the caller is not held up, and past the timeout it counts as no answer
    cluster.go.clear()
    began = time.monotonic()
    check()
    assert time.monotonic() - began < 1.0
    assert status.source_up  # not yet past the timeout
    clock.now += 4.0
    check()  # still under way: no second request
    assert len(cluster.timeouts) == 3 and status.source_up
    clock.now += 2.0
    check()
    assert not status.source_up and status.view().source_error == "no answer within 6s"
    assert len(cluster.timeouts) == 3
    cluster.go.set()  # it answers after all: the next verdict says so
    _settle(check)
    assert status.source_up


def test_a_result_that_comes_while_the_mirror_stops_is_dropped() -> None:
    cluster, status = Cluster(), MirrorStatus()
    stopping = threading.Event()
    check = SourceCheck(cluster, "t", status, 2.0, stopping=stopping.is_set)  # type: ignore[arg-type]
    cluster.go.clear()
    check()
    stopping.set()
    cluster.answer = RuntimeError("py4j.protocol.Py4JNetworkError: Answer from Java side is empty")
    cluster.go.set()
    _settle(check)
    assert status.source_up and status.view().source_error is None
