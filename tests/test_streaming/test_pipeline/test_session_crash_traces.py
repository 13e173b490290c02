"""A Python worker that dies of a fatal signal fails its task with its Python stack in the error
(``spark.python.worker.faulthandler.enabled``, set for every mirror session)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

pytestmark = [pytest.mark.spark]


def _crash_in_native_code(batches: Iterator[Any]) -> Iterator[Any]:
    import ctypes

    for batch in batches:
        ctypes.string_at(0)  # a read of address 0: SIGSEGV in the worker
        yield batch


def test_a_worker_segfault_reports_the_workers_python_stack(spark: Any) -> None:
    assert spark.conf.get("spark.python.worker.faulthandler.enabled") == "true"
    with pytest.raises(Exception) as caught:
        spark.range(1).mapInArrow(_crash_in_native_code, "id long").collect()
    message = str(caught.value)
    assert "Segmentation fault" in message, message[-2000:]
    assert "_crash_in_native_code" in message, message[-2000:]  # the crashing frame, by name


# ------------------------------------------------------------- an interrupted foreachBatch call
def _interrupted_jvm_call(spark: Any) -> Any:
    """A real py4j error of a JVM call interrupted as ``query.stop()`` interrupts the stream
    thread (pinned threads: this Python thread's JVM thread is interrupted, then sleeps)."""
    from py4j.protocol import Py4JJavaError

    jvm = spark._jvm
    jvm.java.lang.Thread.currentThread().interrupt()
    with pytest.raises(Py4JJavaError) as caught:
        jvm.java.lang.Thread.sleep(1000)
    return caught.value


def _spark_takes_it_for_an_interruption(spark: Any, message: str) -> bool:
    """Spark's own test (StreamExecution.isInterruptionException) on the error the JVM gets back
    from a Python foreachBatch function that raised with ``message`` as its traceback."""
    jvm = spark._jvm
    execution = jvm.org.apache.spark.sql.execution.streaming.runtime.StreamExecution
    return bool(execution.isInterruptionException(jvm.py4j.Py4JException(message), spark._jsc.sc()))


def test_an_interrupted_sink_call_is_one_line_spark_takes_for_an_interruption(spark: Any) -> None:
    from streaming.pipeline.sinks import interruption_line

    error = _interrupted_jvm_call(spark)
    line = interruption_line(error)
    assert line is not None and "java.lang.InterruptedException" in line
    assert "\n\tat " not in line and len(line) < 300  # no Java stack
    assert _spark_takes_it_for_an_interruption(spark, f"Traceback (most recent call last):\n  ...\n{line}")
    # any other error is left alone
    with pytest.raises(Exception) as other:
        spark._jvm.java.lang.Integer.parseInt("not a number")
    assert interruption_line(other.value) is None
    assert interruption_line(ValueError("java.lang.InterruptedException")) is None


def test_py4j_full_text_of_an_interruption_overflows_sparks_regex(spark: Any) -> None:
    """Why `interruption_line` exists: Spark's regex over py4j's full text (the Java stack trace)
    of a deeply nested interrupted call dies of StackOverflowError.  The day this test fails,
    Spark matches the long text too and `sinks.BatchInterruptedError` can go."""
    from py4j.protocol import Py4JJavaError

    full = "Traceback (most recent call last):\n  ...\npy4j.protocol.Py4JJavaError: "
    full += str(_interrupted_jvm_call(spark))
    full += "\n\tat org.apache.spark.SomeFrame.call(SomeFrame.scala:1)" * 400  # a deep job's stack
    with pytest.raises(Py4JJavaError) as caught:
        _spark_takes_it_for_an_interruption(spark, full)
    assert "StackOverflowError" in str(caught.value)


def test_the_sink_turns_an_interrupted_batch_into_that_line(spark: Any, tmp_path: Any) -> None:
    """`MirrorSink` itself, its collect interrupted as ``query.stop()`` interrupts it."""
    from streaming.pipeline.sinks import BatchInterruptedError, MirrorSink
    from streaming.serving.status import MirrorStatus
    from streaming.serving.store import SnapshotStore
    from streaming.settings import load_settings

    (tmp_path / "none.jsonl").write_text("")
    settings = load_settings(
        source="capture", capture_path=tmp_path / "none.jsonl", checkpoint_location=str(tmp_path)
    )
    sink = MirrorSink(settings, SnapshotStore(), MirrorStatus(), spark)
    df = spark.range(3).selectExpr("'event' AS kind", "CAST(id AS STRING) AS group_id")
    spark._jvm.java.lang.Thread.currentThread().interrupt()  # what query.stop() does to the batch
    with pytest.raises(BatchInterruptedError) as caught:
        sink(df, 0)
    assert str(caught.value).startswith("py4j.protocol.Py4JJavaError: An error occurred while calling")
    assert _spark_takes_it_for_an_interruption(spark, f"Traceback ...\n{caught.value}")
    assert caught.value.__cause__ is None and caught.value.__suppress_context__  # no long chain


def test_the_share_state_sink_turns_an_interrupted_batch_into_that_line(spark: Any) -> None:
    """`ShareSink` the same way: a SIGTERM during a share-state batch printed Spark's
    StackOverflowError (1,000+ lines) in a clean-clone CI run before it shared the wrapper."""
    from streaming.pipeline.share_state import ShareSink
    from streaming.pipeline.sinks import BatchInterruptedError
    from streaming.serving.share import ShareStateStore

    sink = ShareSink(ShareStateStore())
    df = spark.range(3).selectExpr("'counts' AS kind", "CAST(id AS STRING) AS group_id")
    spark._jvm.java.lang.Thread.currentThread().interrupt()
    with pytest.raises(BatchInterruptedError) as caught:
        sink(df, 0)
    assert _spark_takes_it_for_an_interruption(spark, f"Traceback ...\n{caught.value}")
    assert caught.value.__cause__ is None and caught.value.__suppress_context__
