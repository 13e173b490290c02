"""How the query runs, as the driver sees it (`streaming.serving.run_status.RunStatus`): observed
decode counts summed per batch, the last `HISTORY_KEPT` batches of progress, and whether the query
is healthy -- asked of it, or without a query from the last failure; copies for readers while the
progress thread writes."""

from __future__ import annotations

import threading

from streaming.serving.run_status import HISTORY_KEPT, RunStatus


def test_observed_counts_add_up_and_nothing_adds_nothing() -> None:
    rs = RunStatus()
    rs.add_observed({"records": 10, "errors": 0, "unknown": None, "commits": 7})
    rs.add_observed({"records": 5, "errors": 2})
    assert rs.observed_counts() == {"records": 15, "errors": 2, "commits": 7}
    copy = rs.observed_counts()
    copy["records"] = -1
    assert rs.observed_counts()["records"] == 15


def test_the_history_keeps_the_last_batches_in_order() -> None:
    rs = RunStatus()
    for i in range(HISTORY_KEPT + 25):
        rs.add_batch({"batch_id": i})
    history = rs.history()
    assert [e["batch_id"] for e in history] == list(range(25, HISTORY_KEPT + 25))
    history.clear()
    assert len(rs.history()) == HISTORY_KEPT


def test_healthy_asks_the_query_and_a_query_that_cannot_answer_is_unhealthy() -> None:
    assert RunStatus().healthy(None) is True
    assert RunStatus().healthy("query failed: boom") is False
    assert RunStatus(lambda: True).healthy("an old failure") is True  # the query runs now
    assert RunStatus(lambda: False).healthy(None) is False

    def gone() -> bool:
        raise ConnectionError("py4j: the JVM is gone")

    assert RunStatus(gone).healthy(None) is False


def test_a_writer_and_readers_on_several_threads() -> None:
    rs = RunStatus()
    stop = threading.Event()
    seen: list[int] = []

    def read() -> None:
        while not stop.is_set():
            seen.append(len(rs.history()) + sum(rs.observed_counts().values()))

    readers = [threading.Thread(target=read) for _ in range(3)]
    for t in readers:
        t.start()
    for i in range(2000):
        rs.add_batch({"batch_id": i})
        rs.add_observed({"records": 1})
    stop.set()
    for t in readers:
        t.join()
    assert rs.observed_counts() == {"records": 2000} and len(rs.history()) == HISTORY_KEPT
