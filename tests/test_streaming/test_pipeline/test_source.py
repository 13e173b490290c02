"""The mirror's input (`streaming.pipeline.source`): the Kafka source's options; and Spark Structured
Streaming reading `__consumer_offsets` from the real broker.

Settles spark-notes §0.1 on a real broker: Spark's default (AdminClient) offset reader lists no
partitions of an internal topic, the consumer-based reader lists them all; and read_committed
keeps an aborted transactional offset commit out of the stream.
"""

from __future__ import annotations

import json
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from streaming.pipeline.capture_format import read_capture
from tests.support.raw import group_of, record_type

DEPRECATED_FETCHING = "spark.sql.streaming.kafka.useDeprecatedOffsetFetching"


def _read_all(spark: Any, bootstrap: str, tmp: Path, **options: str) -> list[Any]:
    """Read __consumer_offsets from earliest to the current end with a streaming query."""
    name = f"co_{uuid.uuid4().hex[:8]}"
    reader = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", "__consumer_offsets")
        .option("startingOffsets", "earliest")
        .option("failOnDataLoss", "true")
    )
    for key, value in options.items():
        reader = reader.option(key, value)
    query = (
        reader.load()
        .writeStream.format("memory")
        .queryName(name)
        .option("checkpointLocation", str(tmp / name))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(300)
    assert query.exception() is None, query.exception()
    rows = spark.sql(f"select partition, offset, key, value from {name}").collect()
    spark.catalog.dropTempView(name)
    return rows


@pytest.mark.broker
@pytest.mark.spark
def test_default_offset_reader_lists_no_internal_partitions(
    spark: Any, kafka: Any, scenarios: Any, tmp_path: Path
) -> None:
    """If Spark ever stops filtering internal topics this fails, and the workaround can go."""
    spark.conf.set(DEPRECATED_FETCHING, "false")
    try:
        rows = _read_all(spark, kafka.bootstrap, tmp_path, **{"kafka.isolation.level": "read_committed"})
    finally:
        spark.conf.set(DEPRECATED_FETCHING, "true")
    assert rows == []


@pytest.mark.broker
@pytest.mark.spark
def test_rows_of_every_scenario_reach_spark_and_aborted_commits_do_not(
    spark: Any, kafka: Any, scenarios: dict[str, Any], capture_file: Path, tmp_path: Path
) -> None:
    assert spark.conf.get(DEPRECATED_FETCHING) == "true"
    rows = _read_all(spark, kafka.bootstrap, tmp_path, **{"kafka.isolation.level": "read_committed"})
    seen = Counter(group_of(bytes(r.key)) for r in rows)
    commits = Counter(group_of(bytes(r.key)) for r in rows if record_type(bytes(r.key)) in (0, 1))
    for result in scenarios.values():
        for group_id in result.groups:
            if result.name != "txn_abort":
                assert seen[group_id] > 0, f"no rows for {result.name}'s group {group_id}"
    aborted = next(iter(scenarios["txn_abort"].groups))
    committed = next(iter(scenarios["txn_commit"].groups))
    # No offset commit of the aborted transaction is visible.  (The group itself may be: the
    # coordinator deletes an empty group without offsets at its next retention check and writes
    # a GroupMetadata tombstone for it.)
    assert commits[aborted] == 0
    assert all(
        r.value is None and record_type(bytes(r.key)) == 2 for r in rows if group_of(bytes(r.key)) == aborted
    )
    assert seen[committed] == len(scenarios["txn_commit"].facts["transactional_offsets"])
    # Spark sees exactly the bytes the capture command saw (same isolation level)
    by_pos = {
        (r.partition, r.offset): (bytes(r.key), None if r.value is None else bytes(r.value)) for r in rows
    }
    for rec in read_capture(capture_file):
        assert by_pos[(rec.partition, rec.offset)] == (rec.key, rec.value)
    # tombstones arrive as null values
    assert any(r.value is None and record_type(bytes(r.key)) == 2 for r in rows)


@pytest.mark.broker
@pytest.mark.spark
def test_read_uncommitted_would_let_the_aborted_commit_through(
    spark: Any, kafka: Any, scenarios: dict[str, Any], tmp_path: Path
) -> None:
    rows = _read_all(spark, kafka.bootstrap, tmp_path, **{"kafka.isolation.level": "read_uncommitted"})
    aborted = next(iter(scenarios["txn_abort"].groups))
    leaked = [r for r in rows if group_of(bytes(r.key)) == aborted and record_type(bytes(r.key)) in (0, 1)]
    assert len(leaked) == len(scenarios["txn_abort"].facts["transactional_offsets"])


# ---------------------------------------------------------------- the source's options, no Spark
def test_the_kafka_sources_options() -> None:
    from lab.synthetic import settings
    from streaming.pipeline.source import kafka_options

    s = settings(kafka_options={"security.protocol": "SASL_SSL", "fetch.max.wait.ms": "25"})
    subscribed = kafka_options(s)
    assert subscribed["subscribe"] == "__consumer_offsets" and "assign" not in subscribed
    assert (
        subscribed["kafka.isolation.level"] == "read_committed"
    )  # only committed commits, as the coordinator
    assert subscribed["failOnDataLoss"] == "true" and subscribed["startingOffsets"] == "earliest"
    assert subscribed["kafka.security.protocol"] == "SASL_SSL"  # every option passed through
    assert subscribed["kafka.fetch.max.wait.ms"] == "25"  # a user's option over the default 0
    assigned = kafka_options(s, [3, 0, 1], fail_on_data_loss=False, starting_offsets='{"x": 1}')
    assert json.loads(assigned["assign"]) == {"__consumer_offsets": [0, 1, 3]} and "subscribe" not in assigned
    assert (assigned["failOnDataLoss"], assigned["startingOffsets"]) == ("false", '{"x": 1}')
    assert kafka_options(settings())["kafka.fetch.max.wait.ms"] == "0"


def test_the_kafka_source_needs_bootstrap_servers(tmp_path: Path) -> None:
    from lab.synthetic import settings
    from streaming.pipeline.source import kafka_options

    capture = tmp_path / "c.jsonl"
    capture.write_text("")
    with pytest.raises(ValueError, match="bootstrap_servers: required for the kafka source"):
        kafka_options(settings(source="capture", capture_path=capture, bootstrap_servers=None))
