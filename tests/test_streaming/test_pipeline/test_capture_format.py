"""The capture file (`streaming.pipeline.capture_format`): every record's bytes kept exactly --
tombstones null, empty values empty, keys of any bytes -- through JSON lines, gzipped JSON lines and
Parquet alike, with the header; written atomically; a damaged line named by file and line."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from streaming.pipeline.capture_format import (
    CapturedRecord,
    CaptureFormatError,
    CaptureHeader,
    read_capture,
    read_header,
    write_capture,
)
from tests.support.records import commit_key, commit_value, group_key

RECORDS = [
    CapturedRecord(0, 0, 1_700_000_000_000, commit_key("g/ü", "t", 3), commit_value(42)),
    CapturedRecord(0, 1, 1_700_000_000_001, group_key("g/ü"), None),  # a tombstone
    CapturedRecord(7, 2**40, 0, b"\x00\x63", b""),  # an empty value is not a tombstone
    CapturedRecord(49, 5, 1, bytes(range(256)), bytes(range(255, -1, -1)) * 40),
]
HEADER = CaptureHeader(
    source="kafka://b:9092/__consumer_offsets",
    kafka_version="4.3.1",
    isolation_level="read_uncommitted",
    captured_at_ms=1_700_000_000_123,
    extra={"note": "ünïcode"},
)


@pytest.mark.parametrize("name", ["c.jsonl", "c.jsonl.gz", "c.parquet"])
def test_every_byte_and_the_header_round_trip(tmp_path: Path, name: str) -> None:
    path = tmp_path / "deeper" / name  # the folder is made
    assert write_capture(path, HEADER, iter(RECORDS)) == len(RECORDS)
    assert list(read_capture(path)) == RECORDS
    assert read_header(path) == HEADER
    assert [p.name for p in path.parent.iterdir()] == [name]  # no temporary file left


def test_the_json_lines_are_what_the_docstring_says(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl.gz"
    write_capture(path, CaptureHeader(source="x"), RECORDS[:2])
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        lines = [json.loads(line) for line in fh]
    assert lines[0] == {"capture": {"format": 1, "source": "x", "kafka_version": None,
                                    "isolation_level": "read_committed", "captured_at_ms": None}}  # fmt: skip
    assert lines[1] == {
        "partition": 0,
        "offset": 0,
        "timestamp": 1_700_000_000_000,
        "key": RECORDS[0].key.hex(),
        "value": RECORDS[0].value.hex(),  # type: ignore[union-attr]
    }
    assert lines[2]["value"] is None


def test_a_file_without_a_header_reads_with_the_defaults(tmp_path: Path) -> None:
    path = tmp_path / "bare.jsonl"
    path.write_text('{"partition": 1, "offset": 2, "timestamp": 3, "key": "0001", "value": null}\n\n')
    assert read_header(path) == CaptureHeader()
    assert list(read_capture(path)) == [CapturedRecord(1, 2, 3, b"\x00\x01", None)]
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    assert read_header(empty) == CaptureHeader() and list(read_capture(empty)) == []


@pytest.mark.parametrize(
    ("line", "what"),
    [
        ("not json", "JSONDecodeError"),
        ('{"partition": 1, "offset": 2, "timestamp": 3, "key": "zz", "value": null}', "ValueError"),
        ('{"partition": 1, "offset": 2, "timestamp": 3, "value": null}', "KeyError"),
    ],
    ids=["not-json", "bad-hex", "no-key"],
)
def test_a_damaged_line_is_named_by_file_and_line(tmp_path: Path, line: str, what: str) -> None:
    path = tmp_path / "bad.jsonl"
    write_capture(path, HEADER, RECORDS[:1])
    path.write_text(path.read_text() + line + "\n")
    with pytest.raises(CaptureFormatError, match=rf"bad.jsonl:3: {what}"):
        list(read_capture(path))


def test_a_header_line_that_is_not_json_is_named(tmp_path: Path) -> None:
    path = tmp_path / "odd.jsonl"
    path.write_text("capture of 12 May\n")
    with pytest.raises(CaptureFormatError, match=r"odd.jsonl:1: not JSON"):
        read_header(path)
