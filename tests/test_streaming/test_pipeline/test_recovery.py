"""Rebuilding the driver's store after a restart (`streaming.pipeline.recovery`): each state row's
summary -- a quarantined row and bytes that do not decode kept as quarantined, a deleted group left
out -- without Spark; and through the session's Hadoop file system (the shared Spark session) the
checkpoint's logs: whether a batch was planned or committed, where the last committed one left the
topic, ``mirror.json`` written and read back.  The whole recovery after a restart: test_mirror.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from lab.synthetic import STATE_SETTINGS, stable_classic
from state import codec
from state.model import Group
from state.snapshot import summary
from streaming.pipeline.recovery import (
    CHECKPOINT_META_FORMAT,
    SparkCheckpointFiles,
    _summary_rows,
    has_committed_batch,
    has_planned_batch,
    offset_log_has_ticks,
    parse_offset_log,
    planned_with_ticks,
)


def test_parse_offset_log_reads_the_kafka_source_line() -> None:
    text = (
        'v1\n{"batchWatermarkMs":0,"batchTimestampMs":1,"conf":{}}\n{"__consumer_offsets":{"1":12,"0":30}}\n'
    )
    assert parse_offset_log(text, "__consumer_offsets") == {0: 30, 1: 12}
    assert parse_offset_log(text, "other") is None
    assert parse_offset_log("v1\n{}\n-\n", "__consumer_offsets") is None


#: the source lines of a query planned with the tick source, as Spark 4.2 wrote them in a test run:
#: Kafka's, the rate source's (a bare number) and the side input's (the file source)
TICKS_LINES = '{"__consumer_offsets":{"0":220,"1":81}}\n3\n{"logOffset":0}'


def test_offset_log_has_ticks_finds_the_rate_sources_bare_number() -> None:
    head = 'v1\n{"batchWatermarkMs":0,"batchTimestampMs":1,"conf":{"a":"1"}}\n'
    assert offset_log_has_ticks(head + TICKS_LINES + "\n")
    assert offset_log_has_ticks(head + '{"__consumer_offsets":{"0":1}}\n0\n')  # before the side input
    assert not offset_log_has_ticks(head + '{"__consumer_offsets":{"0":220}}\n{"logOffset":4}\n')
    assert not offset_log_has_ticks(head + '{"__consumer_offsets":{"0":220}}\n-\ntrue\n')
    assert not offset_log_has_ticks("v1\n7\n")  # the header lines are not sources


def test_each_state_rows_summary_and_what_stays_quarantined() -> None:
    live = stable_classic("g/ü", 2)
    gone = Group("gone")  # a group whose state row holds no group object any more
    rows = [
        ("g/ü", 2, codec.encode(live)),
        ("q", -2, codec.encode(stable_classic("q", 1))),  # quarantined before the restart
        ("bad", 2, b"\x02garbage"),
        ("gone", 2, codec.encode(gone)),
        ("empty", None, b""),
    ]
    out = {gid: (blob, text, reason) for gid, blob, text, reason in _summary_rows(STATE_SETTINGS, iter(rows))}
    assert set(out) == {"g/ü", "q", "bad"}
    blob, text, reason = out["g/ü"]
    assert blob == rows[0][2] and reason is None
    assert json.loads(text) == json.loads(json.dumps(summary(live, STATE_SETTINGS)))
    assert out["q"][2] == "quarantined before the restart (the details were not kept)"
    assert out["q"][0] is not None  # its bytes still render
    assert out["bad"][:2] == (None, None) and out["bad"][2].startswith("StateCodecError: ")


def _checkpoint(tmp_path: Path, offsets: dict[int, str], commits: list[int]) -> str:
    root = tmp_path / "cp"
    (root / "offsets").mkdir(parents=True)
    (root / "commits").mkdir()
    for batch, line in offsets.items():
        (root / "offsets" / str(batch)).write_text(f'v1\n{{"batchWatermarkMs":0}}\n{line}\n')
    for batch in commits:
        (root / "commits" / str(batch)).write_text('v1\n{"nextBatchWatermarkMs":0}\n')
    (root / "offsets" / ".0.crc").write_text("")  # Hadoop's checksums are not batches
    return str(root)


@pytest.mark.spark
def test_the_checkpoints_logs_through_hadoop(spark: Any, tmp_path: Path) -> None:
    new = _checkpoint(tmp_path / "new", {}, [])
    assert not has_planned_batch(spark, new) and not has_committed_batch(spark, new)
    assert SparkCheckpointFiles(spark, new, "__consumer_offsets").committed_offsets() is None
    planned = _checkpoint(tmp_path / "planned", {0: '{"__consumer_offsets":{"0":5}}'}, [])
    assert has_planned_batch(spark, planned) and not has_committed_batch(spark, planned)
    ran = _checkpoint(
        tmp_path / "ran",
        {
            0: '{"__consumer_offsets":{"0":5}}',
            1: '{"__consumer_offsets":{"0":9,"1":3}}',
            2: '{"__consumer_offsets":{"0":11}}',
        },
        [0, 1],  # batch 2 planned, not committed: the position is batch 1's
    )
    assert SparkCheckpointFiles(spark, ran, "__consumer_offsets").committed_offsets() == {0: 9, 1: 3}
    assert SparkCheckpointFiles(spark, "file:" + ran, "other-topic").committed_offsets() is None
    assert not has_planned_batch(spark, str(tmp_path / "nowhere"))
    # the tick source: read from the last planned batch's file
    assert not planned_with_ticks(spark, new) and not planned_with_ticks(spark, ran)
    assert not planned_with_ticks(spark, str(tmp_path / "nowhere"))
    ticked = _checkpoint(tmp_path / "ticked", {0: TICKS_LINES, 1: TICKS_LINES.replace("\n3\n", "\n4\n")}, [0])
    assert planned_with_ticks(spark, ticked) and planned_with_ticks(spark, "file:" + ticked)


@pytest.mark.spark
def test_mirror_json_written_and_read_back(spark: Any, tmp_path: Path) -> None:
    files = SparkCheckpointFiles(spark, str(tmp_path / "cp"), "__consumer_offsets")
    assert files.read_meta() is None
    meta = {"format": CHECKPOINT_META_FORMAT, "cluster_id": "c-ü", "last_batch_ms": 17}
    files.write_meta(meta)
    assert files.read_meta() == meta
    assert json.loads((tmp_path / "cp" / "mirror.json").read_text()) == meta
