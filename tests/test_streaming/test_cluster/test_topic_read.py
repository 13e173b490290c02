"""The driver's whole-topic read in columns (`streaming.cluster.topic_read`): the frame layout, and
the records it yields against capture's record-by-record read of the same topic (Kafka's consumer
either way, another path across py4j)."""

from __future__ import annotations

import struct
from typing import Any

import pytest

from streaming.cluster.topic_read import RAW_SCHEMA, TopicMissingError, TopicRead, parse_columns, read_topic


def _frame(
    positions: dict[int, int], records: list[tuple[int, int, int, bytes | None, bytes | None]]
) -> bytes:
    """What ``TopicDump.pollColumns`` writes (its Javadoc), made by hand."""
    out = struct.pack(">i", len(positions))
    for p, at in positions.items():
        out += struct.pack(">iq", p, at)
    out += struct.pack(">i", len(records))
    out += b"".join(struct.pack(">i", r[0]) for r in records)
    out += b"".join(struct.pack(">q", r[1]) for r in records)
    out += b"".join(struct.pack(">q", r[2]) for r in records)
    for i in (3, 4):
        out += b"".join(struct.pack(">i", -1 if r[i] is None else len(r[i])) for r in records)  # type: ignore[arg-type]
    for i in (3, 4):
        out += b"".join(r[i] or b"" for r in records)  # type: ignore[misc]
    return out


def test_columns_round_trip_nulls_empties_and_wide_values() -> None:
    records = [
        (0, 0, 1_700_000_000_000, b"\x00\x01k", b"value"),
        (7, 2**40, -1, b"k2", None),  # a tombstone; a timestamp Kafka reports as -1
        (2**31 - 1, 5, 0, None, b""),  # a null key (never on __consumer_offsets) and an empty value
        (3, 9, 1, b"", b"\xff" * 100_000),
    ]
    positions, batch = parse_columns(_frame({0: 1, 7: 2**40 + 1, 3: 10}, records))
    assert positions == {0: 1, 7: 2**40 + 1, 3: 10}
    assert batch.schema == RAW_SCHEMA
    assert batch.to_pylist() == [
        {"key": k, "value": v, "partition": p, "offset": o, "timestamp": t} for p, o, t, k, v in records
    ]
    assert batch.column("value").null_count == 1 and batch.column("key").null_count == 1


def test_an_empty_answer_and_a_torn_one() -> None:
    positions, batch = parse_columns(_frame({4: 12}, []))
    assert positions == {4: 12} and batch.num_rows == 0
    whole = _frame({}, [(0, 0, 0, b"k", b"v")])
    with pytest.raises(ValueError, match="column frame"):
        parse_columns(whole + b"x")


@pytest.mark.broker
def test_the_topic_in_columns_is_the_topic_record_by_record(
    driver_jvm: Any, kafka: Any, scenarios: dict[str, Any]
) -> None:
    """Every scenario's records (every record family, tombstones, a committed and an aborted
    transaction) read both ways under read_committed: the same records in the same order per
    partition; the ends are the last stable offsets, which the read reaches."""
    from streaming.app.capture_cmd import iter_topic

    conf = {"bootstrap.servers": kafka.bootstrap, "isolation.level": "read_committed"}
    read = TopicRead()
    rows = [
        r for batch in read_topic(driver_jvm, conf, "__consumer_offsets", read) for r in batch.to_pylist()
    ]
    captured = list(iter_topic(kafka.bootstrap, jvm=driver_jvm))
    assert read.records == len(rows) == len(captured) > 100
    mine = sorted((r["partition"], r["offset"], r["timestamp"], r["key"], r["value"]) for r in rows)
    theirs = sorted((c.partition, c.offset, c.timestamp_ms, c.key, c.value) for c in captured)
    assert mine == theirs
    assert any(r["value"] is None for r in rows)  # tombstones arrive as nulls
    for p in {r["partition"] for r in rows}:  # offset order within each partition
        offsets = [r["offset"] for r in rows if r["partition"] == p]
        assert offsets == sorted(offsets) and offsets[-1] < read.ends[p]
    assert set(read.ends) == set(read.starts) and all(read.ends[p] >= read.starts[p] for p in read.ends)


@pytest.mark.broker
def test_a_missing_topic_is_named(driver_jvm: Any, kafka: Any) -> None:
    with pytest.raises(TopicMissingError, match="no-such-topic"):
        list(read_topic(driver_jvm, {"bootstrap.servers": kafka.bootstrap}, "no-such-topic", TopicRead()))
