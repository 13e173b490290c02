"""The mirror's input: `__consumer_offsets` from Kafka, or a capture file replayed as a stream.

Both kinds produce the same columns -- ``key binary, value binary (null = tombstone), partition
int, offset long, timestamp long (ms)`` -- so everything downstream is one code path.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from streaming.settings import Settings

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

RAW_COLUMNS = ("key", "value", "partition", "offset", "timestamp")


def kafka_options(
    settings: Settings,
    partitions: list[int] | None = None,
    *,
    fail_on_data_loss: bool = True,
    starting_offsets: str = "earliest",
) -> dict[str, str]:
    """Options for Spark's Kafka source: our fixed semantics plus every ``kafka.*`` pass-through.

    With ``partitions`` known, the source uses ``assign``: Spark's consumer-based offset reader
    (the one that can list internal topics, see streaming.pipeline.session) *joins a consumer group*
    on the driver when it subscribes -- a mirror would then write its own group into the topic it
    mirrors.  ``assign`` reads without any group membership.
    """
    if not settings.bootstrap_servers:
        raise ValueError("bootstrap_servers: required for the kafka source")
    if partitions:
        subscription = {"assign": json.dumps({settings.topic: sorted(partitions)})}
    else:
        subscription = {"subscribe": settings.topic}
    options = {
        "kafka.bootstrap.servers": settings.bootstrap_servers,
        **subscription,
        # A new checkpoint rebuilds state from the whole (compacted) topic -- or, when the driver
        # folded the backfill (streaming.pipeline.backfill), from where the driver's read ended; an
        # existing checkpoint ignores this and resumes where it stopped.
        "startingOffsets": starting_offsets,
        # The coordinator materialises only committed transactional offset commits; so do we.
        "kafka.isolation.level": "read_committed",
        # Compaction gaps and transaction markers are not loss (Spark >= 2.4, SPARK-25005); a log
        # start offset moving past unread data is, and must stop the mirror rather than silently
        # diverge from the coordinator -- unless the driver found that loss at start, reported it
        # (metric, event) and reconciles with the coordinators (``fail_on_data_loss=False``).
        "failOnDataLoss": "true" if fail_on_data_loss else "false",
        "maxOffsetsPerTrigger": str(settings.max_offsets_per_trigger),
        "includeHeaders": "false",
        # Spark's executor reader (4.0 and 4.2) asks for the partition's offset range (two ListOffsets
        # requests) after every poll, and a broker answers a connection's requests in order:
        # they queue behind the consumer's pipelined next fetch, which the broker parks for
        # fetch.max.wait.ms when the reader is at the log end -- the steady state of a live
        # mirror.  At Kafka's default 500 ms every task waited ~0.5 s (a 1,000-record batch over
        # 50 partitions: 16 s; with 10 ms: 5 s).  0: the broker never parks a fetch.  Measured
        # under 500 commits/s over 10k groups (2 cores, 0.5 s trigger): a micro-batch 0.9-1.1 s
        # at 10 ms, 0.46-0.56 s at 0 (commit -> visible p99 2.2-4.5 s -> 1.0-1.6 s).  The
        # consumer only fetches inside a task's poll, and a task only reads offset ranges that
        # exist, so 0 does not spin.  Overridable through kafka_options.  Kept under test:
        # tests/test_streaming/test_pipeline/test_spark_workarounds.py fails once Spark stops waiting.
        "kafka.fetch.max.wait.ms": "0",
        # Records per poll (Kafka's default 500): the reader's per-poll cost above is paid per
        # poll, so a backfill polls ~100x less often with 50,000.  Measured on a 1M-record
        # backfill read + decoded by 2 tasks: 4.0 s at 500, 2.6-3.6 s at 50,000 (docs/performance.md).
        # Memory: one poll holds at most max.partition.fetch.bytes per partition, unchanged.
        "kafka.max.poll.records": "50000",
    }
    for key, value in settings.kafka_options.items():
        options[f"kafka.{key}"] = value
    return options


def read_kafka(
    spark: SparkSession,
    settings: Settings,
    partitions: list[int] | None = None,
    *,
    fail_on_data_loss: bool = True,
    starting_offsets: str = "earliest",
) -> DataFrame:
    from pyspark.sql import functions as F

    reader = spark.readStream.format("kafka")
    options = kafka_options(
        settings, partitions, fail_on_data_loss=fail_on_data_loss, starting_offsets=starting_offsets
    )
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load().select(
        "key",
        "value",
        "partition",
        "offset",
        F.unix_millis(F.col("timestamp")).alias("timestamp"),
    )


def read_capture(spark: SparkSession, settings: Settings) -> DataFrame:
    """Stream a capture file (``.jsonl``, ``.jsonl.gz`` or ``.parquet``) as if it were the topic."""
    from pyspark.sql import functions as F

    path = settings.capture_path
    if path is None:
        raise ValueError("capture_path: required for the capture source")
    path = path.resolve()
    if path.suffix == ".parquet":
        df = (
            spark.readStream.schema("partition int, offset long, timestamp long, key binary, value binary")
            .option("pathGlobFilter", path.name)
            .parquet(str(path.parent))
        )
        return df.select(*RAW_COLUMNS)
    df = (
        spark.readStream.schema("partition int, offset long, timestamp long, key string, value string")
        .option("pathGlobFilter", path.name)
        .json(str(path.parent))
    )
    return df.where(F.col("key").isNotNull()).select(  # the header line has no key
        F.unhex("key").alias("key"),
        F.unhex("value").alias("value"),
        "partition",
        "offset",
        "timestamp",
    )


def ticks(spark: SparkSession) -> DataFrame:
    """One row per second, shaped like the records, that the decode step drops (``partition -1``).

    Why: a stateful query's processing-time timeouts only fire when a micro-batch runs, and after a
    restart Spark (4.0 and 4.2) runs no micro-batch at all until a source has new data (whether
    another batch is needed is not restored from the checkpoint).  On a quiet cluster, offsets
    would then never expire in the mirror.  A source that always has data keeps batches -- and
    timeouts -- running every trigger, at the cost of a micro-batch every trigger on a quiet
    cluster (most of an idle mirror's CPU).  Only queries planned with it keep it (Spark refuses a
    source taken from a planned query: `streaming.pipeline.recovery.planned_with_ticks`); a new
    checkpoint's query has the side input instead and is woken when a deadline is due
    (`streaming.app.wake`).  tests/test_streaming/test_pipeline/test_spark_workarounds.py fails
    once Spark runs batches after such a restart: then the wake's restart case can go too."""
    from pyspark.sql import functions as F

    return (
        spark.readStream.format("rate")
        .option("rowsPerSecond", 1)
        .option("numPartitions", 1)
        .load()
        .select(
            F.lit(None).cast("binary").alias("key"),
            F.lit(None).cast("binary").alias("value"),
            F.lit(-1).cast("int").alias("partition"),
            F.col("value").alias("offset"),
            F.lit(0).cast("long").alias("timestamp"),
        )
    )


def read_source(
    spark: SparkSession,
    settings: Settings,
    partitions: list[int] | None = None,
    *,
    fail_on_data_loss: bool = True,
    starting_offsets: str = "earliest",
    with_ticks: bool = True,
) -> DataFrame:
    """The records (Kafka or capture), with the tick rows that keep micro-batches running when
    ``with_ticks`` (a query that can be woken instead -- `streaming.app.wake` -- has none)."""
    records = (
        read_capture(spark, settings)
        if settings.source == "capture"
        else read_kafka(
            spark,
            settings,
            partitions,
            fail_on_data_loss=fail_on_data_loss,
            starting_offsets=starting_offsets,
        )
    )
    return records.unionByName(ticks(spark)) if with_ticks else records
