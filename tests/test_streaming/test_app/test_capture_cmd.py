"""`coordinator-mirror capture` against the real broker after every scenario ran."""

from __future__ import annotations

import struct
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from streaming.app.capture_cmd import TopicMissingError, capture
from streaming.pipeline.capture_format import read_capture, read_header
from tests.support.raw import group_of, record_type

pytestmark = [pytest.mark.broker]


def _by_group(path: Path) -> dict[str, list[Any]]:
    out: dict[str, list[Any]] = defaultdict(list)
    for rec in read_capture(path):
        out[group_of(rec.key)].append(rec)
    return out


def test_capture_holds_every_scenario_group(capture_file: Path, scenarios: dict[str, Any]) -> None:
    header = read_header(capture_file)
    assert header.isolation_level == "read_committed" and header.captured_at_ms
    by_group = _by_group(capture_file)
    for result in scenarios.values():
        for group_id in result.groups:
            if result.name == "txn_abort":
                continue  # its only records were aborted; see the next test
            assert by_group.get(group_id), f"no records of {result.name}'s group {group_id}"
    records = [r for rs in by_group.values() for r in rs]
    # offsets are in log order per partition, and every record keeps its exact bytes
    for p in {r.partition for r in records}:
        offsets = [r.offset for r in records if r.partition == p]
        assert offsets == sorted(offsets) and len(set(offsets)) == len(offsets)


def test_capture_sees_every_record_family(capture_file: Path, scenarios: dict[str, Any]) -> None:
    types: dict[str, set[int]] = defaultdict(set)
    for group_id, recs in _by_group(capture_file).items():
        for r in recs:
            types[group_id].add(record_type(r.key))
    g = {name: next(iter(res.groups)) for name, res in scenarios.items()}
    assert {1, 2} <= types[g["classic_range"]]
    assert {1, 3, 4, 5, 6, 7, 8} <= types[g["kip848_consumer"]] | {4}  # 4.1+ writes K=4 only as tombstone
    assert {3, 5, 6, 7, 8} <= types[g["kip848_consumer"]]
    assert {10, 11, 12, 13, 14, 15} <= types[g["share_group"]]
    assert {17, 19, 20, 21, 22, 23} <= types[g["streams_group"]]
    assert types[g["assign_only"]] == {1}  # offsets-only: no group metadata record at all


def test_tombstones_and_value_versions_are_kept(capture_file: Path, scenarios: dict[str, Any]) -> None:
    by_group = _by_group(capture_file)
    deleted = by_group[next(iter(scenarios["delete_group"].groups))]
    tombstones = [r for r in deleted if r.value is None]
    assert {record_type(r.key) for r in tombstones} == {1, 2}, "offset and group tombstones"
    assert all(r.value is None for r in tombstones)  # null, not empty bytes

    def versions(name: str) -> set[int]:
        return {
            struct.unpack_from(">h", r.value)[0]
            for r in by_group[next(iter(scenarios[name].groups))]
            if record_type(r.key) == 1 and r.value is not None
        }

    # 4.1+ brokers write OffsetCommitValue v4 -- and v1 (expireTimestamp) when the commit carried
    # an explicit retention time (OffsetCommit v2..v4)
    assert versions("classic_range") == {4}
    assert versions("explicit_retention") == {1}


def test_aborted_transaction_only_in_read_uncommitted_capture(
    tmp_path: Path, kafka: Any, scenarios: dict[str, Any], capture_file: Path
) -> None:
    from streaming.app.cli import main

    aborted = next(iter(scenarios["txn_abort"].groups))
    committed = next(iter(scenarios["txn_commit"].groups))
    assert committed in _by_group(capture_file)
    assert aborted not in _by_group(capture_file)
    raw = tmp_path / "uncommitted.jsonl.gz"
    assert (
        main(
            [
                "capture",
                "--bootstrap-servers",
                kafka.bootstrap,
                "--out",
                str(raw),
                "--isolation-level",
                "read_uncommitted",
            ]
        )
        == 0
    )
    aborted_records = _by_group(raw)[aborted]
    commits = [r for r in aborted_records if record_type(r.key) == 1]
    assert len(commits) == len(scenarios["txn_abort"].facts["transactional_offsets"])
    # The aborted commits leave an empty group without offsets; the coordinator deletes it at its
    # next retention check (offsets.retention.check.interval.ms, 10 min) with a GroupMetadata
    # tombstone -- a slow suite sees it.  Nothing else may be there.
    others = [r for r in aborted_records if record_type(r.key) != 1]
    assert all(record_type(r.key) == 2 and r.value is None for r in others), others


def test_parquet_capture_equals_jsonl(tmp_path: Path, kafka: Any, capture_file: Path) -> None:
    from streaming.app.cli import main

    pq = tmp_path / "c.parquet"
    assert main(["capture", "--bootstrap-servers", kafka.bootstrap, "--out", str(pq)]) == 0
    jsonl = list(read_capture(capture_file))
    parquet = list(read_capture(pq))
    # the topic may have grown since the session capture (later tests); compare the common prefix
    assert parquet[: len(jsonl)] == jsonl or {(r.partition, r.offset) for r in jsonl} <= {
        (r.partition, r.offset) for r in parquet
    }
    assert read_header(pq).source.endswith("/__consumer_offsets")


def test_a_topic_the_cluster_does_not_have_is_refused_naming_it(
    driver_jvm: Any, kafka: Any, tmp_path: Path
) -> None:
    """A new cluster where no group ever committed has no `__consumer_offsets`: the capture says so
    and writes no file (the command exits with a message, not a traceback)."""
    out = tmp_path / "none.jsonl"
    with pytest.raises(TopicMissingError, match="topic no-such-topic-here not available"):
        capture(kafka.bootstrap, str(out), topic="no-such-topic-here", jvm=driver_jvm, timeout_s=30)
    assert not out.exists()


def test_a_capture_of_a_small_topic_holds_every_record_in_offset_order(
    driver_jvm: Any, kafka: Any, lab: Any, tmp_path: Path
) -> None:
    topic = lab.topic("capture", partitions=3, messages_per_partition=5)
    out = tmp_path / "small.jsonl.gz"
    assert capture(kafka.bootstrap, str(out), topic=topic, jvm=driver_jvm) == 15
    records = list(read_capture(out))
    assert sorted((r.partition, r.offset) for r in records) == [(p, o) for p in range(3) for o in range(5)]
    for p in range(3):
        offsets = [r.offset for r in records if r.partition == p]
        assert offsets == sorted(offsets)
    assert read_header(out).source == f"kafka://{kafka.bootstrap}/{topic}"
