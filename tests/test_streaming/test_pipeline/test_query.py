"""Stopping a query between two micro-batches (`streaming.pipeline.query.stop_between_batches`), on
the session's real Spark: a foreachBatch call is never interrupted by the stop.

Why it matters: Spark decides whether a py4j error of an interrupted foreachBatch call is an
interruption with a ``(.|\\n)*`` regex over the Python traceback, which overflowed the stream
thread's stack in a full test run (the share-state query: a StackOverflowError on stderr, logging
off or not)."""

from __future__ import annotations

import threading
import time
from typing import Any

from streaming.pipeline.query import stop_between_batches


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
        .trigger(processingTime="3 seconds")
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
