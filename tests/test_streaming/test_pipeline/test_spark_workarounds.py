"""The Spark behaviours the mirror still works around, kept under test on the Spark it runs.

Each test asserts that the behaviour behind one workaround still exists.  The day a Spark upgrade
fixes it, the test FAILS: remove the workaround named in that test (and its text in docs/), then the
test.  (The internal-topic filter behind ``useDeprecatedOffsetFetching`` is kept under test in
test_spark_kafka.py.)
"""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.spark]


def _wait(predicate: Any, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s:.0f}s waiting for {what}")
        time.sleep(0.1)


def _timeout_fn(key: tuple[Any, ...], pdfs: Iterator[Any], state: Any) -> Iterator[Any]:
    import pandas as pd

    for _ in pdfs:
        pass
    state.update((1,))
    state.setTimeoutDuration(3_600_000)  # pending for the whole test: the query needs no-data batches
    yield pd.DataFrame({"k": [key[0]]})


def _last_id(log_dir: Path) -> int:
    """The newest batch id in a checkpoint's offsets/ or commits/ log (-1: none)."""
    return max((int(p.name) for p in log_dir.glob("*") if p.name.isdigit()), default=-1)


def test_no_micro_batch_after_a_restart_without_new_data(spark: Any, tmp_path: Path) -> None:
    """Workaround: streaming/pipeline/source.py ``ticks`` (the rate source unioned into the records).

    A stateful query with a processing-time timeout runs a no-data micro-batch on every trigger --
    until it restarts: whether another batch is needed is not restored from the checkpoint, so
    without new input no batch runs and no timeout can fire.  Verified on Spark 4.0.0 and 4.2.0."""
    from pyspark.sql.streaming.state import GroupStateTimeout

    src, ckpt = tmp_path / "in", tmp_path / "ckpt"
    src.mkdir()
    (src / "a.json").write_text(json.dumps({"k": "g1"}) + "\n")

    def start(trigger: str = "200 milliseconds") -> Any:
        return (
            spark.readStream.schema("k string")
            .json(str(src))
            .groupBy("k")
            .applyInPandasWithState(
                _timeout_fn, "k string", "n long", "update", GroupStateTimeout.ProcessingTimeTimeout
            )
            .writeStream.outputMode("update")
            .option("checkpointLocation", str(ckpt))
            .trigger(processingTime=trigger)
            .foreachBatch(lambda df, _id: df.collect())
            .start()
        )

    def committed() -> int:
        return len([p for p in (ckpt / "commits").glob("*") if p.name.isdigit()])

    q = start()
    try:
        # the data batch, then no-data batches while the timeout is pending
        _wait(lambda: committed() >= 3, 300, "a data batch and two no-data batches")
    finally:
        q.stop()
    progress = list(q.recentProgress)
    no_data = [p for p in progress if int(p.numInputRows) == 0 and p.stateOperators]
    assert no_data, "no-data batches ran before the restart"

    # A stop between a batch's offsets and its commit leaves that batch to re-run on restart, and
    # the re-run batch asks for the next one: the restart below must start from a clean stop.
    # With no-data batches of ~0.1 s (checkpoint files cost ~2 ms each) a 200 ms trigger is busy
    # most of the time, so these restarts run at a 2 s trigger and stop right after a commit.
    def settled() -> bool:
        return _last_id(ckpt / "offsets") == _last_id(ckpt / "commits")

    for _ in range(10):
        if settled():
            break
        pending = _last_id(ckpt / "offsets")
        q = start("2 seconds")
        try:
            _wait(lambda: _last_id(ckpt / "commits") >= pending, 300, "the interrupted batch")  # noqa: B023
            deadline = time.monotonic() + 10
            while not settled() and time.monotonic() < deadline:
                time.sleep(0.01)
        finally:
            q.stop()
        progress += q.recentProgress
    else:
        raise AssertionError("ten stops in a row landed between a batch's offsets and its commit")
    before = committed()
    batch_s = max(int(p.durationMs.get("triggerExecution", 0)) for p in progress) / 1000

    q = start()
    try:
        # ~50 triggers, and at least three times the slowest batch of the first run
        window = max(10.0, 3 * batch_s)
        time.sleep(window)
        assert q.isActive and q.exception() is None
        assert committed() == before, (
            "Spark now runs micro-batches after a restart without new data: the tick source "
            "(streaming/pipeline/source.py ticks) can go"
        )
        # new input starts a batch, and no-data batches follow it again
        (src / "b.json").write_text(json.dumps({"k": "g2"}) + "\n")
        _wait(lambda: committed() >= before + 3, 300, "batches after new input")
    finally:
        q.stop()


_FRESH_READ = """
import json, sys
from pyspark.sql import SparkSession

builder = SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false")
for key, value in json.loads(sys.argv[2]).items():
    builder = builder.config(key, value)
spark = builder.getOrCreate()
spark.sparkContext.setLogLevel("OFF")
result = {}
try:
    spark.read.format("statestore").load(sys.argv[1]).collect()
    result["before"] = "ok"
except Exception as exc:
    result["before"] = str(exc)
spark.streams  # the workaround
result["after"] = len(spark.read.format("statestore").load(sys.argv[1]).collect())
print("RESULT " + json.dumps(result))
"""


def test_fresh_session_cannot_read_state_before_the_coordinator_exists(spark: Any, tmp_path: Path) -> None:
    """Workaround: ``spark.streams`` in streaming/pipeline/recovery.py before the state read.

    Loading a RocksDB store reports the snapshot to the driver's StateStoreCoordinator (Spark >= 4.1,
    ``stateStore.coordinatorReportSnapshotUploadLag``), which exists only once the session's
    StreamingQueryManager does.  A restarted mirror reads its checkpoint's state before its query
    starts, so without the workaround the read fails and auto snapshot repair reports a broken
    snapshot.  Verified on Spark 4.2.0."""
    from streaming.pipeline.session import BASE_CONF

    src, ckpt = tmp_path / "in", tmp_path / "ckpt"
    src.mkdir()
    (src / "a.json").write_text("".join(json.dumps({"k": f"g{i}"}) + "\n" for i in range(5)))
    q = (
        spark.readStream.schema("k string")
        .json(str(src))
        .groupBy("k")
        .count()
        .writeStream.outputMode("update")
        .format("noop")
        .option("checkpointLocation", str(ckpt))
        .trigger(availableNow=True)
        .start()
    )
    q.awaitTermination(300)
    assert q.exception() is None

    # a fresh Python and JVM, as after a restart: no streaming query has run in that session
    store_conf = {k: v for k, v in BASE_CONF.items() if ".stateStore." in k}
    store_conf["spark.sql.shuffle.partitions"] = "2"
    out = subprocess.run(
        [sys.executable, "-c", _FRESH_READ, str(ckpt), json.dumps(store_conf)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    lines = [line for line in out.stdout.splitlines() if line.startswith("RESULT ")]
    assert out.returncode == 0 and lines, out.stderr[-3000:]
    result = json.loads(lines[-1].removeprefix("RESULT "))
    assert result["after"] == 5  # with the StreamingQueryManager built, every key is read
    assert result["before"] != "ok", (
        "a fresh session now reads a RocksDB checkpoint's state before any streaming query: "
        "the `spark.streams` line in streaming/pipeline/recovery.py can go"
    )
    assert "AUTO_SNAPSHOT_REPAIR_FAILED" in result["before"], result["before"][:2000]
    assert "Cannot find endpoint: spark://StateStoreCoordinator" in result["before"]


def test_reused_python_worker_collects_garbage_after_every_task(spark: Any) -> None:
    """Workaround: streaming/pipeline/worker_tune.py ``gc.freeze()`` of the worker's long-lived objects.

    A reused PySpark worker runs a full ``gc.collect()`` after every task (``pyspark.daemon``),
    which walks every long-lived object of the worker each time unless they are frozen."""

    def task(_: Iterator[int]) -> Iterator[tuple[int, int]]:
        import builtins
        import gc
        import os

        counter = getattr(builtins, "_cm_full_collections", None)
        if counter is None:
            counter = [0]
            builtins._cm_full_collections = counter  # type: ignore[attr-defined]

            def on_gc(phase: str, info: dict[str, int]) -> None:
                if phase == "stop" and info["generation"] == 2:
                    counter[0] += 1

            gc.callbacks.append(on_gc)
        yield os.getpid(), counter[0]

    # one job of 8 one-element tasks on local[2]: at most two run at a time, so workers are reused
    seen = spark.sparkContext.parallelize(range(8), 8).mapPartitions(task).collect()
    by_pid: dict[int, list[int]] = {}
    for pid, count in seen:
        by_pid.setdefault(pid, []).append(count)
    reused = {pid: counts for pid, counts in by_pid.items() if len(counts) > 1}
    assert reused, f"no Python worker ran two tasks: {seen}"
    for counts in reused.values():
        steps = [b - a for a, b in itertools.pairwise(counts)]
        assert all(step >= 1 for step in steps), (
            f"a reused worker ran a task without a full collection in between ({seen}): "
            "PySpark no longer collects after every task, worker_tune's gc.freeze() can go"
        )


@pytest.mark.broker
def test_executor_reader_waits_out_a_parked_fetch_at_the_log_end(spark: Any, kafka: Any) -> None:
    """Workaround: ``kafka.fetch.max.wait.ms=0`` in streaming/pipeline/source.py kafka_options.

    After its last poll a Spark Kafka reader at the log end asks for the partition's offset range
    (ListOffsets) on the consumer's connection, where it queues behind the next fetch the
    consumer pipelined -- which the broker parks for ``fetch.max.wait.ms``.  So reading a few
    records takes at least ``fetch.max.wait.ms``."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    topic = f"parked-fetch-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": kafka.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(60)
    producer = Producer({"bootstrap.servers": kafka.bootstrap})
    for i in range(20):
        producer.produce(topic, key=b"k", value=str(i).encode())
    assert producer.flush(60) == 0

    def read_s(wait_ms: int) -> float:
        started = time.monotonic()
        rows = (
            spark.read.format("kafka")
            .option("kafka.bootstrap.servers", kafka.bootstrap)
            .option("assign", json.dumps({topic: [0]}))
            .option("startingOffsets", "earliest")
            .option("endingOffsets", "latest")
            .option("kafka.fetch.max.wait.ms", str(wait_ms))
            .load()
            .count()
        )
        assert rows == 20
        return time.monotonic() - started

    read_s(0)  # warm-up: plan, connections, the reader's pooled consumer
    fast = read_s(0)
    slow = read_s(6000)
    assert slow >= 5.5, (
        f"a 20-record read with fetch.max.wait.ms=6000 took {slow:.1f}s: Spark's reader no longer "
        "waits behind the parked fetch, kafka.fetch.max.wait.ms=0 in streaming/pipeline/source.py can go"
    )
    assert fast < slow - 4.0, (fast, slow)  # ... and the mirror's 0 ms avoids the wait


@pytest.mark.spark
def test_quiet_loggers_exist_and_are_raised_to_error(spark: Any) -> None:
    """The session raises the loggers of `QUIET_LOGGERS` to ERROR; each names a class this Spark has
    (a rename in a newer Spark would silently bring the per-batch warnings back)."""
    from streaming.pipeline.session import QUIET_LOGGERS

    jvm = spark._jvm
    for name in QUIET_LOGGERS:
        jvm.java.lang.Class.forName(name)  # raises if Spark moved the class
        level = jvm.org.apache.logging.log4j.LogManager.getLogger(name).getLevel()
        assert str(level.toString()) == "ERROR", (name, str(level.toString()))


def test_hadoop_local_file_system_spawns_a_process_per_file(spark: Any, tmp_path: Path) -> None:
    """Workaround: jvm/localfs (``NoForkLocalFileSystem``, set by streaming/pipeline/session.py
    ``LOCALFS_CONF``).

    Without its native library, Hadoop's own local file system runs ``chmod`` for every file it
    creates and ``readlink`` for every rename through FileContext -- processes the JVM spawns and
    reaps, several per checkpoint file (Hadoop 3.5.0 of pyspark 4.2.0).  Checked on a stock
    instance (the session itself uses ours): the faults of reaped children, which only grow when
    the JVM reaps a child process, grow with a checkpoint file written the way Spark writes it."""
    from lab.checkpoint_fs import stock_checkpoint_file_faults

    assert stock_checkpoint_file_faults(spark, tmp_path) > 0, (
        "Hadoop's stock local file system created and renamed a file without spawning a process: "
        "jvm/localfs (and LOCALFS_CONF in streaming/pipeline/session.py) can go"
    )
