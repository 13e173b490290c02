"""Stopping a query between two micro-batches (`streaming.pipeline.query.stop_between_batches`), on
the session's real Spark: a foreachBatch call is never interrupted by the stop.

Why it matters: Spark decides whether a py4j error of an interrupted foreachBatch call is an
interruption with a ``(.|\\n)*`` regex over the Python traceback, which overflowed the stream
thread's stack in a full test run (the share-state query: a StackOverflowError on stderr, logging
off or not)."""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

import pytest

from streaming.pipeline.query import stop_between_batches, stop_quietly


def test_stop_between_batches_lets_the_running_foreach_batch_call_finish(spark: Any, tmp_path: Any) -> None:
    started: list[int] = []
    finished: list[int] = []
    in_batch = threading.Event()

    def sink(df: Any, batch_id: int) -> None:
        started.append(batch_id)
        if batch_id >= 1:  # past the first batch (a fresh query's slow one): idle time after each
            in_batch.set()
        time.sleep(0.8)  # a batch long enough for the stop to arrive inside it
        df.count()
        finished.append(batch_id)
        in_batch.clear()

    query = (
        spark.readStream.format("rate")
        .option("rowsPerSecond", 10)
        .load()
        .writeStream.foreachBatch(sink)
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        # a trigger well past a batch's length, so each batch ends before the next is due; with
        # batches back to back (a 0.8 s batch plus a slow df.count() on a loaded machine passing
        # 3 s) the end of one is the start of the next and the stop lands inside that one
        .trigger(processingTime="6 seconds")
        .start()
    )
    try:
        assert in_batch.wait(60), "no micro-batch started"
        t0 = time.monotonic()
        stop_between_batches(query, spark, 30.0, restore=True)
        assert time.monotonic() - t0 < 10  # the running batch's end, not the timeout
        assert not query.isActive
        assert started, "the sink never ran"
        assert started == finished, (started, finished)  # nothing cut short
        assert query.exception() is None
    finally:
        if query.isActive:
            query.stop()


def test_a_stop_whose_stream_thread_never_ends_gives_up_after_the_stop_timeout(
    spark: Any, tmp_path: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """A stream thread held where no interrupt reaches it -- here a foreachBatch call, whose py4j
    socket read Spark's interrupt does not end -- holds ``query.stop()`` for
    ``spark.sql.streaming.stopTimeout`` (the mirror's session sets it: Spark's default waits for
    ever), and the stop then goes on with a warning instead of a hang or a traceback."""
    assert spark.conf.get("spark.sql.streaming.stopTimeout") == "60s"  # BASE_CONF's
    release = threading.Event()
    in_batch = threading.Event()

    def sink(df: Any, batch_id: int) -> None:
        in_batch.set()
        release.wait(120)  # stuck as far as the stream thread can tell

    query = (
        spark.readStream.format("rate")
        .option("rowsPerSecond", 1)
        .load()
        .writeStream.foreachBatch(sink)
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .start()
    )
    spark.conf.set("spark.sql.streaming.stopTimeout", "2s")
    try:
        assert in_batch.wait(60), "no micro-batch started"
        caplog.set_level(logging.WARNING, logger="coordinator_mirror")
        t0 = time.monotonic()
        stop_quietly(query, spark, restore=True)
        took = time.monotonic() - t0
        assert 2 <= took < 20, took
        assert not query.isActive
        assert [r.getMessage() for r in caplog.records] == [
            f"the streaming query {query.name} did not stop within 2s; stopping without it"
        ]
    finally:
        spark.conf.set("spark.sql.streaming.stopTimeout", "60s")
        release.set()
